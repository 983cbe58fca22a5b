"""``NamesrvConfig``: the name server's settings, loaded from ``namesrv.conf`` with RocketMQ's keys.

RocketMQ applies one properties file to ``NamesrvConfig`` and ``NettyServerConfig``; both sets of
keys live in this one model. Keys of either class that pocketmq does not implement (thread pools,
Netty allocator switches, 5.x controller settings) are listed in :data:`KNOWN_UNSUPPORTED_KEYS`:
they load with a warning instead of failing, so a Java ``namesrv.conf`` starts unchanged.

Defaults are RocketMQ 4.9.8's, except the two liveness knobs 4.x hard-codes (scan every 10 s,
expire after 120 s), which are configurable here.
"""

from __future__ import annotations

import os

from pydantic import Field

from pocketmq.remoting.common.config import CONFIG_MODEL_CONFIG, load_config
from pocketmq.remoting.common.metrics_http import ExporterType, MetricsLabel
from pocketmq.remoting.transport.tls import TlsSettings

__all__ = ["KNOWN_UNSUPPORTED_KEYS", "NamesrvConfig", "load_namesrv_config"]


def _home_path(*parts: str) -> str:
    return os.path.join(os.path.expanduser("~"), *parts)


class NamesrvConfig(TlsSettings):
    model_config = CONFIG_MODEL_CONFIG

    # -- NamesrvConfig.java ------------------------------------------------------------------
    rocketmq_home: str = Field(
        "", description="ROCKETMQ_HOME (the entry point fills it from the environment when empty)"
    )
    kv_config_path: str = Field(
        default_factory=lambda: _home_path("namesrv", "kvConfig.json"), description="KV config file (JSON)"
    )
    config_store_path: str = Field(
        default_factory=lambda: _home_path("namesrv", "namesrv.properties"),
        description="where UPDATE_NAMESRV_CONFIG persists the effective config (properties)",
    )
    product_env_name: str = Field("center", description="environment label (informational)")
    cluster_test: bool = Field(False, description="route lookups also try the cluster's test topic (unused)")
    order_message_enable: bool = Field(
        False, description="add orderTopicConf (KV namespace ORDER_TOPIC_CONFIG) to route data"
    )
    return_order_topic_config_to_broker: bool = Field(
        True, description="REGISTER_BROKER replies carry the ORDER_TOPIC_CONFIG KV table"
    )
    config_black_list: str = Field(
        "configBlackList;configStorePath;kvConfigPath",
        description="';'-separated keys UPDATE_NAMESRV_CONFIG refuses (NO_PERMISSION)",
    )
    scan_not_active_broker_interval: int = Field(
        10_000, ge=100, description="ms between liveness scans (4.x: fixed 10 s; 5.x key, default 5 s)"
    )
    broker_channel_expired_time: int = Field(
        120_000,
        ge=1_000,
        description="ms without REGISTER_BROKER/QUERY_DATA_VERSION before a broker is dropped",
    )
    delete_topic_with_broker_registration: bool = Field(
        False, description="5.x: a master's registration removes its topics missing from the payload"
    )

    # -- NettyServerConfig.java --------------------------------------------------------------
    listen_port: int = Field(9876, ge=0, le=65535, description="TCP port (0 = ephemeral, for tests)")
    bind_address: str = Field("0.0.0.0", description="listen address (5.x key)")
    server_channel_max_idle_time_seconds: int = Field(
        120, ge=0, description="s without reads and writes before a connection is closed (0 = never)"
    )
    server_socket_snd_buf_size: int = Field(0, ge=0, description="SO_SNDBUF bytes (0 = OS default)")
    server_socket_rcv_buf_size: int = Field(0, ge=0, description="SO_RCVBUF bytes (0 = OS default)")
    server_socket_backlog: int = Field(1024, ge=1, description="listen backlog")
    write_buffer_high_water_mark: int = Field(0, ge=0, description="bytes; 0 = asyncio default")
    write_buffer_low_water_mark: int = Field(0, ge=0, description="bytes; 0 = asyncio default")

    # -- metrics (RocketMQ 5.x keys; remoting/common/metrics_http.py)
    metrics_exporter_type: ExporterType = Field(
        "DISABLE", description="PROM serves Prometheus /metrics; DISABLE = off"
    )
    metrics_prom_exporter_port: int = Field(5557, ge=0, le=65535, description="exporter port (0 = ephemeral)")
    metrics_prom_exporter_host: str = Field("", description="exporter interface ('' = every interface)")
    metrics_label: MetricsLabel = Field("", description="'name:value,...' labels added to every metric")

    @property
    def config_black_list_keys(self) -> frozenset[str]:
        """The black-listed keys, split and stripped."""
        return frozenset(k.strip() for k in self.config_black_list.split(";") if k.strip())


#: Real NamesrvConfig/NettyServerConfig keys (4.9.x and 5.x) accepted with a warning.
KNOWN_UNSUPPORTED_KEYS = frozenset(
    {
        # NettyServerConfig: Netty/thread-pool knobs with no asyncio meaning
        "serverWorkerThreads",
        "serverCallbackExecutorThreads",
        "serverSelectorThreads",
        "serverOnewaySemaphoreValue",
        "serverAsyncSemaphoreValue",
        "serverPooledByteBufAllocatorEnable",
        "useEpollNativeSelector",
        "serverNettyWorkerGroupEnable",
        "enableShutdownGracefully",
        "shutdownWaitTimeSeconds",
        # NamesrvConfig 5.x: request pools and controller features
        "clientRequestThreadPoolNums",
        "defaultThreadPoolNums",
        "clientRequestThreadPoolQueueCapacity",
        "defaultThreadPoolQueueCapacity",
        "unRegisterBrokerQueueCapacity",
        "supportActingMaster",
        "enableAllTopicList",
        "enableTopicList",
        "notifyMinBrokerIdChanged",
        "notifyMinBrokerIdChangeTimeoutMillis",
        "enableControllerInNamesrv",
        "needWaitForService",
        "waitSecondsForService",
    }
)


def load_namesrv_config(
    conf_path: str | None = None, overrides: list[str] | tuple[str, ...] = ()
) -> NamesrvConfig:
    """Defaults → ``conf_path`` → ``key=value`` overrides.

    Raises:
        pocketmq.remoting.common.config.ConfigError: unknown key (with a suggestion) or bad value.
    """
    return load_config(NamesrvConfig, conf_path, overrides, known_foreign_keys=KNOWN_UNSUPPORTED_KEYS)
