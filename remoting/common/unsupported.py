"""Settings that ask for a feature pocketmq has not built yet: refused, never accepted and ignored.

Project rule: no setting is accepted and ignored. A key pocketmq does not implement at all is an
unknown key (or, for a Java key with no meaning here, a warning); a key that *exists* but whose
value asks for a missing feature is refused by this table, at startup (``mqbroker``,
``mqnamesrv``, ``pocketmq up``, ``pocketmq cluster up``) and in UPDATE_BROKER_CONFIG /
UPDATE_NAMESRV_CONFIG, with one line naming the key, its source and the missing feature.

==========================  ==========================  ============================================
key                         refused values              missing feature
==========================  ==========================  ============================================
``brokerRole``              ``SYNC_MASTER``, ``SLAVE``  HA (master/slave replication)
``brokerId``                anything but ``0``          HA (a broker id > 0 is a slave)
``enableSlaveActingMaster`` true                        HA
``enableControllerMode``    true                        HA (5.x controller)
``tls.test.mode.enable``    true                        RocketMQ's throwaway self-signed certificates
``tls.server.keyPassword``, any value                   encrypted TLS private keys
``tls.client.keyPassword``
``tls.config.file``         any value                   a separate TLS properties file
``enableConsumeQueueExt``   true                        ConsumeQueue extension files (filter bitmaps)
``transientStorePoolEnable`` true                       off-heap write buffers (transient store pool)
``enableLmq``               true                        light message queues
``enableMultiDispatch``     true                        dispatch to several queues (LMQ)
``duplicationEnable``       true                        slave re-dispatch from the CommitLog start
``metricsExporterType``     ``OTLP_GRPC``, ``LOG``      push metrics exporters (``PROM`` is built)
==========================  ==========================  ============================================

A row applies only where its key is a setting of the component being configured (``brokerId``
on the broker, not the name server); the ``tls.*`` rows apply to both. When a feature lands,
delete its row (and its test) here: nothing else refuses these values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic.alias_generators import to_snake

__all__ = ["REFUSALS", "Refusal", "is_off_family_key", "refusal_message"]

_TRUE = frozenset({"true", "1", "yes", "on", "t", "y"})


def _is_true(value: str) -> bool:
    return value.strip().lower() in _TRUE


def _not_zero(value: str) -> bool:
    v = value.strip()
    return v.isdigit() and int(v) != 0


def _ha_role(value: str) -> bool:
    return value.strip() in ("SYNC_MASTER", "SLAVE")


def _set(value: str) -> bool:
    return bool(value.strip())


def _push_exporter(value: str) -> bool:
    return value.strip().upper() in ("OTLP_GRPC", "LOG")


@dataclass(frozen=True, slots=True)
class Refusal:
    """One row: ``key`` (camelCase; a trailing ``*`` matches a prefix), which values are refused
    (``refuses``, given the raw string), how they read in the table, and the missing feature."""

    key: str
    refused: str
    feature: str
    refuses: Callable[[str], bool]

    def matches(self, key: str) -> bool:
        if self.key.endswith("*"):
            return key.startswith(self.key[:-1])
        return key in (self.key, to_snake(self.key))


#: The one table of refused settings (see the module docstring).
REFUSALS: tuple[Refusal, ...] = (
    Refusal("brokerRole", "SYNC_MASTER or SLAVE", "master/slave replication (HA)", _ha_role),
    Refusal("brokerId", "other than 0 (a slave)", "master/slave replication (HA)", _not_zero),
    Refusal("enableSlaveActingMaster", "true", "master/slave replication (HA)", _is_true),
    Refusal("enableControllerMode", "true", "master/slave replication (HA controller)", _is_true),
    Refusal(
        "tls.test.mode.enable",
        "true",
        "self-signed test certificates (make a pair: pocketmq tls-cert)",
        _is_true,
    ),
    Refusal(
        "tls.server.keyPassword", "any value", "encrypted TLS private keys (use an unencrypted PEM)", _set
    ),
    Refusal(
        "tls.client.keyPassword", "any value", "encrypted TLS private keys (use an unencrypted PEM)", _set
    ),
    Refusal("tls.config.file", "any value", "a separate TLS file (put the tls.* keys in the .conf)", _set),
    # store keys Java brokers accept that turn on a feature pocketmq lacks (the store's other
    # "accepted for broker.conf compatibility" keys are tuning knobs of Java's own machinery)
    Refusal("enableConsumeQueueExt", "true", "ConsumeQueue extension files (filter bitmaps)", _is_true),
    Refusal(
        "transientStorePoolEnable", "true", "the transient store pool (off-heap write buffers)", _is_true
    ),
    Refusal("enableLmq", "true", "light message queues (LMQ)", _is_true),
    Refusal("enableMultiDispatch", "true", "multi-queue dispatch (LMQ)", _is_true),
    Refusal("duplicationEnable", "true", "slave re-dispatch (HA)", _is_true),
    # metrics: PROM (the /metrics endpoint) is built; the push exporters are not
    Refusal("metricsExporterType", "OTLP_GRPC or LOG", "OTLP and log metrics exporters", _push_exporter),
)


def refusal_message(key: str, value: str, source: str, *, applies: Callable[[Refusal], bool]) -> str | None:
    """The one-line refusal of ``key=value`` (None: not refused). ``applies`` says whether a row
    is meaningful for the component being configured (its key is one of its settings)."""
    for row in REFUSALS:
        if row.matches(key) and row.refuses(value) and applies(row):
            return (
                f"{source}: {key}={value.strip()} is not supported yet: {row.feature} is not built; "
                "remove the key or leave it at its default"
            )
    return None


def is_off_family_key(key: str) -> bool:
    """A key of a prefix row (``tls.*``, RocketMQ's TlsSystemConfig): never a field of a config
    model, so once :func:`refusal_message` let it through (an "off" value, the default) there is
    nothing to set."""
    return any(row.key.endswith("*") and row.matches(key) for row in REFUSALS)
