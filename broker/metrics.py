"""The broker's Prometheus metrics, read at scrape time (``metricsExporterType=PROM``).

Nothing here runs per message except :class:`PutLatency` (always on: the runtime info reads it too): every
figure is read from counters the broker keeps anyway (``broker.stats``, the store's runtime info,
the offset, topic and client tables) when ``/metrics`` is scraped.

Two families of names:

* **rocketmq-exporter's** (so its Grafana dashboards and alert rules work unchanged), same names
  and labels: ``rocketmq_producer_tps`` / ``_message_size`` / ``_offset`` {cluster, broker, topic},
  ``rocketmq_consumer_tps`` / ``_message_size`` / ``_offset``, ``rocketmq_group_consume_tps``,
  ``rocketmq_group_consume_total_offset``, ``rocketmq_send_back_nums``,
  ``rocketmq_group_get_latency_by_storetime`` (ms behind the oldest unconsumed message)
  {cluster, broker, topic, group}; ``rocketmq_group_diff`` / ``_retrydiff`` / ``_dlqdiff``
  {group, topic, countOfOnlineConsumers, msgModel (0 broadcasting, 1 clustering)};
  ``rocketmq_topic_retry_offset`` {cluster, broker, topic}, ``rocketmq_topic_dlq_offset``
  {cluster, broker, group}; ``rocketmq_broker_tps`` / ``_qps`` {cluster, brokerIP, broker}; the
  ``rocketmq_brokeruntime_*`` gauges of GET_BROKER_RUNTIME_INFO {cluster, brokerIP, brokerHost,
  des, boottime, broker_version}. TPS values are the last minute's, as the exporter reads them.
  Lint-clean by default (promtool exits 0): the camelCase labels are spelled snake_case
  (:data:`SNAKE_LABELS`), the two ever-growing ``*_total`` figures are counters and
  ``commitlogdir_capacity_total`` is ``_capacity_bytes``, ``rocketmq_group_count`` /
  ``rocketmq_producer_count`` are ``rocketmq_group_consumers`` / ``rocketmq_producer_instances``; ``metricsRocketmqExporterCompat=true``
  (:attr:`BrokerMetrics.exporter_compat`) gives the exporter's spellings verbatim.
* **RocketMQ 5.x's** names {cluster, node_type, node_id, ...}: ``rocketmq_messages_in_total``,
  ``rocketmq_throughput_in_total`` (bytes), ``rocketmq_messages_out_total``,
  ``rocketmq_throughput_out_total``, ``rocketmq_send_to_dlq_messages_total``,
  ``rocketmq_consumer_lag_messages`` and ``rocketmq_consumer_lag_latency`` (ms) per topic and
  group, plus per queue (``rocketmq_consumer_queue_lag_messages`` / ``_latency`` {queue_id}: what
  rocketmq-exporter lacks), ``rocketmq_storage_dispatch_behind_bytes``,
  ``rocketmq_storage_flush_behind_bytes``, ``rocketmq_storage_size``, ``rocketmq_topic_number``,
  ``rocketmq_consumer_group_number``, ``rocketmq_producer_connections``,
  ``rocketmq_consumer_connections``, and pocketmq's ``rocketmq_connections`` (open remoting
  connections), ``rocketmq_pull_held_requests`` (long-polling pulls held now) and the histogram
  ``rocketmq_put_latency_seconds`` (CommitLog append time).

Replication (HA, :func:`ha_families`): ``rocketmq_ha_slaves``, ``rocketmq_ha_slave_ack_offset``
and ``rocketmq_ha_slave_fall_behind_bytes`` {slave} on a master; ``rocketmq_ha_connected`` and
``rocketmq_ha_reported_offset`` on a slave.

Seam: ``BrokerMetrics.sources`` takes more ``() -> iterable of metric families`` (HA is one,
transactions could be next) without touching :meth:`BrokerMetrics.collect`.
"""

from __future__ import annotations

