"""``MQClientInstance``: the per-process, per-client-id hub every producer and consumer shares.

It owns the remoting client (one connection per broker / name server), the topic route
cache, the broker address table and the background services:

* route refresh from the name servers every ``poll_name_server_interval`` (30 s) and on demand;
* heartbeats to every broker every ``heartbeat_broker_interval`` (30 s), plus cleaning of
  brokers that left every route;
* consumer offset persistence every ``persist_consumer_offset_interval`` (5 s);
* one rebalance service (every 20 s, and at once on NOTIFY_CONSUMER_IDS_CHANGED);
* one pull service (:mod:`pocketmq.client.consumer.pull_service`).

Server-initiated requests handled: NOTIFY_CONSUMER_IDS_CHANGED, RESET_CONSUMER_CLIENT_OFFSET,
GET_CONSUMER_STATUS_FROM_CLIENT, GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY and
CHECK_TRANSACTION_STATE (handed to the producer group's hook).

Instances are shared: :meth:`MQClientInstance.acquire` returns the existing instance of the
running loop for a client id; it shuts down when its last producer/consumer is released.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
from collections.abc import Awaitable, Callable
from functools import partial

from pocketmq.client.acl import AclClientRPCHook
from pocketmq.client.api import MQClientAPI
from pocketmq.client.config import ClientConfig
from pocketmq.client.consumer.pull_service import PullMessageService
from pocketmq.client.errors import BrokerNotFoundError, ClientStateError, TopicRouteNotFoundError
from pocketmq.client.inner import ConsumerInner, ProducerInner
from pocketmq.client.message import MessageQueue
from pocketmq.client.producer.request_reply import ReplyTable, on_push_reply
from pocketmq.client.route import to_publish_info, to_subscribe_info
from pocketmq.remoting.common.service import Service, TaskSet
from pocketmq.remoting.protocol import fastjson
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.headers import (
    CheckTransactionStateRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
)
from pocketmq.remoting.protocol.heartbeat import HeartbeatData, ProducerData
from pocketmq.remoting.protocol.message import decode_message
from pocketmq.remoting.protocol.route import TopicRouteData
from pocketmq.remoting.protocol.topics import CLIENT_INNER_PRODUCER_GROUP, MASTER_ID
from pocketmq.remoting.transport.client import RemotingClient, RemotingClientConfig
from pocketmq.remoting.transport.connection import RemotingConnection

logger = logging.getLogger(__name__)

#: whether :func:`freeze_heap_once` ran in this process
_heap_frozen = False


def freeze_heap_once() -> bool:
    """At the process's first client start: collect once, then freeze what is alive (returns
    whether it ran now).

    Why: a full (generation 2) collection walks every tracked object, the imported modules (the
    SDK's, pydantic's, asyncio's: ~10^5 objects) included, which live until exit anyway. In a
    push consumer one took 18-27 ms (issue 21: the e2e test's deliveries over 20 ms came in the
    turn it ran, every run, ~4-8 s in), and it comes back as traffic allocates. ``gc.freeze()``
    moves them to the permanent generation: reference counting still frees them, only cycles
    among them are never collected (hence the one collection first, at start, before traffic).
    Skipped when the application turned the collector off (it manages it itself).
    """
    global _heap_frozen
    if _heap_frozen or not gc.isenabled():
        return False
    _heap_frozen = True
    gc.collect()
    gc.freeze()
    return True


class _Periodic(Service):
    def __init__(
        self, name: str, interval: float, fn: Callable[[], Awaitable[None]], initial_delay: float
    ) -> None:
        super().__init__(interval=interval, initial_delay=initial_delay, name=name)
        self._fn = fn

    async def run_once(self) -> None:
        await self._fn()


class MQClientInstance:
    _registry: dict[tuple[int, str], MQClientInstance] = {}

    def __init__(self, config: ClientConfig, client_id: str) -> None:
        self.config = config
        self.client_id = client_id
        hooks = (
            [AclClientRPCHook(config.access_key, config.secret_key, config.security_token)]
            if config.access_key and config.secret_key
            else []
        )
        timeout = config.mq_client_api_timeout / 1000
        remoting_config = RemotingClientConfig(request_timeout=timeout, ssl=config.ssl_context())
        # signing is a before-hook: it keeps the client's fast path (no coroutine per request)
        self.remoting = RemotingClient(remoting_config, before_hooks=[h.before_request for h in hooks])
        self.api = MQClientAPI(self.remoting, config.namesrv_list, config.mq_client_api_timeout)
        self.producers: dict[str, ProducerInner] = {}
        self.consumers: dict[str, ConsumerInner] = {}
        self.topic_routes: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self.broker_versions: dict[str, int] = {}
        self.tasks = TaskSet("client-instance")
        self.pull_service = PullMessageService(self.consumers)
        self._route_lock = asyncio.Lock()
        self._services: list[Service] = []
        self._rebalance = _Periodic("rebalance", 20.0, self.do_rebalance, 0.0)
        self._route_service: Service | None = None
        self._started = False
        self._stopped = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.replies = ReplyTable()  # request-reply: correlation id -> waiting request
        self._register_handlers()

    # ----------------------------------------------------------------------- shared lifecycle
    @classmethod
    async def acquire(cls, config: ClientConfig) -> MQClientInstance:
        """The running loop's instance for ``config.client_id`` (created and started if new)."""
        loop = asyncio.get_running_loop()
        key = (id(loop), config.client_id)
        inst = cls._registry.get(key)
        if inst is None or inst._stopped or inst._loop is not loop:
            inst = cls(config, config.client_id)
            inst._loop = loop
            cls._registry[key] = inst
        if not inst._started:
            inst._start()
        return inst

    def _start(self) -> None:
        cfg = self.config
        self._started = True
        if cfg.freeze_gc_at_start:
            freeze_heap_once()
        self._route_service = _Periodic(
            "route-refresh", cfg.poll_name_server_interval / 1000, self.update_all_routes, 0.01
        )
        self._services = [
            self._route_service,
            _Periodic("heartbeat", cfg.heartbeat_broker_interval / 1000, self._heartbeat_and_clean, 1.0),
            _Periodic(
                "persist-offsets",
                cfg.persist_consumer_offset_interval / 1000,
                self.persist_all_consumer_offsets,
                10.0,
            ),
            self._rebalance,
        ]
        for svc in self._services:
            svc.start()

    def register_producer(self, producer: ProducerInner) -> None:
        if producer.group in self.producers:
            raise ClientStateError(
                f"producer group {producer.group!r} is already started in client {self.client_id}"
            )
        self.producers[producer.group] = producer

    def register_consumer(self, consumer: ConsumerInner) -> None:
        if consumer.group in self.consumers:
            raise ClientStateError(
                f"consumer group {consumer.group!r} is already started in client {self.client_id}"
            )
        self.consumers[consumer.group] = consumer
        interval = consumer.rebalance_interval
        if interval < (self._rebalance.interval or interval + 1):
            self._rebalance.interval = interval

    async def release(self, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        """Forget a client (and tell the brokers); the last release shuts the instance down."""
        if producer_group is not None:
            self.producers.pop(producer_group, None)
        if consumer_group is not None:
            self.consumers.pop(consumer_group, None)
        await self._unregister_from_brokers(producer_group, consumer_group)
        others = [g for g in self.producers if g != CLIENT_INNER_PRODUCER_GROUP]
        if not others and not self.consumers:
            # the inner producer (consumer/send_back.py) goes with the last real client
            inner = self.producers.pop(CLIENT_INNER_PRODUCER_GROUP, None)
            if inner is not None:
                inner.detach()
            await self.shutdown()

    async def shutdown(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for key, inst in list(self._registry.items()):
            if inst is self:
                del self._registry[key]
        for svc in reversed(self._services):
            await svc.stop(grace=1.0)
        await self.pull_service.stop()
        await self.tasks.cancel_all(timeout=1.0)
        await self.remoting.close()

    @property
    def running(self) -> bool:
        return self._started and not self._stopped

    def wakeup_rebalance(self) -> None:
        self._rebalance.wakeup()

    async def do_rebalance(self) -> None:
        await self._each_consumer(lambda c: c.do_rebalance(), "rebalance")

    async def _each_consumer(self, call: Callable[[ConsumerInner], Awaitable[None]], what: str) -> None:
        """``call`` on every registered consumer in turn; one consumer's failure is logged and
        does not stop the others."""
        for consumer in list(self.consumers.values()):
            try:
                await call(consumer)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("%s of %s failed", what, consumer.group)

    # ----------------------------------------------------------------------------- routes
    async def update_all_routes(self) -> None:
        topics: set[str] = set()
        for p in self.producers.values():
            topics.update(p.publish_topics())
        for c in self.consumers.values():
            topics.update(c.route_topics())
        missing = False
        for topic in topics:
            try:
                await self.update_topic_route(topic)
            except TopicRouteNotFoundError:
                logger.debug("no route for %s yet", topic)
                missing = True
            except Exception as exc:
                logger.warning("route refresh of %s failed: %s", topic, exc)
                missing = True
        # A consumer waiting for a topic's first route (just auto-created, or the name server
        # was unreachable) should not wait the full 30 s: poll every second until it is there.
        normal = self.config.poll_name_server_interval / 1000
        if self._route_service is not None:
            self._route_service.interval = min(1.0, normal) if missing and self.consumers else normal

    async def update_topic_route(
        self, topic: str, *, default_topic: str | None = None, default_queue_nums: int = 4
    ) -> bool:
        """Fetch ``topic``'s route (or, with ``default_topic``, the template's) and apply it.

        Returns whether the cached route changed.

        Raises:
            TopicRouteNotFoundError: the name servers know no such topic.
        """
        async with self._route_lock:
            if default_topic is not None:
                route = await self.api.get_topic_route(default_topic)
                for i, qd in enumerate(route.queue_datas):
                    nums = min(default_queue_nums, qd.read_queue_nums)
                    route.queue_datas[i] = type(qd)(qd.broker_name, nums, nums, qd.perm, qd.topic_sys_flag)
            else:
                route = await self.api.get_topic_route(topic)
            old = self.topic_routes.get(topic)
            changed = old is None or old.route_key() != route.route_key()
            if not changed:
                changed = any(p.publish_info_needs_update(topic) for p in self.producers.values()) or any(
                    c.subscribe_info_needs_update(topic) for c in self.consumers.values()
                )
            if changed:
                self._apply_route(topic, route)
            return changed

    def _apply_route(self, topic: str, route: TopicRouteData) -> None:
        unknown = False  # a broker that has not had our heartbeat yet
        for bd in route.broker_datas:
            self.broker_addrs[bd.broker_name] = dict(bd.broker_addrs)
            unknown = unknown or any(a not in self.broker_versions for a in bd.broker_addrs.values())
        publish = to_publish_info(topic, route)
        for p in self.producers.values():
            p.update_publish_info(topic, publish)
        subscribed = False
        if self.consumers:
            subscribe = to_subscribe_info(topic, route)
            for c in self.consumers.values():
                subscribed = subscribed or c.subscribe_info_needs_update(topic)
                c.update_subscribe_info(topic, subscribe)
        self.topic_routes[topic] = route
        if subscribed or (unknown and self.consumers):
            # First route of a subscribed topic (e.g. created after the consumer started), or
            # a broker we never announced ourselves to: heartbeat first (a broker answers a
            # rebalance's member query with "no consumer for this group" until then), then
            # assign queues at once rather than at the next 20 s rebalance.
            self.tasks.spawn(self._announce_and_rebalance(), name="heartbeat-new-route")

    async def _announce_and_rebalance(self) -> None:
        await self.send_heartbeat_to_all_brokers()
        self.wakeup_rebalance()

    def find_broker_addr_in_publish(self, broker_name: str) -> str | None:
        addrs = self.broker_addrs.get(broker_name)
        return addrs.get(MASTER_ID) if addrs else None

    def find_broker_addr_in_subscribe(
        self, broker_name: str, broker_id: int = MASTER_ID, only_this: bool = False
    ) -> tuple[str, bool] | None:
        """``(addr, is_slave)`` of ``broker_id`` (or any broker of the group unless ``only_this``)."""
        addrs = self.broker_addrs.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        if addr is not None:
            return addr, broker_id != MASTER_ID
        if only_this:
            return None
        bid, addr = next(iter(sorted(addrs.items())))
        return addr, bid != MASTER_ID

    async def find_broker_addr_for_offsets(self, broker_name: str) -> str:
        """The master of ``broker_name``, else one of its slaves while the master is gone (Java
        ``findBrokerAddressInSubscribe(name, MASTER_ID, false)``); route refreshed once if unknown."""
        found = self.find_broker_addr_in_subscribe(broker_name)
        if found is None:
            await self.update_all_routes()
            found = self.find_broker_addr_in_subscribe(broker_name)
            if found is None:
                raise BrokerNotFoundError(broker_name)
        return found[0]

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue) -> int:
        return await self.api.query_consumer_offset(addr, group, mq)

    async def update_consumer_offset(
        self, addr: str, group: str, mq: MessageQueue, offset: int, *, oneway: bool = False
    ) -> None:
        await self.api.update_consumer_offset(addr, group, mq, offset, oneway=oneway)

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str]:
        route = self.topic_routes.get(topic)
        if route is None:
            await self.update_topic_route(topic)
            route = self.topic_routes.get(topic)
        if route is None or not route.broker_datas:
            return []
        bd = random.choice(route.broker_datas)
        addr = bd.select_broker_addr()
        if addr is None:
            return []
        return await self.api.get_consumer_id_list(addr, group)

    # --------------------------------------------------------------------------- heartbeats
    def heartbeat_data(self) -> HeartbeatData:
        return HeartbeatData(
            self.client_id,
            producer_data_set=tuple(ProducerData(g) for g in self.producers),
            consumer_data_set=tuple(c.consumer_data() for c in self.consumers.values()),
        )

    async def send_heartbeat_to_all_brokers(self) -> None:
        if not self.producers and not self.consumers:
            return
        data = self.heartbeat_data()
        jobs = []
        for name, addrs in list(self.broker_addrs.items()):
            for bid, addr in addrs.items():
                if bid != MASTER_ID and not self.consumers:
                    continue
                jobs.append(self._heartbeat_one(name, addr, data))
        await asyncio.gather(*jobs)

    async def _heartbeat_one(self, name: str, addr: str, data: HeartbeatData) -> None:
        try:
            self.broker_versions[addr] = await self.api.send_heartbeat(addr, data)
        except Exception as exc:
            logger.info("heartbeat to %s (%s) failed: %s", name, addr, exc)

    async def _heartbeat_and_clean(self) -> None:
        self._clean_offline_brokers()
        await self.send_heartbeat_to_all_brokers()

    def _clean_offline_brokers(self) -> None:
        live: set[str] = set()
        for route in self.topic_routes.values():
            for bd in route.broker_datas:
                live.update(bd.broker_addrs.values())
        for name in list(self.broker_addrs):
            addrs = {bid: a for bid, a in self.broker_addrs[name].items() if a in live}
            if addrs:
                self.broker_addrs[name] = addrs
            else:
                del self.broker_addrs[name]

    async def _unregister_from_brokers(self, producer_group: str | None, consumer_group: str | None) -> None:
        jobs = [
            self.api.unregister_client(addr, self.client_id, producer_group, consumer_group)
            for addrs in self.broker_addrs.values()
            for addr in addrs.values()
        ]
        for res in await asyncio.gather(*jobs, return_exceptions=True):
            if isinstance(res, Exception):
                logger.debug("unregister client: %s", res)

    async def persist_all_consumer_offsets(self) -> None:
        await self._each_consumer(lambda c: c.persist_consumer_offset(), "persist offsets")

    # ------------------------------------------------------------- server-initiated requests
    def _register_handlers(self) -> None:
        reg = self.remoting.register
        reg(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_ids_changed)
        reg(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        reg(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self._on_get_status)
        reg(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_running_info)
        reg(RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_directly)
        reg(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction)
        reg(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, partial(on_push_reply, self.replies))
        self.remoting.dispatcher.on_close.append(self._on_broker_closed)

    def _on_broker_closed(self, conn: RemotingConnection) -> None:
        """A broker connection closed (the broker restarted?): heartbeat to it again soon.

        A restarted broker knows none of our groups until it hears from us: its pulls answer
        "group info not exist" and it cannot check back our transactions (it asks a producer
        connection it learnt from a heartbeat) until the periodic heartbeat, up to 30 s later.
        """
        addr = conn.remote_addr
        if addr in self.broker_versions and (self.producers or self.consumers):
            del self.broker_versions[addr]
            self.tasks.spawn(self._reannounce(addr), name="heartbeat-after-close")

    async def _reannounce(self, addr: str) -> None:
        for _ in range(60):  # every second for a minute, then the periodic heartbeat takes over
            await asyncio.sleep(1.0)
            if addr in self.broker_versions or not (self.producers or self.consumers):
                return
            await self.send_heartbeat_to_all_brokers()

    def _on_ids_changed(self, conn: RemotingConnection, req: RemotingCommand) -> None:
        header = NotifyConsumerIdsChangedRequestHeader.from_ext_fields(req.ext_fields)
        logger.info(
            "consumer ids of %s changed (from %s): rebalancing", header.consumer_group, conn.remote_addr
        )
        self.wakeup_rebalance()

    def _on_reset_offset(self, conn: RemotingConnection, req: RemotingCommand) -> None:
        header = ResetOffsetRequestHeader.from_ext_fields(req.ext_fields)
        consumer = self.consumers.get(header.group)
        if consumer is None or not req.body:
            return
        obj = fastjson.decode_object(req.body, "ResetOffsetBody")
        table: dict[MessageQueue, int] = {}
        raw = obj.get("offsetTable")
        items = raw.items() if isinstance(raw, dict | fastjson.FrozenDict) else []
        for key, value in items:
            table[MessageQueue.from_json(fastjson.as_object(key, "offsetTable key"))] = int(value)
        self.tasks.spawn(consumer.reset_offset(header.topic, table), name=f"reset-offset:{header.group}")

    def _on_get_status(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        header = GetConsumerStatusRequestHeader.from_ext_fields(req.ext_fields)
        consumer = self.consumers.get(header.group)
        table = consumer.offset_table(header.topic) if consumer is not None else {}
        body = fastjson.dumpb({"messageQueueTable": table})
        return RemotingCommand.response_to(req, body=body)

    def _on_running_info(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        header = GetConsumerRunningInfoRequestHeader.from_ext_fields(req.ext_fields)
        consumer = self.consumers.get(header.consumer_group)
        if consumer is None:
            return RemotingCommand.response_to(
                req,
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer Group <{header.consumer_group}> not exist in this consumer",
            )
        return RemotingCommand.response_to(req, body=fastjson.dumpb(consumer.running_info()))

    async def _on_consume_directly(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext_fields(req.ext_fields)
        consumer = self.consumers.get(header.consumer_group)
        if consumer is None or not req.body:
            return RemotingCommand.response_to(
                req, ResponseCode.SYSTEM_ERROR, f"no consumer {header.consumer_group}"
            )
        msg = decode_message(req.body)
        result = await consumer.consume_message_directly(msg, header.broker_name)
        return RemotingCommand.response_to(req, body=fastjson.dumpb(result))

    def _on_check_transaction(self, conn: RemotingConnection, req: RemotingCommand) -> None:
        if not req.body:
            return
        header = CheckTransactionStateRequestHeader.from_ext_fields(req.ext_fields)
        msg = decode_message(req.body)
        group = msg.get_property("PGROUP")
        producer = self.producers.get(group or "")
        if producer is None:
            logger.warning("CHECK_TRANSACTION_STATE for unknown producer group %s", group)
            return
        self.tasks.spawn(
            producer.check_transaction_state(conn.remote_addr, msg, header), name="check-transaction"
        )
