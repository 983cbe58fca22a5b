"""Message properties as the send path stores them (pure string work on ``k\x01v\x02...``).

* :func:`stored_properties`: the request's properties minus ``WAIT``, plus ``CLUSTER`` (what a
  Java broker stores), and whether the sender waits for the flush;
* :func:`join_batch_properties`: a batch item's properties with the header's appended
  (``MessageExtBatchEncoder``: one separator between them);
* :func:`apply_delay_level`: the ``SCHEDULE_TOPIC_XXXX`` rewrite of a ``DELAY`` message;
* :func:`java_reput_properties`: the properties a Java 4.9 schedule service re-puts a due
  message with (its record's properties parsed into a ``HashMap`` and written back).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from operator import itemgetter
from typing import Any

from pocketmq.remoting.protocol.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageConst,
    get_property,
    java_string_hash,
)
from pocketmq.remoting.protocol.route import RMQ_SYS_SCHEDULE_TOPIC
from pocketmq.store import MessageInner

__all__ = [
    "CLUSTER_KEY",
    "DELAY_KEY",
    "TRAN_KEY",
    "WAIT_KEY",
    "apply_delay_level",
    "delay_level_of",
    "has_delay",
    "java_order",
    "java_properties_string",
    "java_reput_properties",
    "join_batch_properties",
    "stored_properties",
    "strip_property",
]

WAIT_KEY = MessageConst.WAIT + NAME_VALUE_SEPARATOR
TRAN_KEY = MessageConst.TRAN_MSG + NAME_VALUE_SEPARATOR
DELAY_KEY = MessageConst.DELAY + NAME_VALUE_SEPARATOR
CLUSTER_KEY = MessageConst.CLUSTER + NAME_VALUE_SEPARATOR
REAL_TOPIC_KEY = MessageConst.REAL_TOPIC + NAME_VALUE_SEPARATOR
REAL_QID_KEY = MessageConst.REAL_QID + NAME_VALUE_SEPARATOR
_WAIT_KEY_LEN = len(WAIT_KEY)


def strip_property(props: str, key: str) -> tuple[str, str | None]:
    """``props`` without the ``key`` entry (and its separator), and that entry's value."""
    needle = key + NAME_VALUE_SEPARATOR
    if props.startswith(needle):
        start = 0
    else:
        i = props.find(PROPERTY_SEPARATOR + needle)
        if i < 0:
            return props, None
        start = i + 1
    end = props.find(PROPERTY_SEPARATOR, start)
    value = props[start + len(needle) : end if end >= 0 else len(props)]
    if end < 0:
        rest = props[: max(0, start - 1)]
    else:
        rest = props[:start] + props[end + 1 :]
    return rest, value


def stored_properties(props: str | None, cluster: str) -> tuple[str, bool]:
    """What a Java broker stores: the request's properties minus WAIT, plus CLUSTER.

    Returns ``(properties, wait_store_msg_ok)``.
    """
    props = props or ""
    wait = True
    if WAIT_KEY in props:  # (`in` first: cheaper than find() for the many sends without WAIT)
        i = props.find(WAIT_KEY)
        if i == 0 or props[i - 1] == PROPERTY_SEPARATOR:
            # the entry itself (the common case, inlined): cut it and its separator
            end = props.find(PROPERTY_SEPARATOR, i)
            if end < 0:
                value = props[i + _WAIT_KEY_LEN :]
                props = props[: max(0, i - 1)]
            else:
                value = props[i + _WAIT_KEY_LEN : end]
                props = props[:i] + props[end + 1 :]
            wait = value == "true" or value.lower() == "true"
        else:  # "WAIT\x01" inside another key (e.g. "XWAIT"): the general search
            props, found = strip_property(props, MessageConst.WAIT)
            if found is not None:
                wait = found.lower() == "true"
    if CLUSTER_KEY in props:
        props, _ = strip_property(props, MessageConst.CLUSTER)
    props = props.rstrip(PROPERTY_SEPARATOR)
    if props:
        return f"{props}{PROPERTY_SEPARATOR}{CLUSTER_KEY}{cluster}", wait
    return f"{CLUSTER_KEY}{cluster}", wait


def delay_level_of(props: str) -> int:
    """The ``DELAY`` property as Java's ``Integer.parseInt`` reads it (0 when absent).

    Raises:
        ValueError: the value is not an integer (Java answers SYSTEM_ERROR).
    """
    raw = get_property(props, MessageConst.DELAY)
    if raw is None:
        return 0
    digits = raw[1:] if raw[:1] in ("+", "-") else raw
    if not (digits.isascii() and digits.isdigit()) or not -(2**31) <= int(raw) < 2**31:
        raise ValueError(f"bad DELAY property {raw!r}: not an integer")
    return int(raw)