import inspect
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pocketmq.broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK2DLQ_TIMES,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStatsManager,
)
from pocketmq.remoting.protocol.heartbeat import MessageModel
from pocketmq.remoting.protocol.route import is_dlq_topic, is_retry_topic

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from pocketmq.broker.client_manager import ConsumerManager, ProducerManager
    from pocketmq.broker.offset_manager import ConsumerOffsetManager
    from pocketmq.broker.state import BrokerState
    from pocketmq.broker.subscription import SubscriptionGroupManager
    from pocketmq.broker.topic_config import TopicConfigManager
    from pocketmq.store import MessageStore

__all__ = ["BrokerMetrics", "PutLatency", "lag_rows"]

F = TypeVar("F", bound=Callable[..., Any])

#: bucket i counts appends that took < 1024 * 2**i ns; exported up to 2**24 µs-ish (17 s)
_BUCKETS = 25
#: ``PutLatency.counts``' buckets 55..63, past any ``bits`` index (64 - 10 = 54)
_NO_PUTS = (0,) * 9
_DLQ_PREFIX = "%DLQ%"


def _one_argument(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` takes exactly one positional argument and nothing else."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    return (
        len(params) == 1
        and params[0].kind in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD)
        and params[0].default is params[0].empty
    )


class PutLatency:
    """CommitLog append time of every put, in power-of-two buckets (one ``bit_length`` and one
    add each).

    The CommitLog times ``put_message`` into it itself (``CommitLog.latency``, set by the
    controller); ``wrap(store.put_batch)`` (and the other batch puts) returns the timed method.
    Every put is timed on every broker (as RocketMQ: ``putLatency99`` / ``putLatency999``).
    A put of ``dt`` ns adds one to ``bits[dt.bit_length()]``: its ``counts`` bucket,
    ``(dt >> 10).bit_length()``, is ``max(0, dt.bit_length() - 10)``, so the put does no
    shift (an unspecialized ``BINARY_OP``: ~160 instructions a put, callgrind) and ``counts``
    folds ``bits[:11]`` into bucket 0 when read.
    """

    __slots__ = ("bits", "max_ns", "sum_ns")

    def __init__(self) -> None:
        #: puts by ``dt.bit_length()`` (0..64: any time below 2**64 ns)
        self.bits = [0] * 65
        self.sum_ns = 0
        self.max_ns = 0

    @property
    def counts(self) -> list[int]:
        """Puts per bucket: bucket i counts those below ``1024 << i`` ns (64 buckets)."""
        bits = self.bits
        return [sum(bits[:11]), *bits[11:], *_NO_PUTS]

    def wrap(self, fn: F) -> F:
        bits = self.bits
        clock = time.perf_counter_ns
        this = self

        if _one_argument(fn):  # put_message, put_messages: no argument tuple per put (~0.1 µs)

            def timed_one(arg: Any) -> Any:
                t0 = clock()
                result = fn(arg)
                dt = clock() - t0
                bits[dt.bit_length()] += 1
                this.sum_ns += dt
                if dt > this.max_ns:  # noqa: PLR1730 - a compare, not a max() call: runs on every put
                    this.max_ns = dt
                return result

            return timed_one  # type: ignore[return-value]

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            result = fn(*args, **kwargs)
            dt = clock() - t0
            bits[dt.bit_length()] += 1
            this.sum_ns += dt
            if dt > this.max_ns:  # noqa: PLR1730 - a compare, not a max() call: runs on every put
                this.max_ns = dt
            return result

        return timed  # type: ignore[return-value]

    @property
    def count(self) -> int:
        return sum(self.bits)

    def buckets(self) -> list[tuple[str, int]]:
        """Cumulative ``(le seconds, count)`` pairs, ``+Inf`` last (Prometheus histogram)."""
        out: list[tuple[str, int]] = []
        acc = 0
        counts = self.counts
        for i in range(_BUCKETS):
            acc += counts[i]
            out.append((repr((1024 << i) / 1e9), acc))
        out.append(("+Inf", sum(counts)))
        return out

    def quantile_ms(self, q: float) -> float:
        """Upper bound (ms) of the bucket holding the ``q`` quantile; 0 with no sample."""
        total = self.count
        if not total:
            return 0.0
        want = q * total
        acc = 0
        for i, n in enumerate(self.counts):
            acc += n
            if acc >= want:
                return (1024 << i) / 1e6
        return self.max_ns / 1e6  # pragma: no cover - acc reaches total


@dataclass(frozen=True, slots=True)
class LagRow:
    """One (topic, group) of the offset table: broker and consumer offsets, lag, lag in ms."""

    topic: str
    group: str
    broker_offset: int
    consumer_offset: int
    #: per queue: (queue id, messages behind, ms behind the oldest unconsumed message)
    queues: tuple[tuple[int, int, int], ...]

    @property
    def diff(self) -> int:
        return sum(q[1] for q in self.queues)

    @property
    def latency_ms(self) -> int:
        return max((q[2] for q in self.queues), default=0)


def lag_rows(
    store: MessageStore, topics: TopicConfigManager, offsets: ConsumerOffsetManager, now_ms: int
) -> list[LagRow]:
    """Every (topic, group) with committed offsets whose topic exists: its per-queue lag.

    Lag in messages is ``max offset - committed offset`` (0 when ahead); lag in time is ``now -
    store time`` of the first unconsumed message (rocketmq-exporter's latency by store time).
    """
    rows = []
    for key, table in list(offsets.offset_table.items()):
        topic, sep, group = key.partition("@")
        tc = topics.select_topic_config(topic)
        if not sep or tc is None:
            continue
        queues = []
        broker_total = consumer_total = 0
        for qid in range(max(tc.read_queue_nums, tc.write_queue_nums)):
            max_offset = max(0, store.get_max_offset_in_queue(topic, qid))
            committed = table.get(qid, -1)
            consumer = max(0, committed)
            broker_total += max_offset
            consumer_total += consumer
            behind = max(0, max_offset - consumer)
            latency = 0
            if behind:
                ts = store.get_message_store_timestamp(topic, qid, consumer)
                latency = max(0, now_ms - ts) if ts > 0 else 0
            queues.append((qid, behind, latency))
        rows.append(LagRow(topic, group, broker_total, consumer_total, tuple(queues)))
    return rows


def _runtime_gauges() -> list[tuple[str, str, int | None]]:
    """(exporter suffix, runtime-info key, index in a ``"10s 60s 600s"`` triple or None)."""
    out: list[tuple[str, str, int | None]] = [
        ("msg_put_total_today_now", "msgPutTotalTodayNow", None),
        ("msg_gettotal_today_now", "msgGetTotalTodayNow", None),
        ("msg_puttotal_todaymorning", "msgPutTotalTodayMorning", None),
        ("msg_gettotal_todaymorning", "msgGetTotalTodayMorning", None),
        ("msg_puttotal_yesterdaymorning", "msgPutTotalYesterdayMorning", None),
        ("msg_gettotal_yesterdaymorning", "msgGetTotalYesterdayMorning", None),
        ("dispatch_behind_bytes", "dispatchBehindBytes", None),
        ("put_message_size_total", "putMessageSizeTotal", None),
        ("put_message_average_size", "putMessageAverageSize", None),
        ("putmessage_times_total", "putMessageTimesTotal", None),
        ("earliest_message_timestamp", "earliestMessageTimeStamp", None),
        ("start_accept_sendrequest_time", "startAcceptSendRequestTimeStamp", None),
        ("commitlog_disk_ratio", "commitLogDiskRatio", None),
        ("consumequeue_disk_ratio", "consumeQueueDiskRatio", None),
        ("commitlog_maxoffset", "commitLogMaxOffset", None),
        ("commitlog_minoffset", "commitLogMinOffset", None),
        ("send_threadpool_queue_size", "sendThreadPoolQueueSize", None),
        ("pull_threadpoolqueue_size", "pullThreadPoolQueueSize", None),
        ("query_threadpoolqueue_size", "queryThreadPoolQueueSize", None),
        ("send_threadpoolqueue_capacity", "sendThreadPoolQueueCapacity", None),
        ("pull_threadpoolqueue_capacity", "pullThreadPoolQueueCapacity", None),
        ("query_threadpool_queue_capacity", "queryThreadPoolQueueCapacity", None),
        ("remain_transientstore_buffer_numbs", "remainTransientStoreBufferNumbs", None),
        ("send_threadpoolqueue_headwait_timemills", "sendThreadPoolQueueHeadWaitTimeMills", None),
        ("pull_threadpoolqueue_headwait_timemills", "pullThreadPoolQueueHeadWaitTimeMills", None),
        ("query_threadpoolqueue_headwait_timemills", "queryThreadPoolQueueHeadWaitTimeMills", None),
        ("pagecache_lock_time_mills", "pageCacheLockTimeMills", None),
    ]
    for suffix, key in (
        ("put_tps", "putTps"),
        ("getfound_tps", "getFoundTps"),
        ("getmiss_tps", "getMissTps"),
        ("gettotal_tps", "getTotalTps"),
        ("gettransfered_tps", "getTransferedTps"),
    ):
        out += [(f"{suffix}{w}", key, i) for i, w in enumerate((10, 60, 600))]
    return out


_RUNTIME_GAUGES = _runtime_gauges()
_RUNTIME_LABELS = ["cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version"]
#: runtime figures that only grow (since boot): counters, so their ``_total`` sample name is the
#: exporter's and promtool accepts it (the exporter declares them gauges named ``*_total``)
_RUNTIME_COUNTERS = frozenset({"put_message_size_total", "putmessage_times_total"})
#: rocketmq-exporter's camelCase label names and the snake_case spellings promtool's lint wants;
#: ``metricsRocketmqExporterCompat=true`` keeps the exporter's (and its ``*_total`` gauges)
#: the lint-clean names of rocketmq-exporter's rocketmq_group_count / rocketmq_producer_count
_CLIENT_COUNTS = ("rocketmq_group_consumers", "rocketmq_producer_instances")
SNAKE_LABELS = {
    "brokerIP": "broker_ip",
    "brokerHost": "broker_host",
    "countOfOnlineConsumers": "count_of_online_consumers",
    "msgModel": "msg_model",
}


def _number(text: str | None, index: int | None) -> float | None:
    if text is None:
        return None
    parts = text.split()
    try:
        return float(parts[index or 0]) if parts else None
    except (ValueError, IndexError):
        return None


@dataclass(eq=False, kw_only=True)
class BrokerMetrics:
    """The broker's collector (``prometheus_client``'s custom-collector protocol: ``collect``)."""

    state: BrokerState
    store: MessageStore
    #: the current stats manager (``BrokerController.use_stats`` swaps it)
    stats: Callable[[], BrokerStatsManager]
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    consumers: ConsumerManager
    producers: ProducerManager
    #: long-polling pulls held now
    held_pulls: Callable[[], int]
    #: open remoting connections (every port)
    connections: Callable[[], int]
    #: GET_BROKER_RUNTIME_INFO's table
    runtime_info: Callable[[], dict[str, str]]
    #: CommitLog bytes written but not flushed
    flush_behind: Callable[[], int]
    now_ms: Callable[[], int]
    latency: PutLatency = field(default_factory=PutLatency)
    #: ``metricsRocketmqExporterCompat``: rocketmq-exporter's label spellings and gauge types
    #: verbatim (promtool then lints them) instead of the lint-clean ones
    exporter_compat: bool = False
    #: more families (HA, transactions): each called at every scrape
    sources: list[Callable[[], Iterable[Metric]]] = field(default_factory=list)

    def _labels(self, names: list[str]) -> list[str]:
        """``names`` as exported: the exporter's spelling in compat mode, else snake_case."""
        return names if self.exporter_compat else [SNAKE_LABELS.get(n, n) for n in names]

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        cfg = self.state.config
        cluster, broker = cfg.broker_cluster_name, cfg.broker_name
        node = [cluster, "broker", broker]
        node_labels = ["cluster", "node_type", "node_id"]
        stats = self.stats()
        now = self.now_ms()

        def gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=labels)

        # -- per topic: put TPS and bytes, offsets (exporter) and totals (5.x)
        tps = gauge(
            "rocketmq_producer_tps", "messages put per second (last minute)", ["cluster", "broker", "topic"]
        )
        size = gauge(
            "rocketmq_producer_message_size",
            "bytes put per second (last minute)",
            ["cluster", "broker", "topic"],
        )
        m_in = CounterMetricFamily("rocketmq_messages_in", "messages put", labels=[*node_labels, "topic"])
        b_in = CounterMetricFamily("rocketmq_throughput_in", "bytes put", labels=[*node_labels, "topic"])
        put_nums = stats.stats_table[TOPIC_PUT_NUMS].items
        put_size = stats.stats_table[TOPIC_PUT_SIZE].items
        for topic, item in list(put_nums.items()):
            tps.add_metric([cluster, broker, topic], item.minute(now).tps)
            m_in.add_metric([*node, topic], item.value)
        for topic, item in list(put_size.items()):
            size.add_metric([cluster, broker, topic], item.minute(now).tps)
            b_in.add_metric([*node, topic], item.value)
        yield from (tps, size, m_in, b_in)

        offset = gauge(
            "rocketmq_producer_offset",
            "sum of the max offsets of the topic's queues",
            ["cluster", "broker", "topic"],
        )
        retry = gauge(
            "rocketmq_topic_retry_offset",
            "sum of the max offsets of a retry topic",
            ["cluster", "broker", "topic"],
        )
        dlq = gauge(
            "rocketmq_topic_dlq_offset",
            "sum of the max offsets of a group's DLQ",
            ["cluster", "broker", "group"],
        )
        store = self.store
        table = self.topics.topic_config_table
        for name, tc in list(table.items()):
            total = sum(max(0, store.get_max_offset_in_queue(name, q)) for q in range(tc.write_queue_nums))
            if is_retry_topic(name):
                retry.add_metric([cluster, broker, name], total)
            elif is_dlq_topic(name):
                dlq.add_metric([cluster, broker, name[len(_DLQ_PREFIX) :]], total)
            else:
                offset.add_metric([cluster, broker, name], total)
        yield from (offset, retry, dlq)
        topics = GaugeMetricFamily("rocketmq_topic_number", "topics on this broker", labels=node_labels)
        topics.add_metric(node, len(table))
        yield topics
        yield from self._groups(stats, node, node_labels, cluster, broker, now)
        info = self.runtime_info()
        yield from self._runtime(info, cluster)
        yield from self._store_and_clients(node, node_labels)
        yield from self._client_counts(cluster, broker)
        hist = HistogramMetricFamily(
            "rocketmq_put_latency_seconds", "CommitLog append time of a put", labels=node_labels
        )
        lat = self.latency
        hist.add_metric(node, lat.buckets(), lat.sum_ns / 1e9)
        yield hist
        for source in self.sources:
            yield from source()

    def _groups(
        self,
        stats: BrokerStatsManager,
        node: list[str],
        node_labels: list[str],
        cluster: str,
        broker: str,
        now: int,
    ) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        group_labels = ["cluster", "broker", "topic", "group"]
        out: dict[str, GaugeMetricFamily] = {
            name: GaugeMetricFamily(name, doc, labels=group_labels)
            for name, doc in (
                ("rocketmq_consumer_tps", "messages pulled per second (last minute)"),
                ("rocketmq_group_consume_tps", "messages pulled per second (last minute)"),
                ("rocketmq_consumer_message_size", "bytes pulled per second (last minute)"),
                ("rocketmq_send_back_nums", "messages sent back for redelivery (last minute)"),
                ("rocketmq_consumer_offset", "sum of the max offsets of the queues the group reads"),
                ("rocketmq_group_consume_total_offset", "sum of the group's committed offsets"),
                (
                    "rocketmq_group_get_latency_by_storetime",
                    "ms since the oldest unconsumed message was stored",
                ),
            )
        }
        m_out = CounterMetricFamily(
            "rocketmq_messages_out", "messages pulled", labels=[*node_labels, "topic", "consumer_group"]
        )
        b_out = CounterMetricFamily(
            "rocketmq_throughput_out", "bytes pulled", labels=[*node_labels, "topic", "consumer_group"]
        )
        to_dlq = CounterMetricFamily(
            "rocketmq_send_to_dlq_messages",
            "messages moved to the DLQ",
            labels=[*node_labels, "topic", "consumer_group"],
        )
        targets: tuple[tuple[str, str, CounterMetricFamily], ...] = (
            (GROUP_GET_NUMS, "rocketmq_consumer_tps", m_out),
            (GROUP_GET_SIZE, "rocketmq_consumer_message_size", b_out),
        )
        for name, family, counter in targets:
            for key, item in list(stats.stats_table[name].items.items()):
                topic, _, group = key.partition("@")
                snap = item.minute(now)
                out[family].add_metric([cluster, broker, topic, group], snap.tps)
                if name == GROUP_GET_NUMS:
                    out["rocketmq_group_consume_tps"].add_metric([cluster, broker, topic, group], snap.tps)
                counter.add_metric([*node, topic, group], item.value)
        for key, item in list(stats.stats_table[SNDBCK_PUT_NUMS].items.items()):
            topic, _, group = key.partition("@")
            out["rocketmq_send_back_nums"].add_metric([cluster, broker, topic, group], item.minute(now).sum)
        for key, item in list(stats.stats_table[SNDBCK2DLQ_TIMES].items.items()):
            topic, _, group = key.partition("@")
            to_dlq.add_metric([*node, topic, group], item.value)

        diff_labels = self._labels(["group", "topic", "countOfOnlineConsumers", "msgModel"])
        diff = GaugeMetricFamily("rocketmq_group_diff", "messages not yet consumed", labels=diff_labels)
        retry_diff = GaugeMetricFamily(
            "rocketmq_group_retrydiff", "retry messages not yet consumed", labels=diff_labels
        )
        dlq_diff = GaugeMetricFamily(
            "rocketmq_group_dlqdiff", "DLQ messages not yet consumed", labels=diff_labels
        )
        lag = GaugeMetricFamily(
            "rocketmq_consumer_lag_messages",
            "messages behind",
            labels=[*node_labels, "topic", "consumer_group"],
        )
        lag_ms = GaugeMetricFamily(
            "rocketmq_consumer_lag_latency",
            "ms behind the oldest unconsumed message",
            labels=[*node_labels, "topic", "consumer_group"],
        )
        q_labels = [*node_labels, "topic", "consumer_group", "queue_id"]
        q_lag = GaugeMetricFamily(
            "rocketmq_consumer_queue_lag_messages", "messages behind, per queue", labels=q_labels
        )
        q_lag_ms = GaugeMetricFamily(
            "rocketmq_consumer_queue_lag_latency", "ms behind, per queue", labels=q_labels
        )
        for row in lag_rows(self.store, self.topics, self.offsets, now):
            topic, group = row.topic, row.group
            info = self.consumers.get_consumer_group_info(group)
            online = len(info.channels) if info is not None else 0
            model = "0" if info is not None and info.message_model is MessageModel.BROADCASTING else "1"
            target = retry_diff if is_retry_topic(topic) else dlq_diff if is_dlq_topic(topic) else diff
            target.add_metric([group, topic, str(online), model], row.diff)
            labels = [cluster, broker, topic, group]
            out["rocketmq_consumer_offset"].add_metric(labels, row.broker_offset)
            out["rocketmq_group_consume_total_offset"].add_metric(labels, row.consumer_offset)
            out["rocketmq_group_get_latency_by_storetime"].add_metric(labels, row.latency_ms)
            lag.add_metric([*node, topic, group], row.diff)
            lag_ms.add_metric([*node, topic, group], row.latency_ms)
            for qid, behind, ms in row.queues:
                q_lag.add_metric([*node, topic, group, str(qid)], behind)
                q_lag_ms.add_metric([*node, topic, group, str(qid)], ms)
        yield from out.values()
        yield from (m_out, b_out, to_dlq, diff, retry_diff, dlq_diff, lag, lag_ms, q_lag, q_lag_ms)
        groups = GaugeMetricFamily(
            "rocketmq_consumer_group_number", "subscription groups", labels=node_labels
        )
        groups.add_metric(node, len(self.groups.subscription_group_table))
        yield groups

    def _runtime(self, info: dict[str, str], cluster: str) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        cfg = self.state.config
        addr = self.state.broker_addr
        ip = addr.rpartition(":")[0]
        labels = [cluster, addr, cfg.broker_name, info.get("brokerVersionDesc", ""), info.get("bootTimestamp", ""),
                  info.get("brokerVersion", "")]  # fmt: skip
        runtime_labels = self._labels(_RUNTIME_LABELS)
        for suffix, key, index in _RUNTIME_GAUGES:
            value = _number(info.get(key), index)
            if value is None:
                continue
            name, doc = f"rocketmq_brokeruntime_{suffix}", f"runtime info {key}"
            family: GaugeMetricFamily | CounterMetricFamily
            if suffix in _RUNTIME_COUNTERS and not self.exporter_compat:
                # prometheus_client appends "_total" to the sample: the exporter's series name
                family = CounterMetricFamily(name.removesuffix("_total"), doc, labels=runtime_labels)
            else:
                family = GaugeMetricFamily(name, doc, labels=runtime_labels)
            family.add_metric(labels, value)
            yield family
        lat = self.latency
        append = "CommitLog append time, ms"
        extra: list[tuple[str, str, float]] = [
            ("put_latency_99", append, lat.quantile_ms(0.99)),
            ("put_latency_999", append, lat.quantile_ms(0.999)),
            ("putmessage_entire_time_max", append, lat.max_ns / 1e6),
            # the runtime table renders this one human-readable ("1.2 KiB"): the raw bytes here
            ("remain_howmanydata_toflush", "CommitLog bytes not yet flushed", self.flush_behind()),
        ]
        try:
            disk = shutil.disk_usage(self.store.config.commit_log_dir)
            extra += [
                # a gauge may not end in "_total" (promtool): the exporter's name in compat mode only
                (
                    "commitlogdir_capacity_total" if self.exporter_compat else "commitlogdir_capacity_bytes",
                    "bytes of the CommitLog's disk",
                    disk.total,
                ),
                ("commitlogdir_capacity_free", "free bytes on the CommitLog's disk", disk.free),
            ]
        except OSError:
            pass  # the directory is gone (being deleted): no capacity figures this scrape
        for suffix, doc, value in extra:
            family = GaugeMetricFamily(f"rocketmq_brokeruntime_{suffix}", doc, labels=runtime_labels)
            family.add_metric(labels, value)
            yield family
        stats = self.stats()
        now = self.now_ms()
        for name, metric in (
            (BROKER_PUT_NUMS, "rocketmq_broker_tps"),
            (BROKER_GET_NUMS, "rocketmq_broker_qps"),
        ):
            family = GaugeMetricFamily(
                metric,
                "messages per second (last minute)",
                labels=self._labels(["cluster", "brokerIP", "broker"]),
            )
            item = stats.stats_table[name].items.get(cluster)
            family.add_metric(
                [cluster, ip, cfg.broker_name], item.minute(now).tps if item is not None else 0.0
            )
            yield family

    def _client_counts(self, cluster: str, broker: str) -> Iterator[Metric]:
        # the groups with committed offsets (the exporter's "groups consuming a topic"), plus the online ones
        groups = [key.partition("@")[2] for key in list(self.offsets.offset_table)]
        return _client_count_families(
            self.consumers, self.producers, groups, cluster, broker, self.exporter_compat
        )

    def _store_and_clients(self, node: list[str], node_labels: list[str]) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        store = self.store
        consumers = sum(len(g.channels) for g in list(self.consumers.table.values()))
        producers = sum(len(self.producers.channels_of(e)) for e in list(self.producers.table.values()))
        for name, doc, value in (
            (
                "rocketmq_storage_dispatch_behind_bytes",
                "CommitLog bytes not yet dispatched to queues",
                store.dispatch_behind_bytes,
            ),
            ("rocketmq_storage_flush_behind_bytes", "CommitLog bytes not yet flushed", self.flush_behind()),
            (
                "rocketmq_storage_size",
                "CommitLog bytes kept",
                store.get_max_phy_offset() - store.get_min_phy_offset(),
            ),
            ("rocketmq_pull_held_requests", "long-polling pulls held now", self.held_pulls()),
            ("rocketmq_connections", "open remoting connections", self.connections()),
            ("rocketmq_consumer_connections", "consumer channels", consumers),
            ("rocketmq_producer_connections", "producer channels", producers),
        ):
            family = GaugeMetricFamily(name, doc, labels=node_labels)
            family.add_metric(node, value)
            yield family


def _client_count_families(
    consumers: ConsumerManager,
    producers: ProducerManager,
    groups: Iterable[str],
    cluster: str,
    broker: str,
    compat: bool,
) -> Iterator[Metric]:
    """Online consumers of each group in ``groups`` or online (0 when none) {caddr (their TCP
    addresses), localaddr (their client ids), group}, and producer instances per group {cluster,
    broker, group}: rocketmq-exporter's ``rocketmq_group_count`` / ``rocketmq_producer_count``,
    which promtool rejects (a gauge may not end in ``_count``), so ``rocketmq_group_consumers`` /
    ``rocketmq_producer_instances`` unless ``compat``."""
    from prometheus_client.core import GaugeMetricFamily

    names = ("rocketmq_group_count", "rocketmq_producer_count") if compat else _CLIENT_COUNTS
    count = GaugeMetricFamily(names[0], "online consumers", labels=["caddr", "localaddr", "group"])
    for group in sorted(set(groups) | set(consumers.table)):
        info = consumers.get_consumer_group_info(group)
        channels = list(info.channels.values()) if info is not None else []
        caddr = ",".join(c.conn.remote_addr for c in channels)
        count.add_metric([caddr, ",".join(c.client_id for c in channels), group], len(channels))
    yield count
    instances = GaugeMetricFamily(names[1], "producer instances", labels=["cluster", "broker", "group"])
    for group, entry in list(producers.table.items()):
        instances.add_metric([cluster, broker, group], len(producers.channels_of(entry)))
    yield instances


def ha_families(info: dict[str, str], cluster: str, broker: str) -> Iterator[Metric]:
    """Replication figures from the store's ``ha_runtime_info`` (a ``BrokerMetrics.sources``
    entry): on a master ``rocketmq_ha_slaves``, and per slave its acknowledged offset and
    ``rocketmq_ha_slave_fall_behind_bytes`` (the put offset minus that acknowledgement: the
    replication lag a SYNC_MASTER send waits for); on a slave ``rocketmq_ha_connected`` and the
    offset it last reported to its master."""
    from prometheus_client.core import GaugeMetricFamily

    node = [cluster, "broker", broker]
    labels = ["cluster", "node_type", "node_id"]
    if "haSlaveCount" in info:
        count = GaugeMetricFamily("rocketmq_ha_slaves", "slaves connected to this master", labels=labels)
        count.add_metric(node, int(info["haSlaveCount"]))
        ack = GaugeMetricFamily(
            "rocketmq_ha_slave_ack_offset",
            "CommitLog offset the slave acknowledged",
            labels=[*labels, "slave"],
        )
        behind = GaugeMetricFamily(
            "rocketmq_ha_slave_fall_behind_bytes",
            "CommitLog bytes the slave has not acknowledged yet",
            labels=[*labels, "slave"],
        )
        put_offset = int(info["haSlaveFallBehind"]) + int(info["haSlaveAckOffset"])
        for entry in filter(None, info.get("haSlaves", "").split(",")):
            addr, _, offset = entry.rpartition("=")
            ack.add_metric([*node, addr], int(offset))
            behind.add_metric([*node, addr], max(0, put_offset - int(offset)))
        yield from (count, ack, behind)
    elif "haConnected" in info:
        connected = GaugeMetricFamily(
            "rocketmq_ha_connected", "1 while this slave is connected to its master", labels=labels
        )
        connected.add_metric(node, 1 if info["haConnected"] == "true" else 0)
        reported = GaugeMetricFamily(
            "rocketmq_ha_reported_offset", "CommitLog offset this slave last reported", labels=labels
        )
        reported.add_metric(node, int(info["haReportedOffset"]))
        yield from (connected, reported)
