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
#: each value non-empty), the getter of the half's entries in Java's order (the sender's
#: entries, then CLUSTER, REAL_TOPIC, REAL_QID), the index of PGROUP, of
#: TRAN_PREPARED_QUEUE_OFFSET, of TRAN_MSG and of WAIT among the sender's entries (-1: absent)
Plan = tuple[re.Pattern[str], Callable[[tuple[str, ...]], Any], int, int, int, int]
#: what a send's half is stored with: (half properties, PGROUP, TRAN_PREPARED_QUEUE_OFFSET) and
#: the sender's TRAN_MSG and WAIT values (None: absent)
Planned = tuple[str, str | None, str | None, str | None, str | None]
#: sender's names -> plan (None: not a shape the plan describes)
_PLANS: dict[tuple[str, ...], Plan | None] = {}
#: the last shape's plan (one match checks a send has that shape and splits it: a third of the
#: time of a split and a prefix check per entry)
#: (at first: a pattern matching nothing)
_LAST: list[Plan] = [(re.compile("(?!)"), itemgetter(0), -1, -1, -1, -1)]


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
    _, getter, pgroup_at, prepared_at, tran_at, wait_at = plan
    key = (cluster, topic, queue_id)
    added = _ADDED_ENTRIES.get(key)
    if added is None:
        added = _added_entries(key)
    items = match.groups() + added
    return (
        PROPERTY_SEPARATOR.join(getter(items)),
        None if pgroup_at < 0 else items[pgroup_at][_PGROUP_CUT:],
        None if prepared_at < 0 else items[prepared_at].partition(NAME_VALUE_SEPARATOR)[2],
        None if tran_at < 0 else items[tran_at][_TRAN_CUT:],
        None if wait_at < 0 else items[wait_at][_WAIT_CUT:],
    )


#: (cluster, topic, queue id) -> the entries the half adds (CLUSTER, REAL_TOPIC, REAL_QID)
_ADDED_ENTRIES: dict[tuple[str, str, int], tuple[str, str, str]] = {}


def _added_entries(key: tuple[str, str, int]) -> tuple[str, str, str]:
    cluster, topic, queue_id = key
    if len(_ADDED_ENTRIES) > 4096:  # topics x queues of one broker; keep hostile input bounded
        _ADDED_ENTRIES.clear()
    added = _ADDED_ENTRIES[key] = (
        _CLUSTER_KEY + cluster,
        _REAL_TOPIC_KEY + topic,
        f"{_REAL_QID_KEY}{queue_id}",
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
            where = {every[i]: i for i in inserted}
            getter = itemgetter(*[where[name] for name in java_order([every[i] for i in inserted])])
            pgroup = MessageConst.PGROUP
            prepared = MessageConst.TRAN_PREPARED_QUEUE_OFFSET
            tran = MessageConst.TRAN_MSG
            pattern = re.compile(
                PROPERTY_SEPARATOR.join(
                    f"({re.escape(name + NAME_VALUE_SEPARATOR)}[^{PROPERTY_SEPARATOR}]+)" for name in names
                )
            )
            at = [names.index(name) if name in names else -1 for name in (pgroup, prepared, tran, wait)]
            plan = (pattern, getter, at[0], at[1], at[2], at[3])
        if len(_PLANS) > 1024:  # shapes repeat; keep hostile input bounded
            _PLANS.clear()
        _PLANS[names] = plan
    if plan is not None:
        _LAST[0] = plan
    return plan
