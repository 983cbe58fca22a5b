"""``RebalanceImpl``: turn the group's membership and the topic's queues into this client's
process-queue table (Java ``RebalanceImpl``).

Per subscribed topic:

* broadcasting: take every subscribe queue;
* clustering: ask a broker for the group's consumer ids, sort ids and queues, apply the
  allocation strategy (all members compute the same split);

then diff against the current table: queues no longer ours are dropped (the host persists
their offset and, for orderly consumers, releases the broker lock); new queues get a fresh
``ProcessQueue``, a start offset (``compute_pull_from_where``) and a first pull request. An
orderly consumer only takes a new queue once the broker lock is granted. Queues whose pulls
stalled for 2 min are recycled. Broker locks are renewed by :meth:`lock_all` (every 20 s).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from pocketmq.client.config import MessageModel
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.rebalance import AllocateStrategy
from pocketmq.client.consumer.subscription import SubscriptionData
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol.errors import RemotingError
from pocketmq.remoting.protocol.topics import MASTER_ID

if TYPE_CHECKING:
    from pocketmq.client.consumer.offset_store import OffsetStore
    from pocketmq.client.instance import MQClientInstance

logger = logging.getLogger(__name__)


def now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class RebalanceHost(Protocol):
    """Consumer-specific steps of a rebalance."""

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool: ...

    async def compute_pull_from_where(self, mq: MessageQueue) -> int: ...

    def dispatch_pull(self, mq: MessageQueue, pq: ProcessQueue, offset: int, locked: bool) -> None: ...

    def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None: ...

    def remove_dirty_offset(self, mq: MessageQueue) -> None: ...


class RebalanceImpl:
    def __init__(
        self,
        host: RebalanceHost,
        instance: MQClientInstance,
        group: str,
        model: MessageModel,
        strategy: AllocateStrategy,
        *,
        pull_expire_recycle: bool = True,
    ) -> None:
        self.host = host
        self.instance = instance
        self.group = group
        self.model = model
        self.strategy = strategy
        self.pull_expire_recycle = pull_expire_recycle
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.topic_subscribe_info: dict[str, set[MessageQueue]] = {}
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        # Held by a rebalance and by an offset reset: neither sees the other half-done.
        self.table_lock = asyncio.Lock()

    def subscribe_info_missing(self, topic: str) -> bool:
        """True for a subscribed topic whose queues the rebalance has not seen yet."""
        return topic in self.subscriptions and topic not in self.topic_subscribe_info

    async def do_rebalance(self, is_order: bool) -> None:
        async with self.table_lock:
            for topic in list(self.subscriptions):
                try:
                    await self._rebalance_topic(topic, is_order)
                except asyncio.CancelledError:
                    raise
                except RemotingError as exc:
                    # Expected now and then (a broker restarting, our own unregister racing a
                    # rebalance at shutdown): one line, retried at the next rebalance.
                    logger.warning("rebalance of %s/%s failed: %s", self.group, topic, exc)
                except Exception:
                    logger.exception("rebalance of %s/%s failed", self.group, topic)
            await self._truncate_not_my_topics()

    async def _rebalance_topic(self, topic: str, is_order: bool) -> None:
        mq_set = self.topic_subscribe_info.get(topic)
        if not mq_set:
            # e.g. %RETRY%group, created by the broker on our first heartbeat: fetch it now
            # rather than at the next 30 s route refresh.
            try:
                await self.instance.update_topic_route(topic)
            except Exception as exc:
                logger.debug("route of %s not available yet: %s", topic, exc)
            mq_set = self.topic_subscribe_info.get(topic)
        if not mq_set:
            logger.debug("rebalance %s: no route for topic %s yet", self.group, topic)
            return
        if self.model is MessageModel.BROADCASTING:
            if await self._update_table(topic, set(mq_set), is_order):
                self.host.message_queue_changed(topic, set(mq_set), set(mq_set))
            return
        cids = await self.instance.find_consumer_id_list(topic, self.group)
        if not cids:
            logger.info("rebalance %s/%s: no consumer id from the broker", self.group, topic)
            return
        mq_all = sorted(mq_set)
        cid_all = sorted(set(cids))
        try:
            allocated = set(self.strategy(self.group, self.instance.client_id, mq_all, cid_all))
        except Exception:
            logger.exception("allocation strategy failed for %s/%s", self.group, topic)
            return
        if await self._update_table(topic, allocated, is_order):
            logger.info(
                "rebalance %s/%s: %d consumers, %d queues, mine %s",
                self.group, topic, len(cid_all), len(mq_all), sorted(q.queue_id for q in allocated),
            )  # fmt: skip
            self.host.message_queue_changed(topic, set(mq_set), allocated)

    async def _truncate_not_my_topics(self) -> None:
        for mq in [m for m in self.process_queue_table if m.topic not in self.subscriptions]:
            pq = self.process_queue_table.pop(mq)
            pq.dropped = True

    async def _update_table(self, topic: str, mq_set: set[MessageQueue], is_order: bool) -> bool:
        changed = False
        now = now_ms()
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic != topic:
                continue
            if mq not in mq_set:
                pq.dropped = True
                if await self.host.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)
                    changed = True
            elif self.pull_expire_recycle and pq.is_pull_expired(now):
                logger.warning(
                    "%s: pull of %s stalled for 120 s; recycling its process queue", self.group, mq
                )
                pq.dropped = True
                if await self.host.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)
                    changed = True
        for mq in sorted(mq_set - set(self.process_queue_table)):
            if is_order and not await self.lock(mq):
                logger.info("%s: %s is locked by another consumer; not taken this round", self.group, mq)
                continue
            self.host.remove_dirty_offset(mq)
            offset = await self.host.compute_pull_from_where(mq)
            if offset < 0:
                logger.warning("%s: no start offset for %s yet (%d)", self.group, mq, offset)
                continue
            if mq in self.process_queue_table:
                continue
            pq = ProcessQueue(now_ms())
            if is_order:
                pq.locked = True
                pq.last_lock_timestamp = now_ms()
            self.process_queue_table[mq] = pq
            self.host.dispatch_pull(mq, pq, offset, is_order)
            changed = True
        return changed

    # ------------------------------------------------------------------------- broker locks
    async def lock(self, mq: MessageQueue) -> bool:
        addr = self.instance.find_broker_addr_in_subscribe(mq.broker_name, MASTER_ID, True)
        if addr is None:
            return False
        try:
            locked = await self.instance.api.lock_batch_mq(addr[0], self.group, self.instance.client_id, [mq])
        except Exception as exc:
            logger.info("lock %s failed: %s", mq, exc)
            return False
        pq = self.process_queue_table.get(mq)
        if mq in locked and pq is not None:
            pq.locked = True
            pq.last_lock_timestamp = now_ms()
        return mq in locked

    def _queues_by_master(self) -> Iterator[tuple[str, str, list[MessageQueue]]]:
        """``(broker, master address, queues)`` for the table's queues, broker by broker (the
        address looked up when its turn comes; brokers without a known master are skipped)."""
        by_broker: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq in self.process_queue_table:
            by_broker[mq.broker_name].append(mq)
        for broker, mqs in by_broker.items():
            found = self.instance.find_broker_addr_in_subscribe(broker, MASTER_ID, True)
            if found is not None:
                yield broker, found[0], mqs

    async def lock_all(self) -> None:
        for broker, addr, mqs in self._queues_by_master():
            try:
                locked = await self.instance.api.lock_batch_mq(addr, self.group, self.instance.client_id, mqs)
            except Exception as exc:
                logger.info("lock batch on %s failed: %s", broker, exc)
                continue
            now = now_ms()
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is None:
                    continue
                if mq in locked:
                    if not pq.locked:
                        logger.info("%s: lock of %s regained", self.group, mq)
                    pq.locked = True
                    pq.last_lock_timestamp = now
                else:
                    pq.locked = False

    async def unlock(self, mq: MessageQueue, *, oneway: bool = False) -> None:
        addr = self.instance.find_broker_addr_in_subscribe(mq.broker_name, MASTER_ID, True)
        if addr is None:
            return
        try:
            await self.instance.api.unlock_batch_mq(
                addr[0], self.group, self.instance.client_id, [mq], oneway=oneway
            )
        except Exception as exc:
            logger.info("unlock %s failed: %s", mq, exc)

    async def unlock_all(self) -> None:
        for broker, addr, mqs in self._queues_by_master():
            try:
                await self.instance.api.unlock_batch_mq(addr, self.group, self.instance.client_id, mqs)
            except Exception as exc:
                logger.info("unlock batch on %s failed: %s", broker, exc)
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    pq.locked = False

    async def reset_offsets(self, topic: str, table: dict[MessageQueue, int], store: OffsetStore) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET for the queues of ``topic`` in ``table`` (Java
        ``MQClientInstance.resetOffset``); the caller wakes a rebalance afterwards.

        Each broker pushes only its own queues, one push after another, so a push touches only
        the queues it names: dropping the topic's other queues would also drop the ones the
        previous push already re-created, and a dropped queue left in the table is never
        pulled again. The work runs under the table lock (Java: ``synchronized``) so no
        rebalance re-creates a queue from a pre-reset offset half-way through. The reset
        offsets win: the old process queues are dropped first (pull replies and consume
        results for them are discarded), the new offsets are written to the broker (waiting for
        the reply), then the queues leave the table and the rebalance re-creates them from the
        stored offsets.
        """
        async with self.table_lock:
            mine = [mq for mq in self.process_queue_table if mq.topic == topic and mq in table]
            for mq in mine:
                pq = self.process_queue_table[mq]
                pq.dropped = True
                pq.clear()
            for mq in mine:
                store.update_offset(mq, table[mq])
            try:
                await store.persist_all(mine, prune=False)
            except Exception as exc:
                logger.warning("%s: persisting reset offsets of %s: %s", self.group, topic, exc)
            for mq in mine:
                self.process_queue_table.pop(mq, None)
            logger.info("%s: offsets of %d queue(s) of %s reset", self.group, len(mine), topic)

    def drop_all(self) -> None:
        for pq in self.process_queue_table.values():
            pq.dropped = True
