"""Pull-side message filters (pure): tag-hash matching over ConsumeQueue units, SQL92 matching
over the stored record's properties.

TAG (``ExpressionMessageFilter.isMatchedByConsumeQueue``, reference §5.3): a unit matches when
there is no subscription, the subscription is class-filter mode or ``*``, or its tagsCode is in
the subscription's code set. Code sets are always recomputed server-side from the tags
(:meth:`SubscriptionData.build`, the protocol's one builder): C++ sends garbage codes. Hash
collisions are possible; clients re-filter by exact tag string.

SQL92 (``ExpressionMessageFilter.isMatchedByCommitLog``): every unit passes the queue-level check
(there is no bloom-filter bitmap: pocketmq has no ConsumeQueue extension); the properties the
expression reads are picked out of the record's PROPERTIES bytes (the others are never decoded:
the same values RocketMQ's full decode gives, checked in the tests) and the compiled expression
(:mod:`pocketmq.remoting.protocol.filter`) evaluated; only TRUE matches (NULL, FALSE and an
evaluation RocketMQ aborts with an exception do not).

``filterSupportRetry`` (``ExpressionForRetryMessageFilter``): a message of ``%RETRY%<group>`` is
evaluated against the group's SQL92 subscription of its original topic (its ``RETRY_TOPIC``
property); one whose original topic has no SQL92 subscription in the group is delivered.

:class:`SqlFilterCache` keeps compiled expressions by (group, topic, expression) (RocketMQ's
``ConsumerFilterManager`` keeps one per (topic, group)), compile errors included, bounded.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable

from pocketmq.remoting.protocol.bodies import ExpressionType, SubscriptionData
from pocketmq.remoting.protocol.filter import EvalError, SqlExpression, SqlFilterError, compile_sql
from pocketmq.remoting.protocol.message import (
    HOST_FLAGS_MASK,
    RECORD_PREFIX_STRUCTS,
    MessageConst,
    string_to_properties,
)

__all__ = [
    "RetrySqlMessageFilter",
    "SqlFilterCache",
    "SqlMessageFilter",
    "TagMessageFilter",
    "properties_span",
    "record_properties",
]

logger = logging.getLogger(__name__)

_SQL92 = ExpressionType.SQL92.value
# SYSFLAG follows TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG (int32) and QUEUEOFFSET,
# PHYSICALOFFSET (int64) in every host family; the prefix size (BODYLENGTH is its last int32)
# depends on the family bits of SYSFLAG.
_SYSFLAG_AT = struct.calcsize(">iiiiiqq")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_PREFIX_SIZE = {flags: s.size for flags, s in RECORD_PREFIX_STRUCTS.items()}
_RETRY_TOPIC = MessageConst.RETRY_TOPIC


class TagMessageFilter:
    """Implements the store's ``MessageFilter`` protocol for TAG subscriptions."""

    __slots__ = ("codes", "subscription")

    def __init__(self, subscription: SubscriptionData | None) -> None:
        self.subscription = subscription
        if subscription is None or subscription.class_filter_mode or subscription.is_all:
            self.codes: frozenset[int] | None = None
        elif subscription.expression_type != ExpressionType.TAG.value:
            self.codes = None
        else:
            self.codes = frozenset(subscription.code_set)

    @property
    def accepts_all(self) -> bool:
        return self.codes is None

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        codes = self.codes
        if codes is None:
            return True
        # The ConsumeQueue stores the int32 hash sign-extended to int64; codes are int32.
        return tags_code in codes

    def is_matched_by_commit_log(self, buf: bytes) -> bool:
        return True


def properties_span(buf: bytes) -> tuple[int, int]:
    """Where the PROPERTIES field of one stored CommitLog record is (layout:
    ``remoting.protocol.message``): after the prefix (its size from SYSFLAG's host bits), BODY,
    TOPICLEN 1, TOPIC and PROPERTIESLENGTH 2. Raises IndexError / KeyError / struct.error on a
    cut record."""
    prefix = _PREFIX_SIZE[_INT.unpack_from(buf, _SYSFLAG_AT)[0] & HOST_FLAGS_MASK]
    at = prefix + _INT.unpack_from(buf, prefix - 4)[0]
    at += 1 + buf[at]
    start = at + 2
    end = start + _SHORT.unpack_from(buf, at)[0]
    if end > len(buf):
        raise IndexError("properties beyond the record")
    return start, end


