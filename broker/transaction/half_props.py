"""A half message's properties straight from the sender's, in one pass (the prepare's hot path).

What Apache RocketMQ 4.9 stores for a half (``java_half_properties``): the sender's properties
minus ``WAIT`` plus ``CLUSTER`` (the send path's stored string), read into a ``HashMap``, then
``WAIT`` (the sender's raw value), ``REAL_TOPIC`` and ``REAL_QID`` put, and the map written back
in its iteration order. For sends of one shape (the same names in the same order: one producer's
messages) that order is a fixed permutation of the sender's entries and the three added ones, so
per prepare this is one match of the cached shape's pattern (which splits it) and one join; the
``PGROUP`` and ``TRAN_PREPARED_QUEUE_OFFSET`` values END_TRANSACTION and the recent table need
come from the same split (their places are part of the shape), and so do the ``TRAN_MSG`` and
``WAIT`` values the send processor's half branch checks (``send.SendMessageProcessor._send_half``).

Anything the permutation does not describe -- an entry Java drops (empty name or value, no
separator: the pattern does not match), a repeated name, a trailing separator, ``CLUSTER`` / ``REAL_TOPIC`` / ``REAL_QID``
sent by the producer -- returns None: the caller takes the general path (``half_properties``),
which is checked against the map path for every input (tests/broker/transaction).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from pocketmq.broker.processor.message_props import java_order
from pocketmq.remoting.protocol.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst

__all__ = ["Planned", "sent_half_properties"]

_CLUSTER_KEY = MessageConst.CLUSTER + NAME_VALUE_SEPARATOR
_REAL_TOPIC_KEY = MessageConst.REAL_TOPIC + NAME_VALUE_SEPARATOR
_REAL_QID_KEY = MessageConst.REAL_QID + NAME_VALUE_SEPARATOR
#: names the send path or the half path put themselves: a sender's own one changes the order
_ADDED = frozenset((MessageConst.CLUSTER, MessageConst.REAL_TOPIC, MessageConst.REAL_QID))
_PGROUP_CUT = len(MessageConst.PGROUP) + 1
_TRAN_CUT = len(MessageConst.TRAN_MSG) + 1
_WAIT_CUT = len(MessageConst.WAIT) + 1

#: a shape's plan: the pattern its properties fully match (each entry a group: the names in order,
#: each value non-empty; the values of PGROUP, TRAN_PREPARED_QUEUE_OFFSET, TRAN_MSG and WAIT a
#: group of their own too, right after their entry's), the getter of the half's entries in
#: Java's order (the sender's entries, then CLUSTER, REAL_TOPIC, REAL_QID) and the getter of
#: those four values (a name the sender did not send: the None after the added entries)
Plan = tuple[re.Pattern[str], Callable[[tuple[str, ...]], Any], Callable[[tuple[str | None, ...]], Any]]
#: what a send's half is stored with: (half properties, PGROUP, TRAN_PREPARED_QUEUE_OFFSET) and
#: the sender's TRAN_MSG and WAIT values (None: absent)
Planned = tuple[str, str | None, str | None, str | None, str | None]
#: sender's names -> plan (None: not a shape the plan describes)
_PLANS: dict[tuple[str, ...], Plan | None] = {}
#: the last shape's plan (one match checks a send has that shape and splits it: a third of the
#: time of a split and a prefix check per entry)
#: (at first: a pattern matching nothing)
_LAST: list[Plan] = [(re.compile("(?!)"), itemgetter(0), itemgetter(0))]


def sent_half_properties(sent: str, cluster: str, topic: str, queue_id: int) -> Planned | None:
    """``(half properties, PGROUP, TRAN_PREPARED_QUEUE_OFFSET, TRAN_MSG, WAIT)`` of a send whose
    request carried the properties ``sent``, stored by a broker of ``cluster`` for ``topic`` /
    ``queue_id`` (the same string ``java_half_properties`` builds; the last two: the sender's
    values); None: the general path (module docstring)."""
    plan = _LAST[0]
    match = plan[0].fullmatch(sent)
    if match is None:  # another shape (the pattern also refuses an empty value or entry)
        planned = _plan_of(sent.split(PROPERTY_SEPARATOR))
        match = None if planned is None else planned[0].fullmatch(sent)
        if planned is None or match is None:
            return None
        plan = planned
    _, getter, values = plan
    key = (cluster, topic, queue_id)
    added = _ADDED_ENTRIES.get(key)
    if added is None:
        added = _added_entries(key)
    items = match.groups() + added
    # (the four values by one getter, unpacked: no test and slice per name)
    pgroup, prepared, tran, wait = values(items)
    return PROPERTY_SEPARATOR.join(getter(items)), pgroup, prepared, tran, wait


#: (cluster, topic, queue id) -> the entries the half adds (CLUSTER, REAL_TOPIC, REAL_QID), then
#: None (the value of a name a plan's values getter finds absent)
_ADDED_ENTRIES: dict[tuple[str, str, int], tuple[str, str, str, None]] = {}


def _added_entries(key: tuple[str, str, int]) -> tuple[str, str, str, None]:
    cluster, topic, queue_id = key
    if len(_ADDED_ENTRIES) > 4096:  # topics x queues of one broker; keep hostile input bounded
        _ADDED_ENTRIES.clear()
    added = _ADDED_ENTRIES[key] = (
        _CLUSTER_KEY + cluster,
        _REAL_TOPIC_KEY + topic,
        f"{_REAL_QID_KEY}{queue_id}",
        None,
    )
    return added


def _plan_of(items: list[str]) -> Plan | None:
    """The plan of the sender's entries ``items`` (cached by their names), made the last shape."""
    try:
        names = tuple([item[: item.index(NAME_VALUE_SEPARATOR)] for item in items])
    except ValueError:  # an entry without a name/value separator: Java drops it
        return None
    try:
        plan = _PLANS[names]
    except KeyError:
        plan = None
        if "" not in names and len(set(names)) == len(names) and not _ADDED.intersection(names):
            # Java's insertion order: the stored string (the sender's without WAIT, then
            # CLUSTER), then WAIT put back, REAL_TOPIC, REAL_QID
            n = len(names)
            wait = MessageConst.WAIT
            inserted = [i for i, name in enumerate(names) if name != wait] + [n]
            inserted += [names.index(wait)] if wait in names else []
            inserted += [n + 1, n + 2]
            every = (*names, MessageConst.CLUSTER, MessageConst.REAL_TOPIC, MessageConst.REAL_QID)
            # group numbers: each entry's, and right after it its value's for the four names
            special = (
                MessageConst.PGROUP,
                MessageConst.TRAN_PREPARED_QUEUE_OFFSET,
                MessageConst.TRAN_MSG,
                wait,
            )
            entry_at: list[int] = []
            value_at: dict[str, int] = {}
            for name in names:
                entry_at.append(len(entry_at) + len(value_at))
                if name in special:
                    value_at[name] = entry_at[-1] + 1
            groups = len(entry_at) + len(value_at)
            # the half's entries: the sender's groups, then the added ones (after the groups)
            where = {every[i]: (entry_at[i] if i < n else groups + i - n) for i in inserted}
            getter = itemgetter(*[where[name] for name in java_order([every[i] for i in inserted])])
            values = itemgetter(*[value_at.get(name, groups + 3) for name in special])
            pattern = re.compile(
                PROPERTY_SEPARATOR.join(
                    f"({re.escape(name + NAME_VALUE_SEPARATOR)}([^{PROPERTY_SEPARATOR}]+))"
                    if name in special
                    else f"({re.escape(name + NAME_VALUE_SEPARATOR)}[^{PROPERTY_SEPARATOR}]+)"
                    for name in names
                )
            )
            plan = (pattern, getter, values)
        if len(_PLANS) > 1024:  # shapes repeat; keep hostile input bounded
            _PLANS.clear()
        _PLANS[names] = plan
    if plan is not None:
        _LAST[0] = plan
    return plan
