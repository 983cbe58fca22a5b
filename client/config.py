"""Client configuration: one frozen pydantic model per client kind (docs/development.md).

Attribute names are snake_case; the camelCase aliases are RocketMQ's own ``ClientConfig`` /
``DefaultMQProducer`` / ``DefaultMQPushConsumer`` / ``DefaultLitePullConsumer`` field names, so a
Java-style properties map loads unchanged. Times are milliseconds and sizes bytes, as in Java;
defaults equal RocketMQ 4.9's.

The client id is ``ip@instance[@unit]`` (Java ``ClientConfig.buildMQClientId``). The default
instance name ``DEFAULT`` is replaced by ``<pid>#<random>`` so that every process (and every
separately configured client in it) gets its own id, as Java's ``changeInstanceNameToPID`` does.
"""

from __future__ import annotations

import os
import secrets
import socket
import ssl
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from pocketmq.remoting.protocol.bodies import ConsumeFromWhere, ConsumeType, MessageModel
from pocketmq.remoting.protocol.topics import DEFAULT_TOPIC

DEFAULT_INSTANCE_NAME = "DEFAULT"
__all__ = [
    "ClientConfig",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerConfig",
    "LitePullConsumerConfig",
    "MessageModel",
    "ProducerConfig",
    "PushConsumerConfig",
    "local_ip",
]


@lru_cache(maxsize=1)
def local_ip() -> str:
    """Best-effort local IPv4 address (no packet is sent); ``127.0.0.1`` when unknown."""
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
    return ip if ip and "." in ip else "127.0.0.1"


_PROCESS_INSTANCE = f"{os.getpid()}#{secrets.randbelow(1 << 40)}"


def first_bad_addr(addrs: Iterable[str]) -> str | None:
    """The first entry of ``addrs`` that is not ``host:port`` with a port in 1..65535, or None."""
    for addr in addrs:
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            return addr
    return None


class ClientConfig(BaseModel):
    """Settings shared by producers, consumers and the admin client."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True)

    namesrv_addr: str = Field(
        default_factory=lambda: os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
        description="name server addresses, 'host:port;host:port' (env NAMESRV_ADDR)",
    )
    client_ip: str = Field(default_factory=local_ip, description="address reported in the client id")
    instance_name: str = Field(default=DEFAULT_INSTANCE_NAME, description="DEFAULT means one per process")
    unit_name: str | None = None
    namespace: str | None = Field(
        default=None, description="RocketMQ namespace: topics and groups are used as '<namespace>%<name>'"
    )
    poll_name_server_interval: int = Field(default=30_000, gt=0, description="route refresh, ms")
    heartbeat_broker_interval: int = Field(default=30_000, gt=0, description="heartbeats, ms")
    persist_consumer_offset_interval: int = Field(default=5_000, gt=0, description="offset persist, ms")
    mq_client_api_timeout: int = Field(default=3_000, gt=0, description="admin/offset request timeout, ms")
    vip_channel_enabled: bool = Field(default=False, description="send to the broker's port-2")
    access_key: str | None = Field(default=None, description="ACL access key (plain_acl.yml)")
    secret_key: str | None = Field(default=None, description="ACL secret key", repr=False)
    security_token: str | None = Field(default=None, description="ACL security token (signed when set)")
    use_tls: bool = Field(default=False, alias="useTLS", description="TLS to name servers and brokers")
    tls_trust_cert_path: str | None = Field(
        default=None, description="PEM CAs the servers' certificates must chain to (default: system CAs)"
    )
    tls_verify_server: bool = Field(
        default=True,
        description="check the server certificate and host name (off: RocketMQ's default, unsafe)",
    )
    tls_cert_path: str | None = Field(default=None, description="client certificate (servers asking for one)")
    tls_key_path: str | None = Field(default=None, description="client private key (PEM, unencrypted)")
    freeze_gc_at_start: bool = Field(
        default=True,
        description="pocketmq: the process's first client start collects once, then moves every object "
        "alive (modules, settings) out of the cyclic collector's reach (gc.freeze), so later full "
        "collections walk only what traffic allocated",
    )

    @field_validator("namesrv_addr")
    @classmethod
    def _check_namesrv(cls, value: str) -> str:
        addrs = [a.strip() for a in value.split(";") if a.strip()]
        if not addrs:
            raise ValueError("namesrvAddr is empty")
        bad = first_bad_addr(addrs)
        if bad is not None:
            raise ValueError(f"namesrvAddr entry {bad!r} is not host:port")
        return ";".join(addrs)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of ``useTLS`` (None: plaintext).

        Raises:
            TlsConfigError: a certificate file cannot be read.
        """
        if not self.use_tls:
            return None
        from pocketmq.remoting.transport.tls import client_ssl_context

        return client_ssl_context(
            trust=self.tls_trust_cert_path,
            cert=self.tls_cert_path,
            key=self.tls_key_path,
            verify=self.tls_verify_server,
        )

    @property
    def namesrv_list(self) -> list[str]:
        return self.namesrv_addr.split(";")

    @property
    def resolved_instance_name(self) -> str:
        return _PROCESS_INSTANCE if self.instance_name == DEFAULT_INSTANCE_NAME else self.instance_name

    @property
    def client_id(self) -> str:
        """``ip@instance[@unit]``: the identity brokers see in heartbeats and rebalances."""
        cid = f"{self.client_ip}@{self.resolved_instance_name}"
        return f"{cid}@{self.unit_name}" if self.unit_name else cid


