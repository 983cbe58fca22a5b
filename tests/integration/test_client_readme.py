"""Every Python example of client/README.md runs to completion against a real cluster."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pocketmq.testing import Cluster, cluster
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - autouse fixture

pytestmark = pytest.mark.integration
README = Path(__file__).resolve().parents[2] / "client" / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


@pytest.fixture
async def pmq(tmp_path) -> AsyncIterator[Cluster]:
    async with cluster(tmp_path / "pmq") as c:
        await c.create_topic("ExampleTopic", queues=4)
        yield c


async def test_readme_examples_run(pmq: Cluster, tmp_path) -> None:
    assert len(EXAMPLES) == 7
    env = {**os.environ, "NAMESRV_ADDR": pmq.namesrv_addr, "HOME": str(tmp_path)}
    outputs: list[str] = []
    for i, code in enumerate(EXAMPLES):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            code,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, f"example {i} failed:\n{err.decode()[-3000:]}"
        assert out.strip(), f"example {i} printed nothing"
        outputs.append(out.decode())
    assert "100 sent asynchronously" in outputs[0] and "batch ids: 50" in outputs[0]
    assert "{'order': 42, 'items': [1, 2, 3]}" in outputs[1]
    # the orderly example saw the three steps in order despite the suspend
    assert "[b'created', b'paid', b'shipped']" in outputs[2]
    assert "tenant topics: ['AdminExample'] messages: 1" in outputs[5]  # MQAdmin with a namespace
    assert "b'pong: ping' DefaultCluster_REPLY_TOPIC" in outputs[6]  # request-reply
