"""A half message's properties straight from the sender's, in one pass (the prepare's hot path).

What Apache RocketMQ 4.9 stores for a half (``java_half_properties``): the sender's properties
minus ``WAIT`` plus ``CLUSTER`` (the send path's stored string), read into a ``HashMap``, then
``WAIT`` (the sender's raw value), ``REAL_TOPIC`` and ``REAL_QID`` put, and the map written back
in its iteration order. For sends of one shape (the same names in the same order: one producer's
messages) that order is a fixed permutation of the sender's entries and the three added ones, so
per prepare this is one call of the shape's plan, generated once: one match of its pattern
(which splits the values out) and one f-string of the half's entries; the ``PGROUP`` and
``TRAN_PREPARED_QUEUE_OFFSET`` values END_TRANSACTION and the recent table need come from the
same match (their places are part of the shape), and so do the ``TRAN_MSG`` and ``WAIT`` values
the send processor's half branch checks (``send.SendMessageProcessor.process``). A send that
differs from the shape's last matched one only in its ``UNIQ_KEY`` value (one producer's sends,
mostly) skips the match: the plan's repeat (``_compile``).

Anything the permutation does not describe -- an entry Java drops (empty name or value, no
separator: the pattern does not match), a repeated name, a trailing separator, ``CLUSTER`` / ``REAL_TOPIC`` / ``REAL_QID``
sent by the producer -- returns None: the caller takes the general path (``half_properties``),
which is checked against the map path for every input (tests/broker/transaction).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pocketmq.broker.processor.message_props import java_order
from pocketmq.remoting.protocol.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    QUEUE_ID_TEXT,
    MessageConst,
)

__all__ = ["LAST_PLAN", "Planned", "sent_half_properties"]

#: names the send path or the half path put themselves: a sender's own one changes the order
_ADDED = frozenset((MessageConst.CLUSTER, MessageConst.REAL_TOPIC, MessageConst.REAL_QID))

#: a shape's plan: ``sent_half_properties`` for sends of that shape (None: another shape)
Plan = Callable[[str, str, str, int], "Planned | None"]
#: what a send's half is stored with: (half properties, PGROUP, TRAN_PREPARED_QUEUE_OFFSET) and
#: the sender's TRAN_MSG and WAIT values (None: absent)
Planned = tuple[str, str | None, str | None, str | None, str | None]
#: sender's names -> plan (None: not a shape the plan describes)
_PLANS: dict[tuple[str, ...], Plan | None] = {}
#: sender's names seen once, not compiled yet (:func:`_plan_of`)
_SEEN: set[tuple[str, ...]] = set()


def _no_shape(sent: str, cluster: str, topic: str, queue_id: int) -> Planned | None:
    return None


#: the last shape's plan (at first: none); a caller may try it first (one call less per send)
#: and take ``sent_half_properties`` when it returns None
LAST_PLAN: list[Plan] = [_no_shape]
_LAST = LAST_PLAN


def sent_half_properties(sent: str, cluster: str, topic: str, queue_id: int) -> Planned | None:
    """``(half properties, PGROUP, TRAN_PREPARED_QUEUE_OFFSET, TRAN_MSG, WAIT)`` of a send whose
    request carried the properties ``sent``, stored by a broker of ``cluster`` for ``topic`` /
    ``queue_id`` (the same string ``java_half_properties`` builds; the last two: the sender's
    values); None: the general path (module docstring)."""
    planned = _LAST[0](sent, cluster, topic, queue_id)
    if planned is None:  # another shape (the pattern also refuses an empty value or entry)
        plan = _plan_of(sent.split(PROPERTY_SEPARATOR))
        if plan is None:
            return None
        planned = plan(sent, cluster, topic, queue_id)
    return planned


#: the names the plan returns the values of, in ``Planned``'s order
_VALUES = (
    MessageConst.PGROUP,
    MessageConst.TRAN_PREPARED_QUEUE_OFFSET,
    MessageConst.TRAN_MSG,
    MessageConst.WAIT,
)


def _plan_of(items: list[str]) -> Plan | None:
    """The plan of the sender's entries ``items`` (cached by their names), made the last shape."""
    try:
        names = tuple([item[: item.index(NAME_VALUE_SEPARATOR)] for item in items])
    except ValueError:  # an entry without a name/value separator: Java drops it
        return None
    try:
        plan = _PLANS[names]
    except KeyError:
        # a shape is compiled on its second send: a sender inventing a shape per message (each
        # compile is an exec and a regex, ~100x a send's properties work) takes the general path
        if names not in _SEEN:
            if len(_SEEN) > 1024:
                _SEEN.clear()
            _SEEN.add(names)
            return None
        plan = None
        if "" not in names and len(set(names)) == len(names) and not _ADDED.intersection(names):
            plan = _compile(names)
        if len(_PLANS) > 1024:  # shapes repeat; keep hostile input bounded
            _PLANS.clear()
        _PLANS[names] = plan
    if plan is not None:
        _LAST[0] = plan
    return plan


#: a plan fills its repeat (``_compile``) once this many sends in a row took its pattern
_REFILL_AFTER = 64