C = TypeVar("C", bound=ClientConfig)


def resolve_config(
    cls: type[C], config: C | None, group_field: str, group: str, namesrv: str | None, options: dict[str, Any]
) -> C:
    """A client's configuration: ``config`` when given, else ``cls`` built from the keyword
    options, the group (``group_field``) and the name server list."""
    if config is not None:
        return config
    options[group_field] = group
    if namesrv is not None:
        options["namesrv_addr"] = namesrv
    return cls(**options)


class ProducerConfig(ClientConfig):
    producer_group: str = "DEFAULT_PRODUCER"
    create_topic_key: str = Field(default=DEFAULT_TOPIC, description="template topic for auto-creation")
    default_topic_queue_nums: int = Field(default=4, gt=0)
    send_msg_timeout: int = Field(default=3_000, gt=0, description="ms, whole send including retries")
    compress_msg_body_over_howmuch: int = Field(default=4096, ge=0, description="bytes")
    compress_level: int = Field(default=5, ge=1, le=9, description="zlib level (Java Deflater 5)")
    retry_times_when_send_failed: int = Field(default=2, ge=0)
    retry_times_when_send_async_failed: int = Field(default=2, ge=0)
    retry_another_broker_when_not_store_ok: bool = False
    max_message_size: int = Field(default=4 * 1024 * 1024, gt=0, description="bytes")
    send_latency_fault_enable: bool = Field(default=False, description="latency fault tolerance")
    max_in_flight: int = Field(
        default=65_535,
        gt=0,
        description="send_async sends in flight; more wait for a slot (clientAsyncSemaphoreValue)",
    )
    enable_msg_trace: bool = Field(default=False, description="send trace records (client/trace.py)")
    customized_trace_topic: str | None = Field(default=None, description="default RMQ_SYS_TRACE_TOPIC")


class ConsumerConfig(ClientConfig):
    consumer_group: str = "DEFAULT_CONSUMER"
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: str | None = Field(default=None, description="yyyyMMddHHmmss; default 30 min ago")
    max_reconsume_times: int = Field(default=-1, ge=-1, description="-1 means 16")
    pull_batch_size: int = Field(default=32, gt=0, le=1024)
    pull_threshold_for_queue: int = Field(default=1000, gt=0, description="cached messages per queue")
    pull_threshold_size_for_queue: int = Field(default=100, gt=0, description="cached MiB per queue")
    pull_interval: int = Field(default=0, ge=0, description="ms between pulls of one queue")
    post_subscription_when_pull: bool = False
    broker_suspend_max_time_millis: int = Field(default=15_000, gt=0)
    consumer_timeout_millis_when_suspend: int = Field(default=30_000, gt=0)
    local_offset_store_dir: str = Field(
        default_factory=lambda: os.path.join(os.path.expanduser("~"), ".rocketmq_offsets"),
        description="where broadcasting consumers keep offsets",
    )

    @field_validator("consumer_group")
    @classmethod
    def _check_group(cls, value: str) -> str:
        from pocketmq.client.validation import check_group

        check_group(value)
        return value

    @property
    def effective_max_reconsume_times(self) -> int:
        return 16 if self.max_reconsume_times == -1 else self.max_reconsume_times


class PushConsumerConfig(ConsumerConfig):
    consume_thread_max: int = Field(default=20, gt=0, description="listener calls in flight")
    consume_message_batch_max_size: int = Field(default=1, gt=0, le=1024)
    consume_concurrently_max_span: int = Field(default=2000, gt=0)
    consume_timeout: float = Field(
        default=15, gt=0, description="minutes; a listener call is cancelled after"
    )
    suspend_current_queue_time_millis: int = Field(default=1000, ge=10, le=30_000)
    rebalance_interval: int = Field(default=20_000, gt=0, description="ms")
    lock_interval: int = Field(default=20_000, gt=0, description="orderly: broker lock renewal, ms")
    enable_msg_trace: bool = Field(default=False, description="send trace records (client/trace.py)")
    customized_trace_topic: str | None = Field(default=None, description="default RMQ_SYS_TRACE_TOPIC")
    await_termination_millis_when_shutdown: int = Field(
        default=0,
        ge=0,
        description="ms shutdown waits for running listeners to finish (their offsets commit); 0: cancel them",
    )


class LitePullConsumerConfig(ConsumerConfig):
    pull_batch_size: int = Field(
        default=32,
        gt=0,
        le=1024,
        description="RocketMQ: 10; 32 costs about a third less client CPU per message (client/README.md)",
    )
    auto_commit: bool = True
    auto_commit_interval_millis: int = Field(default=5_000, ge=1_000)
    poll_timeout_millis: int = Field(default=5_000, gt=0)
    pull_threshold_for_all: int = Field(default=10_000, gt=0, description="messages waiting in poll cache")
    consume_max_span: int = Field(default=2000, gt=0)
    broker_suspend_max_time_millis: int = Field(default=20_000, gt=0)
    topic_metadata_check_interval_millis: int = Field(default=30_000, gt=0)
    rebalance_interval: int = Field(default=20_000, gt=0)