def record_properties(buf: bytes) -> dict[str, str]:
    """Every property of one stored record, as RocketMQ's ``MessageDecoder.decodeProperties``."""
    start, end = properties_span(buf)
    text = buf[start:end].decode("utf-8", "replace")
    try:
        # the usual case: every entry is name\x01value (Java writes no trailing separator)
        return dict(item.split("\x01", 1) for item in text.split("\x02"))
    except ValueError:
        return string_to_properties(text)


class _Picker:
    """The properties an expression reads, picked out of a record's PROPERTIES bytes without
    decoding the others: ``name\x01value`` entries split by ``\x02``, the last entry of a name
    wins (as when RocketMQ decodes them into a map)."""

    __slots__ = ("needles",)

    def __init__(self, names: frozenset[str]) -> None:
        # (name, b"\x02name\x01", b"name\x01"): an entry in the middle, or the first entry
        self.needles = tuple((n, b"\x02" + n.encode() + b"\x01", n.encode() + b"\x01") for n in sorted(names))

    def __call__(self, buf: bytes) -> dict[str, str]:
        start, end = properties_span(buf)
        out: dict[str, str] = {}
        for name, inner, first in self.needles:
            i = buf.rfind(inner, start, end)
            if i >= 0:
                i += len(inner)
            elif buf.startswith(first, start, end):
                i = start + len(first)
            else:
                continue
            j = buf.find(b"\x02", i, end)
            out[name] = buf[i : end if j < 0 else j].decode("utf-8", "replace")
        return out


class SqlMessageFilter:
    """The store's ``MessageFilter`` for one SQL92 subscription (module docstring)."""

    __slots__ = ("evaluate", "expression", "pick")

    accepts_all = False

    def __init__(self, expression: SqlExpression) -> None:
        self.expression = expression
        self.evaluate = expression.evaluate
        self.pick = _Picker(expression.names)

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return True

    def is_matched_by_commit_log(self, buf: bytes) -> bool:
        try:
            return self.evaluate(self.pick(buf)) is True
        except EvalError:
            return False
        except (IndexError, KeyError, struct.error):
            logger.warning("SQL92 filter: unreadable record skipped (%d bytes)", len(buf))
            return False


class RetrySqlMessageFilter:
    """``filterSupportRetry`` for a ``%RETRY%<group>`` pull: ``lookup(original topic)`` gives the
    group's compiled SQL92 subscription of that topic, or None (then the message matches)."""

    __slots__ = ("lookup",)

    accepts_all = False

    def __init__(self, lookup: Callable[[str], SqlExpression | None]) -> None:
        self.lookup = lookup

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return True

    def is_matched_by_commit_log(self, buf: bytes) -> bool:
        try:
            props = record_properties(buf)
        except (IndexError, KeyError, struct.error):
            return True  # like a message without RETRY_TOPIC: nothing to filter on
        real_topic = props.get(_RETRY_TOPIC)
        expression = self.lookup(real_topic) if real_topic else None
        if expression is None:
            return True
        try:
            return expression.evaluate(props) is True
        except EvalError:
            return False


class SqlFilterCache:
    """Compiled SQL92 subscriptions by (group, topic, expression), compile errors included;
    cleared when ``max_entries`` or ``max_chars`` of expression text is reached (keys come from
    clients; a compiled expression keeps ~40 bytes per character of its text)."""

    def __init__(self, max_entries: int = 4096, max_chars: int = 4 << 20) -> None:
        self.max_entries = max_entries
        self.max_chars = max_chars
        self._table: dict[tuple[str, str, str], SqlMessageFilter | SqlFilterError] = {}
        self._chars = 0

    def __len__(self) -> int:
        return len(self._table)

    def get(self, group: str, topic: str, expression: str) -> SqlMessageFilter:
        """The filter of ``expression``; raises SqlFilterError (cached too) when it is invalid."""
        key = (group, topic, expression)
        found = self._table.get(key)
        if found is None:
            try:
                found = SqlMessageFilter(compile_sql(expression))
            except SqlFilterError as exc:
                found = exc
            if len(self._table) >= self.max_entries or self._chars + len(expression) > self.max_chars:
                self._table.clear()
                self._chars = 0
            self._table[key] = found
            self._chars += len(expression)
        if isinstance(found, SqlFilterError):
            raise found
        return found

    def get_subscription(self, group: str, sub: SubscriptionData | None) -> SqlExpression | None:
        """The compiled expression of ``sub`` when it is a valid SQL92 subscription, else None."""
        if sub is None or sub.expression_type != _SQL92:
            return None
        try:
            return self.get(group, sub.topic, sub.sub_string).expression
        except SqlFilterError:
            return None