def _compile(names: tuple[str, ...]) -> Plan:
    """The plan of sends whose entries have ``names`` (distinct, none an added one): one match
    of a pattern (the names in order, each value a group, non-empty) and one f-string of the
    half's entries in Java's order, generated for the shape (per prepare: no list of entries,
    no getter, no join; ~3k instructions fewer; ``REAL_QID``'s text from ``QUEUE_ID_TEXT``). The
    generated source holds identifiers only: the names and separators reach it as the arguments
    of its factory.

    A shape with ``UNIQ_KEY`` also keeps a repeat: one producer's sends mostly differ in their
    ``UNIQ_KEY`` value alone (the SDK's halves: ``TRAN_MSG``, ``PGROUP``, maybe ``TAGS``, then
    ``UNIQ_KEY``), so the text around that value in a send the pattern matched (``head``,
    ``tail``) and the half's text between its changing values (``c0``, ``c1``...) are kept. A
    send that is ``head`` + a value (non-empty, no entry separator) + ``tail`` has the same
    entries but that value: its half is one short f-string (~3.5k instructions under the
    pattern's match, its groups and the long f-string). A send that is not clears the repeat
    (one test per send while cleared); it is filled again after ``_REFILL_AFTER`` sends of the
    pattern, so sends whose other values change too pay little for it."""
    # Java's insertion order: the stored string (the sender's without WAIT, then CLUSTER), then
    # WAIT put back, REAL_TOPIC, REAL_QID
    wait = MessageConst.WAIT
    inserted = [name for name in names if name != wait] + [MessageConst.CLUSTER]
    inserted += [wait] if wait in names else []
    inserted += [MessageConst.REAL_TOPIC, MessageConst.REAL_QID]
    variable = {name: f"v{i}" for i, name in enumerate(names)}
    variable |= {
        MessageConst.CLUSTER: "cluster",
        MessageConst.REAL_TOPIC: "topic",
        MessageConst.REAL_QID: "qid",
    }
    uniq = variable.get(MessageConst.UNIQ_KEY)
    changing = {"topic", "qid", uniq}  # a repeat's values that change from send to send
    constants: list[str] = []  # the text between two values: k0, k1, ...
    fields: list[str] = []
    segments: list[str] = [""]  # a repeat's half: segments[0] {changing value} segments[1] ...
    changes: list[str] = []
    text = ""
    for i, name in enumerate(java_order(inserted)):
        text += (PROPERTY_SEPARATOR if i else "") + name + NAME_VALUE_SEPARATOR
        k = f"{{k{len(constants)}}}"
        fields.append(f"{k}{{{variable[name]}}}")
        segments[-1] += k
        if variable[name] in changing:
            changes.append(f"{{{'u' if variable[name] == uniq else variable[name]}}}")
            segments.append("")
        else:
            segments[-1] += f"{{{variable[name]}}}"
        constants.append(text)
        text = ""
    pattern = PROPERTY_SEPARATOR.join(
        f"{re.escape(name + NAME_VALUE_SEPARATOR)}([^{PROPERTY_SEPARATOR}]+)" for name in names
    )
    values = ", ".join(variable[name] if name in names else "None" for name in _VALUES)
    unpack = "".join(f"{variable[name]}, " for name in names)
    kept = [variable[name] for name in _VALUES if name in names]  # the repeat's returned values
    repeat_values = ", ".join(f"w_{variable[name]}" if name in names else "None" for name in _VALUES)
    cells = ["head", "tail", "lh", "lt", "fcluster", "misses"]
    cells += [f"c{i}" for i in range(len(segments))] + [f"w_{v}" for v in kept]
    source = f"def factory(fullmatch, qids, sep, {', '.join(f'k{i}' for i in range(len(constants)))}):\n"
    if uniq is not None:
        source += "".join(f"    {cell} = {0 if cell == 'misses' else None}\n" for cell in cells)
    source += "    def plan(sent, cluster, topic, queue_id):\n"
    if uniq is not None:
        source += f"        nonlocal {', '.join(cells)}\n"
    source += (
        "        try:\n"
        "            qid = qids[queue_id]\n"
        "        except KeyError:\n"
        '            qid = f"{queue_id}"\n'
    )
    if uniq is not None:
        last = variable[names[-1]] == uniq  # (the tail is then always empty)
        merged = "".join(f"{{c{i}}}{change}" for i, change in enumerate(changes))
        merged += f"{{c{len(changes)}}}" if segments[-1] else ""  # (none after a changing value last)
        # the send is head + u + tail when it equals the string rebuilt from them: one f-string
        # and one compare (~0.9k instructions under two slices compared, each a new string;
        # str.startswith / endswith parse their arguments, ~0.6k each)
        if last:
            tests = 'u and sep not in u and sent == f"{head}{u}"'
            source += "        if head is not None and cluster is fcluster:\n            u = sent[lh:]\n"
        else:
            tests = 'u and sep not in u and sent == f"{head}{u}{tail}"'
            source += (
                "        if head is not None and cluster is fcluster:\n"
                "            u = sent[lh : len(sent) - lt]\n"
            )
        source += (
            f"            if {tests}:\n"
            f'                return f"{merged}", {repeat_values}\n'
            "            head = None\n"
        )
    source += (
        "        match = fullmatch(sent)\n"
        "        if match is None:\n"
        "            return None\n"
        f"        {unpack}= match.groups()\n"
        f'        half = f"{"".join(fields)}"\n'
    )
    if uniq is not None:
        group = names.index(MessageConst.UNIQ_KEY) + 1
        source += (
            "        misses += 1\n"
            f"        if misses > {_REFILL_AFTER}:\n"
            "            misses = 0\n"
            f"            head, tail = sent[: match.start({group})], sent[match.end({group}) :]\n"
            "            lh, lt = len(head), len(tail)\n"
            "            fcluster = cluster\n"
            + "".join(f'            c{i} = f"{segment}"\n' for i, segment in enumerate(segments))
            + "".join(f"            w_{v} = {v}\n" for v in kept)
        )
    source += f"        return half, {values}\n    return plan\n"
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # (identifiers only: the docstring)
    plan: Plan = namespace["factory"](
        re.compile(pattern).fullmatch, QUEUE_ID_TEXT, PROPERTY_SEPARATOR, *constants
    )
    return plan
