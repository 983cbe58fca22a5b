"""In-process broker fixtures for the broker tests: a real BrokerController on an ephemeral port
(no name server), a tiny store on tmp_path, and a RemotingClient speaking the wire protocol."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.controller import BrokerController
from pocketmq.store.config import MessageStoreConfig
from pocketmq.testing.wire import Wire

__all__ = ["Wire", "broker_config", "running_broker", "tiny_store"]


def tiny_store(root: str, **kw: Any) -> MessageStoreConfig:
    base: dict[str, Any] = {
        "storePathRootDir": root,
        "mappedFileSizeCommitLog": 1 << 20,
        "mappedFileSizeConsumeQueue": 20 * 1000,
        "maxHashSlotNum": 1000,
        "maxIndexNum": 4000,
    }
    base.update(kw)
    return MessageStoreConfig.model_validate(base)


def broker_config(root: str, store: dict[str, Any] | None = None, **kw: Any) -> BrokerConfig:
    data: dict[str, Any] = {
        "brokerName": "broker-a",
        "brokerIP1": "127.0.0.1",
        "listenPort": 0,
        "listenHost": "127.0.0.1",
        "namesrvAddr": None,
        "store": tiny_store(root, **(store or {})),
    }
    data.update(kw)
    return BrokerConfig.model_validate(data)


@contextlib.asynccontextmanager
async def running_broker(
    root: str, store: dict[str, Any] | None = None, **kw: Any
) -> AsyncIterator[BrokerController]:
    controller = BrokerController(broker_config(root, store, **kw), fsync=False)
    await controller.start()
    try:
        yield controller
    finally:
        await controller.shutdown()
