"""The driver's view of the cluster: routes from the name server, offsets from the brokers.

All calls are blocking (they run in Spark's planner process, pitfall 18). Per trigger the
planner asks the name server for each topic's route (so queues added since the last trigger
are discovered) and every broker for its queues' min and max offsets. Each broker gets one
pipelined burst of GET_MIN_OFFSET / GET_MAX_OFFSET requests on one connection, and the brokers
are asked in parallel threads, so a trigger costs about one round trip whatever the queue count.

Failures: the name server list is tried in order; every call is retried
``fetchOffset.numRetries`` times ``fetchOffset.retryIntervalMs`` apart. In a *lenient*
snapshot (``latestOffset``) a broker that still fails is left out, so its queues are carried
forward unchanged instead of being treated as gone; a *strict* snapshot (the initial offsets,
batch planning) raises :class:`MetadataError` instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemotingError
from pocketmq.remoting.protocol.heartbeat import MessageQueue
from pocketmq.remoting.protocol.route import TopicRouteData
from pocketmq.remoting.protocol.topics import PermName
from pocketmq.remoting.transport.blocking import ConnectionPool, pool
from pocketmq.spark.errors import MetadataError
from pocketmq.spark.offsets import OffsetMap, queue_label
from pocketmq.spark.planning import QueueState, Snapshot

logger = logging.getLogger("pocketmq.spark")
T = TypeVar("T")


def _request(code: int, ext: dict[str, str] | None) -> RemotingCommand:
    return RemotingCommand.request(code, ext, language=LanguageCode.PYTHON)


def _queue_ext(key: MessageQueue) -> dict[str, str]:
    """extFields of GET_MAX/MIN_OFFSET (and the base of SEARCH_OFFSET / QUERY_CONSUMER_OFFSET)."""
    return {"topic": key.topic, "queueId": str(key.queue_id)}


def broker_addresses(route: TopicRouteData) -> dict[str, tuple[str, ...]]:
    """brokerName -> addresses to try in turn: the protocol's choice first
    (:meth:`BrokerData.select_broker_addr`: the master when there is one), then the others
    by broker id (failover for reads)."""
    out: dict[str, tuple[str, ...]] = {}
    for bd in route.broker_datas:
        first = bd.select_broker_addr()
        if first is not None:
            rest = (addr for _, addr in sorted(bd.broker_addrs.items()) if addr != first)
            out[bd.broker_name] = (first, *rest)
    return out


def route_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """Readable queues of ``topic`` (QueueData with PERM_READ, ids ``0..readQueueNums-1``)."""
    return [
        MessageQueue(topic, qd.broker_name, qid)
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)
        if PermName.is_readable(qd.perm)
        for qid in range(qd.read_queue_nums)
    ]


class ClusterClient:
    """Blocking metadata calls for one source; cheap to create, not picklable state-wise."""

    def __init__(
        self,
        name_servers: Iterable[str],
        *,
        timeout_ms: int = 3000,
        retries: int = 3,
        retry_interval_ms: int = 200,
        connections: ConnectionPool | None = None,
        signer: Callable[[RemotingCommand], None] | None = None,
    ) -> None:
        self.name_servers = tuple(name_servers)
        self.timeout = timeout_ms / 1000
        self.retries = retries
        self.retry_interval = retry_interval_ms / 1000
        self._pool = connections
        self._executor: ThreadPoolExecutor | None = None
        #: signs every request (ACL ``accessKey``/``secretKey``), or None
        self._signer = signer

    def _request(self, code: int, ext: dict[str, str] | None) -> RemotingCommand:
        request = _request(code, ext)
        if self._signer is not None:
            self._signer(request)
        return request

    @property
    def pool(self) -> ConnectionPool:
        return self._pool if self._pool is not None else pool()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def _retrying(self, what: str, fn: Callable[[], T]) -> T:
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.retry_interval)
            try:
                return fn()
            except (RemotingError, OSError, ValueError) as exc:
                last = exc
        raise MetadataError(f"{what} failed after {self.retries + 1} attempt(s): {last}") from last

    # ------------------------------------------------------------------------------ routes
    def route(self, topic: str) -> TopicRouteData | None:
        """The topic's route, or ``None`` when the name servers know no such topic."""

        def ask() -> TopicRouteData | None:
            ext = {"topic": topic, "acceptStandardJsonOnly": "true"}
            last: Exception | None = None
            for ns in self.name_servers:
                try:
                    reply, body = self.pool.invoke(
                        ns, self._request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext), self.timeout
                    )
                except RemotingError as exc:
                    last = exc
                    continue
                if reply.code == ResponseCode.TOPIC_NOT_EXIST:
                    return None
                if reply.code != ResponseCode.SUCCESS or not body:
                    raise MetadataError(
                        f"name server {ns}: route of {topic!r}: code {reply.code} {reply.remark}"
                    )
                return TopicRouteData.decode(body)
            assert last is not None
            raise last

        return self._retrying(f"route of topic {topic!r} from {list(self.name_servers)}", ask)

    # ----------------------------------------------------------------------------- offsets
    def _per_broker(
        self,
        keys: Iterable[MessageQueue],
        addrs: Mapping[str, tuple[str, ...]],
        build: Callable[[MessageQueue], RemotingCommand],
        parse: Callable[[MessageQueue, RemotingCommand], int],
        what: str,
        strict: bool,
    ) -> dict[MessageQueue, int]:
        """Ask each broker about its queues (pipelined, brokers in parallel)."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for key in keys:
            by_broker.setdefault(key.broker_name, []).append(key)

        def one(broker: str) -> dict[MessageQueue, int]:
            broker_keys = by_broker[broker]
            candidates = addrs.get(broker, ())
            if not candidates:
                raise MetadataError(f"no address known for broker {broker!r}")

            def ask() -> dict[MessageQueue, int]:
                replies = self.pool.invoke_many(candidates[0], [build(k) for k in broker_keys], self.timeout)
                return {k: parse(k, r) for k, r in zip(broker_keys, replies, strict=True)}

            return self._retrying(f"{what} from broker {broker} ({candidates[0]})", ask)

        brokers = sorted(by_broker)
        results: dict[MessageQueue, int] = {}
        if len(brokers) <= 1:
            outcomes = [_capture(one, b) for b in brokers]
        else:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="rocketmq-meta")
            outcomes = list(self._executor.map(lambda b: _capture(one, b), brokers))
        for broker, (value, error) in zip(brokers, outcomes, strict=True):
            if error is not None:
                if strict:
                    raise error
                logger.warning("skipping broker %s this trigger: %s", broker, error)
                continue
            assert value is not None
            results.update(value)
        return results

    def snapshot(self, topics: Iterable[str], *, strict: bool) -> Snapshot:
        """Routes plus min/max offsets of every readable queue of ``topics``."""
        snap = Snapshot()
        keys: list[MessageQueue] = []
        for topic in topics:
            route = self.route(topic)
            if route is None:
                logger.info("topic %r has no route yet; it has no queues to read", topic)
                continue
            snap.broker_addrs.update(broker_addresses(route))
            keys.extend(route_queues(topic, route))
        offsets = self._per_broker(
            keys,
            snap.broker_addrs,
            lambda k: self._request(
                RequestCode.GET_MAX_OFFSET,
                _queue_ext(k),
            ),
            _offset_reply,
            "max offsets",
            strict,
        )
        mins = self._per_broker(
            [k for k in keys if k in offsets],
            snap.broker_addrs,
            lambda k: self._request(
                RequestCode.GET_MIN_OFFSET,
                _queue_ext(k),
            ),
            _offset_reply,
            "min offsets",
            strict,
        )
        for key in keys:
            if key in offsets and key in mins:
                snap.queues[key] = QueueState(mins[key], offsets[key])
                snap.topic_brokers.add((key.topic, key.broker_name))
        return snap

    def search_offsets(
        self, stamps: Mapping[MessageQueue, int], addrs: Mapping[str, tuple[str, ...]]
    ) -> OffsetMap:
        """SEARCH_OFFSET_BY_TIMESTAMP for each queue (ms since the epoch)."""
        return self._per_broker(
            stamps,
            addrs,
            lambda k: self._request(
                RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                {**_queue_ext(k), "timestamp": str(stamps[k])},
            ),
            _offset_reply,
            "offsets by timestamp",
            True,
        )

    def committed_offsets(
        self, group: str, keys: Iterable[MessageQueue], addrs: Mapping[str, tuple[str, ...]]
    ) -> OffsetMap:
        """The group's committed offset per queue; ``-1`` where the broker has none."""
        return self._per_broker(
            keys,
            addrs,
            lambda k: self._request(
                RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": group, **_queue_ext(k)},
            ),
            _committed_reply,
            f"committed offsets of group {group!r}",
            True,
        )


def _capture(fn: Callable[[str], T], arg: str) -> tuple[T | None, Exception | None]:
    try:
        return fn(arg), None
    except (MetadataError, RemotingError) as exc:
        return None, exc


def _offset_reply(key: MessageQueue, reply: RemotingCommand) -> int:
    if reply.code != ResponseCode.SUCCESS:
        raise MetadataError(f"queue {queue_label(key)}: broker replied code {reply.code}: {reply.remark}")
    try:
        return int(reply.ext("offset") or "")
    except ValueError:
        raise MetadataError(
            f"queue {queue_label(key)}: broker reply has no valid offset: {reply.ext_fields}"
        ) from None


def _committed_reply(key: MessageQueue, reply: RemotingCommand) -> int:
    if reply.code == ResponseCode.QUERY_NOT_FOUND:
        return -1
    return _offset_reply(key, reply)
