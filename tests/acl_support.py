"""A test cluster whose broker runs with ``aclEnable=true`` and a given ``plain_acl.yml``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml

from pocketmq.testing import Cluster, cluster


def write_acl(home: Path, doc: dict[str, Any]) -> Path:
    """Write ``doc`` as ``<home>/conf/plain_acl.yml``; returns the file."""
    (home / "conf").mkdir(parents=True, exist_ok=True)
    path = home / "conf" / "plain_acl.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@contextlib.asynccontextmanager
async def acl_cluster(
    root: Path, doc: dict[str, Any], topics: tuple[str, ...] = (), queues: int = 2, **broker_config: Any
) -> AsyncIterator[Cluster]:
    """A name server and one ACL broker (``rocketmqHome`` = ``root/home``) with ``topics`` created."""
    home = root / "home"
    write_acl(home, doc)
    cfg = {"aclEnable": True, "rocketmqHome": str(home), **broker_config}
    async with cluster(root / "c", broker_config=cfg) as c:
        for topic in topics:
            await c.create_topic(topic, queues=queues)
        yield c