def apply_delay_level(inner: MessageInner, max_level: int, wait: str | None = None) -> None:
    """A normal message with ``DELAY`` > 0 goes to ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1``.

    ``REAL_TOPIC`` / ``REAL_QID`` keep where it belongs (replacing any the message carried); a
    level above ``max_level`` is clamped (Java ``CommitLog.putMessage``); a level <= 0 means no
    delay. Only applied when a schedule service delivers them. ``wait``: the sender's raw ``WAIT``
    value (None: it sent none), kept in the record before ``REAL_TOPIC`` as Java keeps it.

    Raises:
        ValueError: ``DELAY`` is not an integer.
    """
    if inner.sys_flag & TRANSACTION_ROLLBACK_TYPE not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        return
    props = inner.properties_string()
    level = delay_level_of(props)
    if level <= 0 or max_level <= 0:
        return
    if level > max_level:
        props, _ = strip_property(props, MessageConst.DELAY)
        props = join_batch_properties(props, f"{DELAY_KEY}{max_level}")
        level = max_level
    for key in (REAL_TOPIC_KEY, REAL_QID_KEY):
        if key in props:
            props, _ = strip_property(props, key[:-1])
    real = f"{MessageConst.REAL_TOPIC}{NAME_VALUE_SEPARATOR}{inner.topic}{PROPERTY_SEPARATOR}"
    if wait is not None:
        # Java's send path takes WAIT out of its map to encode the stored string, then puts it
        # back (after CLUSTER) for the CommitLog, whose delay rewrite encodes the map again: the
        # schedule record, and so the re-put, carries the sender's WAIT
        real = f"{WAIT_KEY}{wait}{PROPERTY_SEPARATOR}{real}"
    real += f"{MessageConst.REAL_QID}{NAME_VALUE_SEPARATOR}{inner.queue_id}"
    inner.properties = join_batch_properties(props, real)
    inner.topic = RMQ_SYS_SCHEDULE_TOPIC
    inner.queue_id = level - 1


def join_batch_properties(item: str, batch: str) -> str:
    """A batch item's properties with the header's appended (Java ``MessageExtBatchEncoder``)."""
    if not batch:
        return item
    if item and not item.endswith(PROPERTY_SEPARATOR):
        return item + PROPERTY_SEPARATOR + batch
    return item + batch


def has_delay(props: str) -> bool:
    value = get_property(props, MessageConst.DELAY)
    return value is not None and value.strip() not in ("", "0")


_KEY_BUCKET_HASH: dict[str, int] = {}
_BUCKET = itemgetter(0)
_EMPTY_VALUE = NAME_VALUE_SEPARATOR + PROPERTY_SEPARATOR
#: entry names in record order -> a getter of the entries in Java's order (None: no fast path)
#: the last shape reordered: its entries' prefixes (``name\x01``) and getter (records of a
#: level mostly share one shape: checking it is cheaper than the names tuple and the lookup)
_LAST_SHAPE: list[Any] = [(), None]
_STARTS = str.startswith
_ORDER: dict[tuple[str, ...], Callable[[list[str]], Any] | None] = {}


def new_shape_cache() -> list[Any]:
    """A last-shape slot for ``java_reput_properties``: a caller whose records have a shape of
    their own (the transaction half and commit paths) keeps its own, so interleaved callers do
    not evict each other's shape every call."""
    return [(), None]


def java_reput_properties(props: str, last_shape: list[Any] = _LAST_SHAPE) -> str:
    """The properties string Apache RocketMQ 4.9's ``ScheduleMessageService.messageTimeup`` stores.

    Java reads the schedule record back (``MessageDecoder.string2messageProperties``: a
    ``new HashMap()``, 16 buckets doubling past 0.75 full; an entry needs a non-empty name before
    its first ``\x01`` and a non-empty value; a repeated name keeps its first place and takes the
    last value) and writes the re-put's string with ``messageProperties2String`` from that map:
    ``name\x01value`` entries joined by ``\x02`` (no trailing one) in the map's iteration order
    (bucket ``(h ^ h >>> 16) & (capacity - 1)`` of the name's ``String.hashCode``, insertion order
    within a bucket), so ``DELAY``, ``REAL_TOPIC``, ``REAL_QID`` and the sender's ``WAIT`` stay in
    the stored string (only the in-memory map loses ``DELAY`` and gains ``WAIT=false``). Checked
    byte for byte against strings Apache 4.9.7 stored (tests/broker/test_java_property_order.py). Each name appears once in the
    result, with the value Java's map holds. (A bucket Java turned into a tree -- 8+ names in
    one bucket of a 64+ table -- is not modelled.)

    Per re-put: records of one shape (the same names in the same order, no odd entry) reuse a
    cached reordering, so the common case is two splits and a join.
    """
    items = props.split(PROPERTY_SEPARATOR)
    if not items[-1]:
        items.pop()  # a trailing separator (a record Java wrote), or no properties at all
    if not items:
        return ""  # (before the shape cache: its initial empty shape has no getter)
    if _EMPTY_VALUE not in props and props[-1:] != NAME_VALUE_SEPARATOR:
        prefixes, getter = last_shape
        if len(items) == len(prefixes) and all(map(_STARTS, items, prefixes)):
            return PROPERTY_SEPARATOR.join(getter(items))  # same as the last
        try:
            names = tuple([item[: item.index(NAME_VALUE_SEPARATOR)] for item in items])
        except ValueError:  # an entry without a name/value separator: Java drops it
            names = None
        if names is not None:
            try:
                getter = _ORDER[names]
            except KeyError:
                getter = _order_of(names)
            if getter is not None:
                last_shape[:] = (tuple([name + NAME_VALUE_SEPARATOR for name in names]), getter)
                return PROPERTY_SEPARATOR.join(getter(items))
    return java_properties_string(_java_map(props))


