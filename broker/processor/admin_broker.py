"""Broker-wide admin: codes 25, 26, 28, 315.

=====  ===========================  ======================================================================
code   request                      behaviour (RocketMQ ``AdminBrokerProcessor``)
=====  ===========================  ======================================================================
28     GET_BROKER_RUNTIME_INFO      ``KVTable`` with RocketMQ's key names and value formats (below)
26     GET_BROKER_CONFIG            every config key as Java properties text; header ``version`` = the
                                    config's DataVersion JSON
25     UPDATE_BROKER_CONFIG         properties body applied live; unreadable → 1 ``string2Properties
                                    error``; ``brokerConfigPath``/``configBlackList`` → 16; unknown key or
                                    bad value → 1 naming it; ``brokerPermission`` bumps the topic data
                                    version and re-registers before the reply
315    VIEW_BROKER_STATS_DATA       ``BrokerStatsData`` of one stats item; 1 ``The stats <N> <K> not exist``
=====  ===========================  ======================================================================

Runtime-info keys, all strings (``mqadmin clusterList``/``brokerStatus``, the dashboard and
rocketmq-exporter parse them; the exporter's ``Long.parseLong`` fails on a missing one): the
store's (``putTps`` = ``"10s 60s 600s"`` rates with two decimals, ``getTransferedTps`` [sic],
``commitLogDiskRatio``, ``commitLogMinOffset`` ...), ``brokerVersionDesc`` (``V4_9_8``),
``brokerVersion`` (409), ``msgPutTotal{YesterdayMorning,TodayMorning,TodayNow}`` and the
``msgGet`` triple, thread-pool queue sizes/capacities/head wait times (pocketmq has no pools:
sizes and waits 0, capacities Java's defaults), ``remainHowManyDataToFlush`` as
``humanReadableByteCount`` (``"1.5 KiB"``), ``commitLogDirCapacity`` = ``"Total : 49.1 GiB, Free :
20.3 GiB."``, ``startAcceptSendRequestTimeStamp``, ``scheduleMessageOffset_<level>`` =
``"<delay offset>,<max offset>"`` when a schedule service exists, ``putLatency99`` /
``putLatency999`` (ms, two decimals) and ``putMessageEntireTimeMax`` (ms) from the broker's
put-latency histogram (:class:`PutLatencyWindow`). Store keys the store does not measure yet (the
millisecond ``putMessageDistributeTime`` buckets, ``getMessageEntireTimeMax``) are zeros.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pocketmq.broker.processor.admin_base import AdminBase, RegisterBroker, fail, ok, register_now
from pocketmq.broker.processor.admin_bodies import encode_broker_stats_data
from pocketmq.broker.processor.admin_checks import refused_keys
from pocketmq.broker.stats import human_readable_byte_count, version_desc
from pocketmq.remoting.common import properties
from pocketmq.remoting.common.config import ConfigError
from pocketmq.remoting.protocol.codes import CURRENT_VERSION, RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.headers import ViewBrokerStatsDataRequestHeader
from pocketmq.remoting.protocol.route import RMQ_SYS_SCHEDULE_TOPIC, DataVersion, KVTable

if TYPE_CHECKING:
    from pocketmq.broker.config import BrokerConfig
    from pocketmq.broker.metrics import PutLatency
    from pocketmq.broker.stats import BrokerStatsManager
    from pocketmq.broker.topic_config import TopicConfigManager
    from pocketmq.remoting.common.clock import Clock
    from pocketmq.remoting.transport.connection import RemotingConnection
    from pocketmq.store import MessageStore

logger = logging.getLogger("pocketmq.broker.processor.admin")


_PUT_DISTRIBUTION = (
    "[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]",
    "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]",
)  # fmt: skip
#: Store keys of Java's ``StoreStatsService.getRuntimeInfo`` the store may not report (yet).
STORE_DEFAULTS = {
    "putMessageEntireTimeMax": "0",
    "getMessageEntireTimeMax": "0",
    "dispatchMaxBuffer": "0",
    "putMessageDistributeTime": "".join(f"{label}:0 " for label in _PUT_DISTRIBUTION),
    "putMessageFailedTimes": "0",
    "remainTransientStoreBufferNumbs": "0",
    "pageCacheLockTimeMills": "0",
}
#: Java ``BrokerConfig`` queue capacities (pocketmq serves from one event loop, no pools).
POOL_CAPACITIES = {
    "sendThreadPoolQueueCapacity": "10000",
    "pullThreadPoolQueueCapacity": "100000",
    "queryThreadPoolQueueCapacity": "20000",
    "EndTransactionThreadPoolQueueCapacity": "100000",
}


def _disk_capacity(path: str) -> str | None:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None
    return (
        f"Total : {human_readable_byte_count(usage.total)}, Free : {human_readable_byte_count(usage.free)}."
    )


class PutLatencyWindow:
    """``putLatency99`` / ``putLatency999`` as RocketMQ's ``StoreStatsService`` reports them: over
    the previous window of at least a minute (zeros until the first one has passed), not since
    boot, interpolated linearly inside the bucket that holds the quantile, in ms.

    RocketMQ rolls its window every minute on a timer; this one rolls when it is read and a
    minute or more has passed since the last roll, so a window spans from one roll to the next
    read (a minute when ``brokerStatus`` polls at least once a minute). Reading it costs the put
    path nothing: it snapshots :class:`PutLatency`'s bucket counters.
    """

    WINDOW = 60.0

    def __init__(self, latency: PutLatency, now: Callable[[], float] = time.monotonic) -> None:
        self.latency = latency
        self._now = now
        self._rolled_at = now()
        self._snapshot = list(latency.counts)
        self._window = [0] * len(self._snapshot)

    def window(self) -> list[int]:
        """Per-bucket counts of the last complete window (bucket i: below ``1024 << i`` ns)."""
        now = self._now()
        if now - self._rolled_at >= self.WINDOW:
            counts = list(self.latency.counts)
            self._window = [c - s for c, s in zip(counts, self._snapshot, strict=True)]
            self._snapshot, self._rolled_at = counts, now
        return self._window

    def quantile_ms(self, q: float) -> float:
        """RocketMQ's ``findPutMessageEntireTimePX`` on these buckets: the rank ``int(total * q)``
        placed proportionally between the bounds of the bucket that reaches it."""
        window = self.window()
        rank = int(sum(window) * q)
        passed = 0
        for i, count in enumerate(window):
            if rank <= passed + count:
                low = (1024 << (i - 1)) if i else 0
                high = 1024 << i
                return (low + (high - low) * (rank - passed) / count if count else low) / 1e6
            passed += count
        return 0.0  # pragma: no cover - the last bucket always reaches the rank

    def keys(self) -> dict[str, str]:
        return {
            "putLatency99": f"{self.quantile_ms(0.99):.2f}",
            "putLatency999": f"{self.quantile_ms(0.999):.2f}",
            "putMessageEntireTimeMax": str(self.latency.max_ns // 1_000_000),
        }


def runtime_info(
    store: MessageStore,
    stats: BrokerStatsManager,
    config: BrokerConfig,
    schedule: Any,
    put_latency: PutLatencyWindow | None = None,
) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO's table (Java ``prepareRuntimeInfo``)."""
    info = dict(store.runtime_info())
    for key, value in STORE_DEFAULTS.items():
        info.setdefault(key, value)
    if put_latency is not None:
        info.update(put_latency.keys())
    day = stats.record_day()
    info.update(
        {
            "brokerVersionDesc": version_desc(CURRENT_VERSION),
            "brokerVersion": str(CURRENT_VERSION),
            "msgPutTotalYesterdayMorning": str(day.msg_put_total_yesterday_morning),
            "msgPutTotalTodayMorning": str(day.msg_put_total_today_morning),
            "msgPutTotalTodayNow": str(day.msg_put_total_today_now),
            "msgGetTotalYesterdayMorning": str(day.msg_get_total_yesterday_morning),
            "msgGetTotalTodayMorning": str(day.msg_get_total_today_morning),
            "msgGetTotalTodayNow": str(day.msg_get_total_today_now),
            "sendThreadPoolQueueSize": "0",
            "pullThreadPoolQueueSize": "0",
            "queryThreadPoolQueueSize": "0",
            "EndTransactionQueueSize": "0",
            **POOL_CAPACITIES,
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "dispatchBehindBytes": str(store.dispatch_behind_bytes),
            "earliestMessageTimeStamp": str(store.get_earliest_message_time()),
            "startAcceptSendRequestTimeStamp": str(config.start_accept_send_request_time_stamp),
        }
    )
    # Java's broker re-renders the store's raw byte count in human-readable form
    raw = info.get("remainHowManyDataToFlush", "0")
    info["remainHowManyDataToFlush"] = human_readable_byte_count(int(raw)) if raw.isdigit() else raw
    capacity = _disk_capacity(config.store.store_path_root_dir)
    if capacity is not None:
        info["commitLogDirCapacity"] = capacity
    table = getattr(schedule, "offset_table", None)
    if isinstance(table, dict):
        for level, offset in sorted(table.items()):
            max_offset = store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, int(level) - 1)
            info[f"scheduleMessageOffset_{level}"] = f"{offset},{max_offset}"
    return info


