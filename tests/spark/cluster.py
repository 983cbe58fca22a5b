"""A real in-process cluster (``pocketmq.testing``) driven from blocking test code.

Spark calls block the test thread, so the name server and brokers run on an event loop in a
background thread; every helper submits a coroutine to that loop and waits. Spark's Python
workers (other processes) reach the servers over loopback TCP like any client.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from pocketmq.broker.controller import BrokerController
from pocketmq.client import Message, Producer
from pocketmq.client.api import MQClientAPI
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.transport.client import RemotingClient
from pocketmq.testing import Cluster, cluster

T = TypeVar("T")

#: Small files so that retention really deletes segments and moves queue min offsets.
RETENTION_STORE = {"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 20 * 10}


async def send_to_queue(
    producer: Producer, topic: str, broker: str, queue_id: int, count: int, *, start: int = 0,
    tags: Sequence[str] = ("A", "B", "C"), body_size: int = 0,
) -> None:  # fmt: skip
    """``count`` messages to one queue in batches; bodies say where they were sent."""
    mq = MessageQueue(topic, broker, queue_id)
    step = max(1, min(256, 16_000 // (body_size + 64)))  # a batch stays far below a 64 KiB segment
    for lo in range(start, start + count, step):
        msgs = []
        for i in range(lo, min(lo + step, start + count)):
            body = f"{topic}/{broker}/{queue_id}/{i}".encode()
            msgs.append(Message(topic, body.ljust(body_size, b"."), tags=tags[i % len(tags)], keys=f"k{i}"))
        await producer.send_batch(msgs, queue=mq)


async def commit_offset(c: Cluster, broker_addr: str, group: str, mq: MessageQueue, offset: int) -> None:
    """Store ``group``'s consumer offset of ``mq`` on the broker at ``broker_addr``, as a client would."""
    remoting = RemotingClient()
    try:
        await MQClientAPI(remoting, [c.namesrv_addr]).update_consumer_offset(broker_addr, group, mq, offset)
    finally:
        await remoting.close()


async def force_retention(broker: BrokerController) -> None:
    """Run the store's cleaner now, deleting every CommitLog segment but the newest.

    What ``fileReservedTime`` expiry does hours later; the queues' min offsets then move up.
    """
    clean = broker.store._services.clean  # type: ignore[union-attr]
    await clean.delete_commitlog_files(True)
    clean.clean_queues()


class ThreadedCluster:
    def __init__(self, *, brokers: int = 2, store_config: dict[str, Any] | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="test-cluster-loop", daemon=True)
        self._thread.start()
        self._cm = cluster(brokers=brokers, store_config=store_config)
        self.c: Cluster = self.run(self._cm.__aenter__())
        self.producer = Producer("spark-test-producer", namesrv=self.c.namesrv_addr)
        self.run(self.producer.start())

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def namesrv(self) -> str:
        return self.c.namesrv_addr

    @property
    def broker_names(self) -> list[str]:
        return [b.config.broker_name for b in self.c.brokers]

    def create_topic(self, topic: str, queues: int) -> None:
        self.run(self.c.create_topic(topic, queues=queues))

    def fill(
        self,
        topic: str,
        per_queue: int,
        queues: int,
        *,
        start: int = 0,
        body_size: int = 0,
        only: Sequence[int] | None = None,
    ) -> None:
        """``per_queue`` more messages in each queue (``only`` some queue ids) of every broker."""

        async def go() -> None:
            await asyncio.gather(
                *(
                    send_to_queue(self.producer, topic, b, q, per_queue, start=start, body_size=body_size)
                    for b in self.broker_names
                    for q in (only if only is not None else range(queues))
                )
            )

        self.run(go(), timeout=120)

    def retention(self) -> None:
        for broker in self.c.brokers:
            self.run(force_retention(broker))

    def close(self) -> None:
        try:
            self.run(self.producer.shutdown())
            self.run(self._cm.__aexit__(None, None, None))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()
