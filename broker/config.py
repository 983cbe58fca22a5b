"""``BrokerConfig``: RocketMQ's broker keys, spelled and defaulted as in ``BrokerConfig.java``.

A Java ``broker.conf`` is one flat properties file that mixes the keys of four Java classes
(``BrokerConfig``, ``NettyServerConfig``, ``NettyClientConfig``, ``MessageStoreConfig``).
:func:`load_broker_config` splits it: broker and server keys go to :class:`BrokerSettings`,
store keys to :class:`~pocketmq.store.config.MessageStoreConfig`, Java keys pocketmq does not
implement are accepted with a warning, and anything else is a startup error naming the key.

Order (docs/development.md, configuration): defaults (``NAMESRV_ADDR`` / ``ROCKETMQ_HOME`` from the environment act as
defaults, as in Java) → the ``.conf`` file → ``-n`` → ``--set key=value`` overrides.

RocketMQ <= 4.2 spelled two store keys ``mapedFileSizeCommitLog`` / ``mapedFileSizeConsumeQueue``;
both spellings load (the ``mapped`` one wins when a file has both). Keys of RocketMQ 5.x that
pocketmq does not implement (``timerWheelEnable``, ...) are accepted with a warning.

Derived values, as ``BrokerStartup`` derives them: ``haListenPort`` = ``listenPort + 1`` unless
set; ``brokerIP2`` = ``brokerIP1`` unless set; ``registerNameServerPeriod`` clamped to 10-60 s.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field, field_validator

from pocketmq.remoting.common.config import (
    CONFIG_MODEL_CONFIG,
    ConfigError,
    apply_config,
    config_properties,
    load_configs,
    parse_overrides,
    read_conf_file,
)
from pocketmq.remoting.common.metrics_http import ExporterType, MetricsLabel
from pocketmq.remoting.transport.limits import (
    DEFAULT_FRAME_TIMEOUT,
    DEFAULT_MAX_HEADER_SIZE,
    DEFAULT_PARTIAL_FRAME_BUDGET,
)
from pocketmq.remoting.transport.tls import RESTART_REMARK, TlsSettings, changed_tls_keys
from pocketmq.store import MessageStoreConfig

logger = logging.getLogger(__name__)

__all__ = [
    "FOREIGN_KEYS",
    "BrokerConfig",
    "BrokerSettings",
    "ConfigError",
    "load_broker_config",
    "local_address",
]

_GiB = 1024 * 1024 * 1024


def local_address() -> str:
    """A non-loopback IPv4 address of this host, as RocketMQ's ``RemotingUtil.getLocalAddress``.

    Falls back to ``127.0.0.1`` when the host has none. No packet is sent: a UDP ``connect``
    only asks the kernel which source address it would route from.
    """
    with contextlib.suppress(OSError):
        for ip in socket.gethostbyname_ex(socket.gethostname())[2]:
            if not ip.startswith("127."):
                return ip
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("10.255.255.255", 1))
        ip = s.getsockname()[0]
        if ip and not ip.startswith("127.") and ip != "0.0.0.0":
            return str(ip)
    return "127.0.0.1"


def _default_broker_name() -> str:
    # Java: RemotingUtil/localHostName(), "DEFAULT_BROKER" if unknown.
    try:
        return socket.gethostname() or "DEFAULT_BROKER"
    except OSError:  # pragma: no cover
        return "DEFAULT_BROKER"


class BrokerSettings(TlsSettings):
    """Scalar broker + remoting-server keys (Java ``BrokerConfig`` and ``NettyServerConfig``), and
    the ``tls.*`` keys (:class:`~pocketmq.remoting.transport.tls.TlsSettings`)."""

    model_config = CONFIG_MODEL_CONFIG

    # -- identity and addresses
    rocketmq_home: str | None = Field(
        default_factory=lambda: os.environ.get("ROCKETMQ_HOME"), description="ROCKETMQ_HOME"
    )
    namesrv_addr: str | None = Field(
        default_factory=lambda: os.environ.get("NAMESRV_ADDR") or None,
        description="';'-separated name server addresses (default: $NAMESRV_ADDR)",
    )
    broker_ip1: str = Field(
        default_factory=local_address, alias="brokerIP1", description="advertised IP (clients connect here)"
    )
    broker_ip2: str | None = Field(None, alias="brokerIP2", description="HA address IP (default brokerIP1)")
    broker_name: str = Field(default_factory=_default_broker_name, min_length=1)
    broker_cluster_name: str = Field("DefaultCluster", min_length=1)
    broker_id: int = Field(0, ge=0, description="0 = master, > 0 = slave")
    broker_permission: int = Field(6, ge=0, le=15, description="PermName bits: 4 read, 2 write, 1 inherit")
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    # -- remoting server (NettyServerConfig)
    listen_port: int = Field(10911, ge=0, le=65535, description="0 = an ephemeral port (tests)")
    listen_host: str = Field("0.0.0.0", description="pocketmq: interface to bind")
    server_channel_max_idle_time_seconds: int = Field(120, ge=1)
    fast_listen_enable: bool = Field(
        True, description="pocketmq: also serve on listenPort-2 (RocketMQ's VIP channel), not for pulls"
    )
    write_buffer_high_water_mark: int = Field(
        0, ge=0, description="bytes of unread replies before that connection's reading stops (0 = 64 KiB)"
    )
    write_buffer_low_water_mark: int = Field(0, ge=0, description="bytes; reading resumes below (0 = 16 KiB)")
    server_socket_snd_buf_size: int = Field(
        0, ge=0, description="SO_SNDBUF bytes of accepted sockets (0 = OS default)"
    )
    server_socket_rcv_buf_size: int = Field(
        0, ge=0, description="SO_RCVBUF bytes of accepted sockets (0 = OS default; see docs/limits.md)"
    )
    server_socket_backlog: int = Field(1024, ge=1, description="listen backlog")
    # pocketmq's limits on one peer (docs/limits.md)
    server_header_max_length: int = Field(DEFAULT_MAX_HEADER_SIZE, ge=1024, le=16 * 1024 * 1024)
    server_frame_completion_timeout_seconds: float = Field(
        DEFAULT_FRAME_TIMEOUT, ge=0, description="0 = never"
    )
    server_partial_frame_memory_max: int = Field(DEFAULT_PARTIAL_FRAME_BUDGET, ge=1024 * 1024)
    server_max_connections: int = Field(0, ge=0, description="0 = open-file limit minus 1024")
    # flow control (docs/limits.md): a request that waited this long since it was read is
    # answered SYSTEM_BUSY (2) instead of handled
    broker_fast_failure_enable: bool = Field(
        True, description="answer SYSTEM_BUSY to requests that waited past waitTimeMillsIn*Queue"
    )
    wait_time_mills_in_send_queue: int = Field(
        200, ge=1, description="ms a send may wait between its read and its handling"
    )
    wait_time_mills_in_pull_queue: int = Field(5000, ge=1, description="ms, the same for a pull")
    wait_time_mills_in_heartbeat_queue: int = Field(31000, ge=1, description="ms, the same for a heartbeat")
    wait_time_mills_in_transaction_queue: int = Field(
        3000, ge=1, description="ms, the same for an END_TRANSACTION"
    )

    # -- topics and groups
    default_topic_queue_nums: int = Field(8, ge=1, le=1024)
    auto_create_topic_enable: bool = True
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    trace_topic_enable: bool = False
    reject_transaction_message: bool = False

    # -- offsets, polling, clients
    flush_consumer_offset_interval: int = Field(5000, ge=1, description="ms")
    long_polling_enable: bool = True
    short_polling_time_mills: int = Field(1000, ge=1, description="ms")
    notify_consumer_ids_changed_enable: bool = True
    max_held_pulls_per_queue: int = Field(
        1024, ge=1, description="pocketmq: long-polling requests held per queue before SYSTEM_BUSY"
    )
    channel_expired_timeout: int = Field(120_000, ge=1000, description="pocketmq: client channel expiry, ms")
    slave_read_enable: bool = False
    enable_property_filter: bool = False
    filter_support_retry: bool = False
    start_accept_send_request_time_stamp: int = 0

    # -- name server registration
    register_name_server_period: int = Field(30_000, description="ms, clamped to 10000..60000")
    register_broker_timeout_mills: int = Field(6000, ge=1)
    compressed_register: bool = False
    force_register: bool = True

    # -- transactions (broker/transaction: docs/transactions.md)
    transaction_time_out: int = Field(6000, ge=0, description="ms a half waits before its first check")
    transaction_check_max: int = Field(15, ge=1, description="checks before a half is discarded")
    transaction_check_interval: int = Field(60_000, ge=1, description="ms between check runs")

    # -- misc
    acl_enable: bool = Field(
        False,
        description="ACL 1.0: signed requests checked against rocketmqHome/conf/plain_acl.yml (+ conf/acl/)",
    )
    use_tls: bool = Field(
        False,
        alias="useTLS",
        description="NettyClientConfig: the broker's own connections (name servers) use TLS",
    )
    acl_file_watch_interval_ms: int = Field(
        5000, ge=100, description="pocketmq: how often the ACL files are checked for changes (hot reload), ms"
    )
    store_reply_message_enable: bool = True
    loop_lag_warn_millis: int = Field(
        50, ge=0, le=60_000, description="pocketmq: log event loop turns later than this, ms (0 = off)"
    )
    loop_sched_slice_micros: int = Field(
        0,
        ge=0,
        le=100_000,
        description="pocketmq: the event loop thread's scheduler slice, us (Linux 6.12+; 0 = the kernel's default, off; else 100..100000)",
    )

    # -- metrics (RocketMQ 5.x keys; remoting/common/metrics_http.py)
    metrics_exporter_type: ExporterType = Field(
        "DISABLE", description="PROM serves Prometheus /metrics; DISABLE = off"
    )
    metrics_prom_exporter_port: int = Field(5557, ge=0, le=65535, description="exporter port (0 = ephemeral)")
    metrics_prom_exporter_host: str = Field("", description="exporter interface ('' = every interface)")
    metrics_label: MetricsLabel = Field("", description="'name:value,...' labels added to every metric")
    metrics_rocketmq_exporter_compat: bool = Field(
        False,
        description="pocketmq: rocketmq-exporter's camelCase labels and *_total gauges verbatim (promtool lints them)",
    )

    # -- RocketMQ <= 4.2 spellings of two store keys: moved into ``store`` by ``_combine``
    maped_file_size_commit_log: int | None = Field(
        None, ge=4096, description="RocketMQ <= 4.2 spelling of mappedFileSizeCommitLog"
    )
    maped_file_size_consume_queue: int | None = Field(
        None, ge=20, description="RocketMQ <= 4.2 spelling of mappedFileSizeConsumeQueue"
    )

    @field_validator("namesrv_addr")
    @classmethod
    def _check_namesrv(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        for addr in v.split(";"):
            host, sep, port = addr.strip().rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ValueError(f"name server address {addr!r} is not host:port")
        return v.strip()

    @field_validator("loop_sched_slice_micros")
    @classmethod
    def _check_slice(cls, v: int) -> int:
        if 0 < v < 100:  # (the kernel's floor: it would round it up, not honour it)
            raise ValueError("a scheduler slice is 0 (the kernel's default) or 100..100000 us")
        return v

    @property
    def namesrv_addr_list(self) -> list[str]:
        return [a.strip() for a in (self.namesrv_addr or "").split(";") if a.strip()]

    @property
    def register_period_ms(self) -> int:
        """``registerNameServerPeriod`` clamped as ``BrokerController`` does (10-60 s)."""
        return max(10_000, min(60_000, self.register_name_server_period))


#: RocketMQ broker keys pocketmq has no field for (see ``remoting.common.config``): Java tuning
#: knobs (thread pools, their queues, Netty) map to None and load with a warning; keys of RocketMQ
#: features pocketmq lacks map to RocketMQ's default, the only value accepted.
FOREIGN_KEYS: dict[str, str | None] = {
    # Java machinery with no counterpart here (one event loop, no thread pools or Netty)
    "brokerConfigPath": None,
    "sendMessageThreadPoolNums": None,
    "putMessageFutureThreadPoolNums": None,
    "pullMessageThreadPoolNums": None,
    "processReplyMessageThreadPoolNums": None,
    "queryMessageThreadPoolNums": None,
    "adminBrokerThreadPoolNums": None,
    "clientManageThreadPoolNums": None,
    "consumerManageThreadPoolNums": None,
    "heartbeatThreadPoolNums": None,
    "endTransactionThreadPoolNums": None,
    "sendThreadPoolQueueCapacity": None,
    "putThreadPoolQueueCapacity": None,
    "pullThreadPoolQueueCapacity": None,
    "replyThreadPoolQueueCapacity": None,
    "queryThreadPoolQueueCapacity": None,
    "clientManagerThreadPoolQueueCapacity": None,
    "consumerManagerThreadPoolQueueCapacity": None,
    "heartbeatThreadPoolQueueCapacity": None,
    "endTransactionPoolQueueCapacity": None,
    "transferMsgByHeap": None,
    "isDelayOffsetPersistNeeded": None,
    "serverWorkerThreads": None,
    "serverCallbackExecutorThreads": None,
    "serverSelectorThreads": None,
    "serverOnewaySemaphoreValue": None,
    "serverAsyncSemaphoreValue": None,
    "serverPooledByteBufAllocatorEnable": None,
    "useEpollNativeSelector": None,
    "clientWorkerThreads": None,
    "clientCallbackExecutorThreads": None,
    "clientOnewaySemaphoreValue": None,
    "clientAsyncSemaphoreValue": None,
    "connectTimeoutMillis": None,
    "channelNotActiveInterval": None,
    "clientChannelMaxIdleTimeSeconds": None,
    "clientSocketSndBufSize": None,
    "clientSocketRcvBufSize": None,
    "clientPooledByteBufAllocatorEnable": None,
    "clientCloseSocketIfTimeout": None,
    "maxMessageSizeCheck": None,
    # features pocketmq does not implement: RocketMQ's default only (5.x keys: 4.x behaviour)
    "messageStorePlugIn": "",
    "flushConsumerOffsetHistoryInterval": "60000",
    "fetchNamesrvAddrByAddressServer": "false",
    "highSpeedMode": "false",
    "commercialEnable": "true",
    "commercialTimerCount": "1",
    "commercialTransCount": "1",
    "commercialBigCount": "1",
    "commercialBaseCount": "1",
    "maxDelayTime": "40",
    "disableConsumeIfConsumerReadSlowly": "false",
    "consumerFallbehindThreshold": "17179869184",
    "enableCalcFilterBitMap": "false",
    "expectConsumerNumUseFilter": "32",
    "maxErrorRateOfBloomFilter": "20",
    "filterDataCleanTimeSpan": "86400000",
    "filterServerNums": "0",
    "isolateLogEnable": "false",
    "autoDeleteUnusedStats": "false",
    "traceTopicName": "RMQ_SYS_TRACE_TOPIC",
    "enableDetailStat": "true",
    "transactionOpMsgMaxSize": "4096",
    "transactionOpBatchInterval": "3000",
    "compatibleWithOldNameSrv": "true",
    "enableSlaveActingMaster": "false",
    "checkAliveInterval": "5000",
    "enableControllerMode": "false",
    "timerWheelEnable": "false",
    "enableRemoteEscape": "false",
    "brokerNotActiveTimeoutMillis": "10000",
}

#: Old store key spelling → the settings attribute holding it → the store key it sets.
_MAPED_KEYS: dict[str, tuple[str, str]] = {
    "maped_file_size_commit_log": ("mapped_file_size_commit_log", "mappedFileSizeCommitLog"),
    "maped_file_size_consume_queue": ("mapped_file_size_consume_queue", "mappedFileSizeConsumeQueue"),
}
_OLD_SPELLINGS = {"mapedFileSizeCommitLog": "mappedFileSizeCommitLog",
                  "mapedFileSizeConsumeQueue": "mappedFileSizeConsumeQueue"}  # fmt: skip


class BrokerConfig(BrokerSettings):
    """The whole broker configuration: broker keys plus the nested store config (``store``).

    Build it with :func:`load_broker_config` (files, overrides) or directly in tests:
    ``BrokerConfig(brokerName="b", store=MessageStoreConfig(storePathRootDir=str(tmp)))``.
    """

    store: MessageStoreConfig = Field(default_factory=MessageStoreConfig)

    # -- derived values
    @property
    def broker_addr(self) -> str:
        """``brokerIP1:listenPort``: what clients dial and what name servers advertise."""
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def ha_server_addr(self) -> str:
        return f"{self.broker_ip2 or self.broker_ip1}:{self.store.ha_listen_port}"

    @property
    def max_message_size(self) -> int:
        return self.store.max_message_size

    @property
    def config_dir(self) -> str:
        """``<storePathRootDir>/config``: topics.json, subscriptionGroup.json, consumerOffset.json."""
        return os.path.join(self.store.store_path_root_dir, "config")

    @property
    def is_slave(self) -> bool:
        return self.store.broker_role.value == "SLAVE"

    def properties(self) -> dict[str, str]:
        """Every key as a Java string (``-p``, GET_BROKER_CONFIG): broker keys, then store keys."""
        out = config_properties(BrokerSettings.model_validate(self._settings_dict()))
        for old in _OLD_SPELLINGS:
            out.pop(old, None)
        out.update(config_properties(self.store))
        return out

    def _settings_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in BrokerSettings.model_fields}

    def with_updates(self, updates: Mapping[str, str], *, source: str = "update") -> BrokerConfig:
        """A copy with ``key=value`` strings applied to whichever part knows each key.

        Raises:
            ConfigError: an unknown key or a bad value (this config is unchanged: it is frozen).
        """
        broker_items: dict[str, str] = {}
        store_items: dict[str, str] = {}
        store_keys = _spellings(MessageStoreConfig)
        broker_keys = _spellings(BrokerSettings)
        for key, value in updates.items():
            key = _OLD_SPELLINGS.get(key, key)
            if key in store_keys:
                store_items[key] = value
            if key in broker_keys or key not in store_keys:
                broker_items[key] = value
        settings = apply_config(
            BrokerSettings.model_validate(self._settings_dict()),
            broker_items,
            known_foreign_keys=FOREIGN_KEYS,
            source=source,
        )
        store = apply_config(self.store, store_items, source=source) if store_items else self.store
        new = _combine(settings, store)
        changed = [k for k, n in _STARTUP_ONLY if getattr(new, n) != getattr(self, n)] + changed_tls_keys(
            self, new
        )
        if changed:
            raise ConfigError(f"{source}: {changed[0]} {RESTART_REMARK}", key=changed[0], source=source)
        return new


#: Security settings a running broker cannot change (refused by UPDATE_BROKER_CONFIG rather than
#: accepted and ignored until the next start), besides the tls.* keys: (key, attribute).
_STARTUP_ONLY = (("aclEnable", "acl_enable"), ("useTLS", "use_tls"))


def _spellings(model_cls: type[BaseModel]) -> set[str]:
    from pydantic.alias_generators import to_camel

    out: set[str] = set()
    for name, info in model_cls.model_fields.items():
        out.update((name, to_camel(name)))
        if isinstance(info.alias, str):
            out.add(info.alias)
    return out


def _combine(settings: BrokerSettings, store: MessageStoreConfig) -> BrokerConfig:
    data = {name: getattr(settings, name) for name in BrokerSettings.model_fields}
    moved: dict[str, int] = {}
    for old, (new, key) in _MAPED_KEYS.items():
        value = data.pop(old)
        # the current spelling wins when both were given
        if value is not None and new not in store.model_fields_set:
            moved[key] = value
    if moved:
        store = MessageStoreConfig.model_validate({**store.model_dump(by_alias=True), **moved})
    # BrokerStartup's role rules: a slave needs brokerId > 0; a master's id is always 0
    if store.broker_role.value == "SLAVE":
        if data["broker_id"] <= 0:
            raise ConfigError("Slave's brokerId must be > 0 (brokerRole=SLAVE)", key="brokerId")
    elif data["broker_id"] != 0:
        logger.warning(
            "brokerId=%d ignored: brokerRole=%s is a master, whose brokerId is 0 (set brokerRole=SLAVE "
            "for a slave)", data["broker_id"], store.broker_role.value,
        )  # fmt: skip
        data["broker_id"] = 0
    return BrokerConfig.model_validate({**data, "store": store})


def load_broker_config(
    conf_path: str | os.PathLike[str] | None = None,
    overrides: Iterable[str] = (),
    *,
    namesrv_addr: str | None = None,
) -> BrokerConfig:
    """Build the broker config from defaults, ``conf_path``, ``-n`` and ``key=value`` overrides.

    Raises:
        ConfigError: unreadable file, unknown key (named, with its file and line) or bad value.
    """
    file_items = read_conf_file(conf_path) if conf_path is not None else []
    extra = [f"namesrvAddr={namesrv_addr}"] if namesrv_addr is not None else []
    extra.extend(overrides)
    override_items = parse_overrides(extra)
    items = file_items + override_items
    keys = {item.key for item in items}
    # BrokerStartup derives the HA port from the listen port unless it is set explicitly.
    if not keys & {"haListenPort", "ha_listen_port"}:
        port = next((i.value for i in reversed(items) if i.key in ("listenPort", "listen_port")), None)
        if port is not None and port.strip().isdigit() and int(port) > 0:
            extra.append(f"haListenPort={int(port) + 1}")
    settings, store = load_configs(
        [BrokerSettings, MessageStoreConfig], conf_path, extra, known_foreign_keys=FOREIGN_KEYS
    )
    assert isinstance(settings, BrokerSettings) and isinstance(store, MessageStoreConfig)
    return _combine(settings, store)