@dataclass(eq=False, kw_only=True)
class BrokerAdmin(AdminBase):
    store: MessageStore
    topics: TopicConfigManager
    #: the schedule service (``scheduleMessageOffset_<level>`` keys) or None
    schedule: Any
    clock: Clock
    #: adopts a new config (the controller's ``update_config``: re-registers when needed)
    update_config: Callable[[BrokerConfig], None]
    register_broker: RegisterBroker
    #: the transaction service (``transaction*`` keys: progress and check counts) or None
    transactions: Any = None
    #: ``putLatency99`` / ``putLatency999`` / ``putMessageEntireTimeMax`` (None: not reported)
    put_latency: PutLatencyWindow | None = None

    HANDLERS = {
        RequestCode.GET_BROKER_RUNTIME_INFO: "get_broker_runtime_info",
        RequestCode.GET_BROKER_CONFIG: "get_broker_config",
        RequestCode.UPDATE_BROKER_CONFIG: "update_broker_config",
        RequestCode.VIEW_BROKER_STATS_DATA: "view_broker_stats_data",
    }

    def __post_init__(self) -> None:
        #: Java ``Configuration.dataVersion``: bumped on every accepted update.
        self.config_version = DataVersion(self.clock.now_ms(), 0)

    def get_broker_runtime_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        info = runtime_info(self.store, self.stats, self.state.config, self.schedule, self.put_latency)
        if self.transactions is not None:
            info.update(self.transactions.runtime_info())
        return ok(request, KVTable(info).encode())

    def get_broker_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        text = properties.dumps(self.state.config.properties())
        return ok(request, text.encode("utf-8"), {"version": self.config_version.encode().decode()})

    async def update_broker_config(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        try:
            updates = properties.loads_request_body(request.body)
        except ValueError as exc:
            return fail(request, ResponseCode.SYSTEM_ERROR, str(exc))
        if not updates:
            return ok(request)
        refused = refused_keys(updates)
        if refused:
            logger.warning(
                "broker config update refused keys=%s caller=%s", ",".join(refused), conn.remote_addr
            )
            return fail(request, ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        try:
            new_config = self.state.config.with_updates(updates, source="UPDATE_BROKER_CONFIG")
        except ConfigError as exc:
            return fail(request, ResponseCode.SYSTEM_ERROR, str(exc))
        logger.info("updateBrokerConfig, new config: [%s] client: %s", updates, conn.remote_addr)
        self.update_config(new_config)
        now = self.clock.now_ms()
        self.config_version = self.config_version.next_version(now)
        if "brokerPermission" in updates or "broker_permission" in updates:
            # name servers rebuild queue data only for a new data version (Java nextVersion())
            tcm = self.topics
            tcm.data_version = tcm.data_version.next_version(now)
            await register_now(self.register_broker)
        return ok(request)

    def view_broker_stats_data(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = ViewBrokerStatsDataRequestHeader.from_ext_fields(request.ext_fields)
        stats = self.stats
        item = stats.get_stats_item(h.stats_name, h.stats_key)
        if item is None:
            return fail(
                request, ResponseCode.SYSTEM_ERROR, f"The stats <{h.stats_name}> <{h.stats_key}> not exist"
            )
        now = stats.now_ms()
        return ok(request, encode_broker_stats_data(item.minute(now), item.hour(now), item.day(now)))