def java_half_properties(stored: str, wait: str | None, topic: str, queue_id: int) -> str:
    """A transactional half message's properties as Apache RocketMQ 4.9 stores them.

    ``stored``: the send's stored properties (the sender's, ``WAIT`` removed, ``CLUSTER`` put);
    ``wait``: the sender's raw ``WAIT`` (None: it sent none). Java's send path takes ``WAIT`` out
    of the map only to encode the plain record, then puts it back (at the end of the insertion
    order); the half path then puts ``REAL_TOPIC`` / ``REAL_QID`` and re-encodes the whole map in
    ``HashMap`` order (checked against Apache 4.9.7 by the differential's ``tx_commit`` cases).
    """
    entries = _java_map(stored)
    if wait is not None:
        entries[MessageConst.WAIT] = wait
    entries[MessageConst.REAL_TOPIC] = topic
    entries[MessageConst.REAL_QID] = str(queue_id)
    return java_properties_string(entries)


def _order_of(names: tuple[str, ...]) -> Callable[[list[str]], Any] | None:
    """Cache the getter putting entries named ``names`` in Java's order (None if not usable)."""
    getter: Callable[[list[str]], Any] | None = None
    if len(names) >= 2 and "" not in names and len(set(names)) == len(names):
        order = [names.index(name) for name in java_order(names)]
        getter = itemgetter(*order)
    if len(_ORDER) > 1024:  # shapes repeat; keep hostile input bounded
        _ORDER.clear()
    _ORDER[names] = getter
    return getter


def _java_map(props: str) -> dict[str, str]:
    """Java ``string2messageProperties`` (insertion order = Python dict order)."""
    entries: dict[str, str] = {}
    index, end_all = 0, len(props)
    while index < end_all:
        end = props.find(PROPERTY_SEPARATOR, index)
        if end < 0:
            end = end_all
        if end - index >= 3:
            sep = props.find(NAME_VALUE_SEPARATOR, index)
            if index < sep < end - 1:
                entries[props[index:sep]] = props[sep + 1 : end]
        index = end + 1
    return entries


def java_order(names: Collection[str]) -> list[str]:
    """Distinct ``names`` put in this order into a ``new HashMap()``, in its iteration order.

    Java's table starts at 16 buckets and doubles once the size passes 0.75 of it (13 names: 32);
    iteration goes bucket by bucket, ``(h ^ h >>> 16) & (capacity - 1)`` of ``String.hashCode``,
    and within a bucket in insertion order (a resize splits a bucket keeping relative order).
    """
    capacity = 16
    while len(names) > capacity * 3 // 4:  # HashMap doubles past its 0.75 load factor
        capacity *= 2
    mask = capacity - 1
    cache = _KEY_BUCKET_HASH
    buckets: list[tuple[int, str]] = []
    for name in names:
        h = cache.get(name)
        if h is None:
            h = java_string_hash(name) & 0xFFFFFFFF
            h ^= h >> 16
            if len(cache) > 4096:  # names repeat; keep hostile input bounded
                cache.clear()
            cache[name] = h
        buckets.append((h & mask, name))
    buckets.sort(key=_BUCKET)  # stable: insertion order within a bucket
    return [name for _, name in buckets]


def java_properties_string(entries: dict[str, str]) -> str:
    """Java ``messageProperties2String`` over a ``HashMap`` holding ``entries`` (no trailing
    separator: 4.9.7 deletes the last one)."""
    return PROPERTY_SEPARATOR.join(
        f"{name}{NAME_VALUE_SEPARATOR}{entries[name]}" for name in java_order(entries)
    )
