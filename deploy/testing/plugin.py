"""pytest plugin: the ``pocketmq_cluster`` fixture (enable with ``pytest_plugins = ["pocketmq.testing.plugin"]``).

    async def test_send(pocketmq_cluster):
        producer = Producer(group="PG", namesrv_addr=pocketmq_cluster.namesrv_addr)
        ...

    @pytest.mark.parametrize("pocketmq_cluster", [{"brokers": 2}], indirect=True)
    async def test_two_brokers(pocketmq_cluster): ...

Options (indirect parameter or ``@pytest.mark.pocketmq_cluster(**options)``): ``brokers``,
``broker_config``, ``store_config``, ``namesrv_config``, ``fsync`` (see :func:`pocketmq.testing.cluster`).

The cluster lives in the test's event loop (pytest-asyncio) and in ``tmp_path``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from pocketmq.testing import Cluster, cluster


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers",
        "pocketmq_cluster(brokers=1, broker_config=None, store_config=None, namesrv_config=None, fsync=False): "
        "options of the pocketmq_cluster fixture",
    )


@pytest.fixture
async def pocketmq_cluster(request: Any, tmp_path: Any) -> AsyncIterator[Cluster]:
    marker = request.node.get_closest_marker("pocketmq_cluster")
    options: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    options.update(getattr(request, "param", None) or {})
    async with cluster(tmp_path / "pocketmq", **options) as c:
        yield c
