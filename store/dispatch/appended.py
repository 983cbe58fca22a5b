"""Reput fast path: dispatch the records this process appended from their put-time fields.

``CommitLog.appended`` holds, in CommitLog order, one entry per single put and one per batch
put (``BatchFields``: the records' sizes and properties). When the dispatcher is exactly at an
entry's offset, the entry is dispatched without decoding anything: tagsCode, KEYS and
UNIQ_KEY come from the properties string (parsed inline, as ``dispatch.props_fields.dispatch_fields``),
index hashes from the cached heads and tails of ``index.hash``. A batch writes its
ConsumeQueue units with one ``pack_into`` (``ConsumeQueue.put_run``) and its index entries with
another (``IndexService.put_hashes``). Whatever is unusual (a transaction batch, the schedule
topic) is split back into per-record entries. This is the per-message cost of dispatch
(store_bench ``put_*`` and ``batch32_*``), so globals and attributes are bound to locals.

Committed copies: END_TRANSACTION's copy of a half is stored with the half's properties string
object itself and its ``preparedTransactionOffset`` is the half's CommitLog offset, so the
half's tagsCode, UNIQ_KEY and KEYS, parsed when the half was dispatched (the dispatcher's
``carried``, keyed by that offset), are the copy's: it is not parsed again (~2k instructions
fewer per transaction; only the index hashes, of its own topic, are computed, from the UNIQ_KEY
head and tail the half's dispatch sliced). The identity check keeps anything else
-- a copy read back and re-encoded, an entry from an earlier store -- on the parse.
"""

from __future__ import annotations

from collections import deque
from itertools import accumulate
from operator import add
from typing import Protocol

from pocketmq.remoting.protocol.message import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageConst,
)
from pocketmq.remoting.protocol.topics import RMQ_SYS_TRANS_HALF_TOPIC
from pocketmq.store.dispatch.props_fields import (
    KEYS_NEEDLE,
    NO_PROPERTIES,
    TAG_CODES,
    TAGS_NEEDLE,
    UNIQ_NEEDLE,
    LazyProperties,
    deliver_time,
    tag_code,
)
from pocketmq.store.index.file import IndexService
from pocketmq.store.index.hash import HEAD_TABLES, TAIL_TABLE, heads_of, topic_key_hash, uniq_key_hash
from pocketmq.store.listener import MessageArrivingListener
from pocketmq.store.log.batch_encode import BodyStrings
from pocketmq.store.log.commitlog import AppendedRecord, BatchFields, CommitLog
from pocketmq.store.log.layout import CQ_UNIT, CQ_UNIT_SIZE, SCHEDULE_TOPIC
from pocketmq.store.queue.consume_queue import ConsumeQueue
from pocketmq.store.queue.cq_table import ConsumeQueueTable

__all__ = ["INDEX_RUN", "Arriving", "ReputState", "reput_appended", "reput_one"]

#: index entries collected before the fast path writes them (one ``put_hashes``): 128 sends
#: of two keys (UNIQ_KEY and KEYS), a few KiB of lists
INDEX_RUN = 256

_TX_MASK = TRANSACTION_ROLLBACK_TYPE
_ROLLBACK = TRANSACTION_ROLLBACK_TYPE
#: prepared and rolled-back transaction records get no ConsumeQueue unit
_UNQUEUED = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
#: a properties string with UNIQ_KEY first starts so
_UNIQ_ONLY = UNIQ_NEEDLE[1:]
_UNIQ_LEN = len(_UNIQ_ONLY)
#: a properties string with TAGS first starts so (the SDK's with tags: TAGS, then UNIQ_KEY)
_TAGS_ONLY = TAGS_NEEDLE[1:]
_TAGS_LEN = len(_TAGS_ONLY)
#: the property the send processor appends to every message (its cluster's name)
_CLUSTER_ONLY = f"{MessageConst.CLUSTER}\x01"
_CLUSTER_LEN = len(_CLUSTER_ONLY)
_HALF_TOPIC = RMQ_SYS_TRANS_HALF_TOPIC
#: the CLUSTER part the last record of UNIQ_KEY then CLUSTER ended with, separator first
#: (the broker's "\x02CLUSTER\x01<its cluster>"): the fast path's check of a record's tail.
#: Learnt by ``reput_appended``; two separators before (never a learnt part: no record matches)
_LEARNT = [("\x02\x02", -2)]  # (the part and its slice bound, minus its length)
#: the last record's topic, UNIQ_KEY head and its part of the hash, and the 26-character head
#: and its part (``reput_appended``), kept from one call to the next (at one send in flight a
#: call is one record). Parts are those of ``index.hash``'s tables, a function of the topic and
#: the head alone, so any store of the process may use them
_KEPT: list[tuple[str | None, str | None, int, str | None, int]] = [(None, None, 0, None, 0)]
_pack_unit = CQ_UNIT.pack_into
#: topics whose records ``reput_one`` leaves to ``reput_appended`` (a half's parse is kept, a
#: scheduled record's tagsCode is its delivery time)
_PARSED_TOPICS = (_HALF_TOPIC, SCHEDULE_TOPIC)

#: a half's dispatch parse as its committed copy takes it (module docstring): the half's
#: properties string, tagsCode, UNIQ_KEY, KEYS, and UNIQ_KEY's head and tail (the two parts of
#: its index hash, ``index.hash``: the copy hashes them under its own topic, with no slice
#: made and no string hashed again)
Carried = tuple[str, int, str | None, str | None, str, str]
#: read only, never filled: ``reput_appended``'s per-topic locals before its first record
_NO_HEADS: dict[str, int] = {}
_NO_QUEUES: dict[int, ConsumeQueue] = {}
#: the dispatcher's listener as the fast path reads it: the listener, whether it reads
#: properties (``props_fields.wants_properties``), its optional ``held_queues`` view
Arriving = tuple[MessageArrivingListener | None, bool, object]
#: ``ReputState.carried`` entries at most: halves whose copy never comes here (rolled back,
#: committed from a read back, never resolved) are dropped all at once past it (a copy
#: follows its half by one END_TRANSACTION's round trip, a few thousand records at most)
CARRIED_MAX = 8192


class ReputState(Protocol):
    """The dispatcher's state the fast path reads and moves (``dispatcher.Dispatcher`` is the
    one implementation; a Protocol so this module does not import its caller)."""

    commitlog: CommitLog
    cq_table: ConsumeQueueTable
    index: IndexService
    listener_view: Arriving
    index_enable: bool
    delay_levels: list[int]
    reput_from_offset: int
    last_dispatched_timestamp: int
    index_backlog: tuple[list[int], list[int], list[int]] | None
    backlog_timestamp: int
    carried: dict[int, Carried]

    def write_index_backlog(self) -> None: ...


def reput_appended(d: ReputState, budget: int) -> int:
    """Dispatch ``appended`` entries from ``d.reput_from_offset``; 0 if none starts there.

    ConsumeQueue units are written per record; index entries are added to ``d.index_backlog``
    and written together (``IndexService.put_hashes``) once ``INDEX_RUN`` are pending, or
    earlier by ``d.write_index_backlog`` (see there). A record whose ConsumeQueue write
    raised is put back and retried by the next call; entries whose index write raised stay
    in the backlog (both writes are idempotent). ``last_dispatched_timestamp`` (the
    checkpoint's index time) only moves once the index is written. A batch counts whole
    against ``budget``.
    """
    # (a call per send at one in flight, so no bound method is made up front: a method read
    # without its call is a generic attribute read in 3.11, ``pending.popleft()`` and
    # ``hashes.append(h)`` are specialized; the listener's facets are read once it is set)
    pending = d.commitlog.appended
    off = d.reput_from_offset
    while pending and pending[0][0] < off:  # dispatched by the decoding path already
        pending.popleft()
    if not pending or pending[0][0] != off:
        return 0
    by_topic = d.cq_table.queues
    indexed = d.index_enable
    # ``waiting``: a listener's optional live view of what it waits on (the hold service's held
    # queues): while it is empty, ``arriving`` would do nothing, so it is not called per record
    listener, lazy, waiting = d.listener_view
    tag_codes = TAG_CODES
    tails = TAIL_TABLE
    head_tables = HEAD_TABLES
    backlog = d.index_backlog
    hashes, hphys, htss = ([], [], []) if backlog is None else backlog
    last_topic: str | None = None
    heads = _NO_HEADS  # (both set by the first record: no dict made per call)
    # the last UNIQ_KEY head looked up or composed and its part of the hash, and the head
    # of its millisecond's first 6 hex digits (26 characters) and its part (``_KEPT``)
    last_head: str | None = None
    head_part = 0
    last_h26: str | None = None
    h26 = 0
    cluster_tail, cut = _LEARNT[0]
    # the topic's queues by queue id: one int subscript per record, not a (topic, qid) tuple
    # built and hashed for ``flat`` (~0.6k instructions)
    topic_queues = _NO_QUEUES
    halves = False  # (the topic is the half topic: its records' parse is kept in ``carried``)
    delayed = False  # (the topic is the schedule topic: tagsCode is the delivery time)
    carried = d.carried
    n = 0
    last_ts = 0
    try:
        while pending and n < budget:
            rec = pending.popleft()
            phy, size, topic, qid, qoff, ts, sys_flag, _prepared, props, batch = rec
            if phy != off:
                pending.appendleft(rec)
                break
            if topic != last_topic:  # (equal, not identical: a broker decodes each topic anew)
                # (the topic's table read inline: ``heads_of`` called only for a new topic)
                heads = head_tables.get(topic) or heads_of(topic)
                kept_topic, last_head, head_part, last_h26, h26 = _KEPT[0]
                if topic != kept_topic:
                    last_head = last_h26 = None
                last_topic = topic
                topic_queues = by_topic.get(topic) or {}
                halves = topic == _HALF_TOPIC
                delayed = topic == SCHEDULE_TOPIC
            if batch is not None:
                try:
                    done = _dispatch_batch(d, rec, batch, heads, hashes, hphys, htss, waiting)
                except BaseException:
                    pending.appendleft(rec)
                    raise
                if not done:
                    pending.extendleft(reversed(_split(rec, batch)))
                    continue
                off = phy + size
                last_ts = ts
                n += done
                continue
            end = phy + size
            try:
                tags_code = 0
                tx = sys_flag & _TX_MASK
                if props:
                    if _prepared and (got := carried.pop(_prepared, None)) is not None and got[0] is props:
                        # a committed copy: its half's properties object, parsed at the half's
                        # dispatch (module docstring, "Committed copies")
                        _, tags_code, key, keys, head, tail = got
                    elif (
                        props[cut:] == cluster_tail
                        and props[:_UNIQ_LEN] == _UNIQ_ONLY
                        and "\x02" not in (key := props[_UNIQ_LEN:cut])
                        and not halves
                    ):
                        # UNIQ_KEY, then the CLUSTER part learnt below (the broker appends
                        # one, always the same): the key is the slice between the two, no
                        # partition and no tuple (~0.3k instructions fewer)
                        keys = None
                        if key:
                            head = key[:-2]
                            tail = key[-2:]
                        else:
                            head = tail = ""
                    elif (
                        props[:_UNIQ_LEN] == _UNIQ_ONLY
                        and not halves
                        and (
                            not (after := (split := props[_UNIQ_LEN:].partition("\x02"))[2])
                            or (after[:_CLUSTER_LEN] == _CLUSTER_ONLY and "\x02" not in after)
                        )
                    ):
                        # UNIQ_KEY first, then at most CLUSTER (a send of the SDK's message
                        # without tags, as the broker stores it): what the parse below finds
                        # in it (no TAGS, no KEYS), without the string built and its three
                        # partitions; its CLUSTER part is learnt for the branch above
                        key = split[0]
                        keys = None
                        if after:
                            cluster_tail = f"\x02{after}"
                            cut = -len(cluster_tail)
                            _LEARNT[0] = (cluster_tail, cut)
                        if key:
                            head = key[:-2]
                            tail = key[-2:]
                        else:
                            head = tail = ""
                    else:
                        s = f"\x02{props}\x02"
                        # inline of dispatch.props_fields.dispatch_fields (tagsCode); ``partition``
                        # takes one argument, ``find`` parses its tuple: ~1.1k instructions fewer
                        # per record with TAGS, ~0.3k without (callgrind)
                        _, found, rest = s.partition(TAGS_NEEDLE)
                        if found:
                            tags = rest.partition("\x02")[0]  # (``s`` ends with \x02)
                            if tags:
                                code = tag_codes.get(tags)
                                tags_code = tag_code(tags) if code is None else code
                        if indexed:  # (key and keys are read only when indexed)
                            # UNIQ_KEY and KEYS (``partition``, not ``find``: ~0.6k instructions
                            # fewer, as for TAGS; ``in`` first for KEYS, which most records lack)
                            _, found, rest = s.partition(UNIQ_NEEDLE)
                            key = rest.partition("\x02")[0] if found else None
                            keys = (
                                s.partition(KEYS_NEEDLE)[2].partition("\x02")[0] if KEYS_NEEDLE in s else None
                            )
                            # (its index hash's parts, made here so that a half's copy has them)
                            if key:
                                head = key[:-2]
                                tail = key[-2:]
                            else:
                                head = tail = ""
                            if halves:
                                if len(carried) >= CARRIED_MAX:
                                    carried.clear()
                                carried[phy] = (props, tags_code, key, keys, head, tail)
                    if delayed:
                        tags_code = deliver_time(props, ts, d.delay_levels, tags_code)
                    if indexed and tx != _ROLLBACK:
                        # the index hashes of UNIQ_KEY and each KEYS token, as topic_key_hashes
                        if key:
                            # inline of index.hash.topic_key_hash (a 1-char key misses). A miss
                            # (a new millisecond: at one send in flight, every record) is found
                            # by ``in``, not a raised KeyError (~1k instructions more per miss);
                            # ``head`` and ``tail``: key[:-2] and key[-2:], from the parse
                            # The head's part is kept from the record before when the head is
                            # equal (it changes once a millisecond or 256 records a producer): a
                            # compare instead of the new head string's hash and two lookups
                            if head == last_head and tail in tails:
                                u = (head_part + tails[tail]) & 0xFFFFFFFF
                                hashes.append(u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF)
                            elif (
                                key[:-6] == last_h26
                                and (t1 := key[-6:-4]) in tails
                                and (t2 := key[-4:-2]) in tails
                                and tail in tails
                            ):
                                # a new millisecond (at one send in flight, every record): the
                                # head composed from the 26-character one, as uniq_key_hash does,
                                # without its call, lookups and the head's insertion (~8k
                                # instructions fewer)
                                last_head = head
                                head_part = (
                                    (((h26 + tails[t1]) * 961) & 0xFFFFFFFF) + tails[t2]
                                ) * 961 & 0xFFFFFFFF
                                u = (head_part + tails[tail]) & 0xFFFFFFFF
                                hashes.append(u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF)
                            elif len(key) >= 2 and head in heads and tail in tails:
                                last_head = head
                                head_part = heads[head]
                                u = (head_part + tails[tail]) & 0xFFFFFFFF
                                hashes.append(u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF)
                            else:
                                hashes.append(uniq_key_hash(topic, key))
                                # (it cached the 26-character head of a UNIQ_KEY's form)
                                if (part := heads.get(key[:-6])) is not None and len(key) >= 6:
                                    last_h26 = key[:-6]
                                    h26 = part
                            hphys.append(phy)
                            htss.append(ts)
                        if keys:
                            for k in keys.split(" ") if " " in keys else (keys,):
                                if k:
                                    try:
                                        # inline of index.hash.topic_key_hash
                                        u = (heads[k[:-2]] + tails[k[-2:]]) & 0xFFFFFFFF
                                        hashes.append(u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF)
                                    except KeyError:
                                        hashes.append(topic_key_hash(topic, k))
                                    hphys.append(phy)
                                    htss.append(ts)
                if not tx or tx not in _UNQUEUED:  # (a plain record: no tuple scan)
                    try:
                        cq = topic_queues[qid]
                    except KeyError:  # (once per queue: its first record)
                        cq = d.cq_table.find_or_create(topic, qid)
                        topic_queues = by_topic[topic]
                    # inline of queue.consume_queue.ConsumeQueue.put (its common case, the next unit
                    # of its last file: no call per record, ~0.5k instructions per transaction)
                    files = cq.mfq.files
                    if (
                        files
                        and (pos := qoff * CQ_UNIT_SIZE - (mf := files[-1]).file_from_offset)
                        == mf.wrote_position
                        and pos < mf.file_size
                    ):
                        _pack_unit(mf.mm, pos, phy, size, tags_code)
                        mf.wrote_position = pos + CQ_UNIT_SIZE
                        if end > cq.max_physic_offset:  # noqa: PLR1730 - no builtin call
                            cq.max_physic_offset = end
                        if ts:
                            cq.last_store_timestamp = ts
                    else:
                        cq.put(phy, size, tags_code, qoff, ts)
                    if listener is not None and (waiting is None or waiting):
                        d.reput_from_offset = end
                        listener.arriving(
                            topic,
                            qid,
                            qoff + 1,
                            tags_code,
                            ts,
                            None,
                            LazyProperties(props) if lazy else NO_PROPERTIES,
                        )
            except BaseException:
                # not dispatched: drop the index entries collected for it, retry it whole
                while hphys and hphys[-1] == phy:
                    hphys.pop()
                    hashes.pop()
                    htss.pop()
                pending.appendleft(rec)
                raise
            off = end
            last_ts = ts
            n += 1
    finally:
        d.reput_from_offset = off
        if last_topic is not None:
            _KEPT[0] = (last_topic, last_head, head_part, last_h26, h26)
        if hashes and d.index_backlog is None:  # (else the same lists are in it already)
            d.index_backlog = (hashes, hphys, htss)
        if n:
            if d.index_backlog is None:
                d.last_dispatched_timestamp = last_ts
            else:
                d.backlog_timestamp = last_ts
    if len(hashes) >= INDEX_RUN:
        d.write_index_backlog()
    return n


def reput_one(d: ReputState, pending: deque[AppendedRecord]) -> bool:
    """Dispatch ``pending``'s first entry, the one new record of a call at one send in flight,
    when it has the common shape: a single plain record at ``d.reput_from_offset``, of the
    topic ``reput_appended`` dispatched last (not the half or schedule topic), properties
    UNIQ_KEY then the learnt CLUSTER part (tagsCode 0, no KEYS), a UNIQ_KEY whose head's part
    of the hash is kept or composed (``_KEPT``), the next unit of its queue's last file.
    What ``reput_appended`` does for it, without its setup, topic block and ``finally`` (~9k
    instructions a call at one a call). False, with nothing changed, for anything else: the
    caller then takes ``reput_appended``."""
    phy, size, topic, qid, qoff, ts, sys_flag, prepared, props, batch = pending[0]
    kept_topic, last_head, head_part, last_h26, h26 = _KEPT[0]
    cluster_tail, cut = _LEARNT[0]
    if (
        phy != d.reput_from_offset
        or batch is not None
        or sys_flag & _TX_MASK
        or prepared
        or topic != kept_topic
        or topic in _PARSED_TOPICS
        or props[cut:] != cluster_tail
        or props[:_UNIQ_LEN] != _UNIQ_ONLY
        or "\x02" in (key := props[_UNIQ_LEN:cut])
        or len(key) < 6
        or (queues := d.cq_table.queues.get(topic)) is None
        or (cq := queues.get(qid)) is None
        or not (files := cq.mfq.files)
    ):
        return False
    mf = files[-1]
    pos = qoff * CQ_UNIT_SIZE - mf.file_from_offset
    if pos != mf.wrote_position or pos >= mf.file_size:
        return False
    indexed = d.index_enable
    if indexed:
        tails = TAIL_TABLE
        head = key[:-2]
        if (tail := key[-2:]) not in tails:
            return False
        if head != last_head:
            # a new millisecond: the head's part composed from the 26-character one's (as
            # ``reput_appended`` does)
            if key[:-6] != last_h26 or (t1 := key[-6:-4]) not in tails or (t2 := key[-4:-2]) not in tails:
                return False
            head_part = ((((h26 + tails[t1]) * 961) & 0xFFFFFFFF) + tails[t2]) * 961 & 0xFFFFFFFF
            _KEPT[0] = (topic, head, head_part, last_h26, h26)
        u = (head_part + tails[tail]) & 0xFFFFFFFF
        backlog = d.index_backlog
        if backlog is None:
            backlog = d.index_backlog = ([], [], [])
        hashes = backlog[0]
        hashes.append(u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF)
        backlog[1].append(phy)
        backlog[2].append(ts)
    rec = pending.popleft()
    _pack_unit(mf.mm, pos, phy, size, 0)
    mf.wrote_position = pos + CQ_UNIT_SIZE
    end = phy + size
    if end > cq.max_physic_offset:  # noqa: PLR1730 - no builtin call
        cq.max_physic_offset = end
    if ts:
        cq.last_store_timestamp = ts
    d.reput_from_offset = end
    listener, lazy, waiting = d.listener_view
    if listener is not None and (waiting is None or waiting):
        try:
            listener.arriving(
                topic, qid, qoff + 1, 0, ts, None, LazyProperties(props) if lazy else NO_PROPERTIES
            )
        except BaseException:
            # as ``reput_appended``: not dispatched, its index entry dropped, retried whole
            if indexed:
                for column in d.index_backlog or ():
                    column.pop()
            d.reput_from_offset = phy
            pending.appendleft(rec)
            raise
    if indexed:
        d.backlog_timestamp = ts
        if len(hashes) >= INDEX_RUN:
            d.write_index_backlog()
    else:
        d.last_dispatched_timestamp = ts
    return True


def _split(rec: AppendedRecord, batch: BatchFields) -> list[AppendedRecord]:
    """A batch entry as one entry per record (for what ``_dispatch_batch`` does not handle)."""
    phy, _total, topic, qid, qoff, ts, sys_flag, _prepared, _props, _ = rec
    out: list[AppendedRecord] = []
    for size, props in zip(*batch, strict=True):
        out.append((phy, size, topic, qid, qoff, ts, sys_flag, 0, props, None))
        phy += size
        qoff += 1
    return out


def _dispatch_batch(
    d: ReputState,
    rec: AppendedRecord,
    batch: BatchFields,
    heads: dict[str, int],
    hashes: list[int],
    hphys: list[int],
    htss: list[int],
    waiting: object,
) -> int:
    """One batch put: its records' ConsumeQueue units (one ``pack_into``), arrival notices,
    and index hashes added to ``hashes``/``hphys``/``htss`` (written by the caller).
    ``waiting``: the listener's ``held_queues`` (``reput_appended``): while it is empty no
    listener is called, as for a single record.

    Returns the number of records, or 0 (nothing done) for a batch of transaction records
    or on the schedule topic, which the caller splits into per-record entries.
    """
    phy, total, topic, qid, qoff, ts, sys_flag, _prepared, _props, _ = rec
    if sys_flag & _TX_MASK in _UNQUEUED or topic == SCHEDULE_TOPIC:
        return 0
    sizes, props_list = batch
    indexed = d.index_enable
    n_hashes = len(hashes)
    codes = (
        _body_codes(props_list, sizes, phy, topic, heads, (hashes, hphys) if indexed else None)
        if props_list.__class__ is BodyStrings
        else None
    )
    if codes is None:
        codes = _parsed_codes(props_list, sizes, phy, topic, heads, hashes, hphys, indexed)
    cq = d.cq_table.flat.get((topic, qid))
    try:
        if cq is None:
            cq = d.cq_table.find_or_create(topic, qid)
        if not cq.put_run(phy, sizes, codes, qoff, ts):
            p = phy
            for k_, (size, code) in enumerate(zip(sizes, codes, strict=True)):
                cq.put(p, size, code, qoff + k_, ts)
                p += size
    except BaseException:
        del hashes[n_hashes:]
        del hphys[n_hashes:]
        raise
    htss.extend([ts] * (len(hashes) - n_hashes))
    listener, lazy, _ = d.listener_view
    # (nothing held: no call, as reput_appended per record; an END_TRANSACTION run's op
    # records, which no consumer pulls, come here once a loop turn)
    if listener is not None and (waiting is None or waiting):
        d.reput_from_offset = phy + total
        per_batch = None if lazy else getattr(listener, "arriving_batch", None)
        if per_batch is not None:
            per_batch(topic, qid, qoff + 1, codes, ts)
            return len(sizes)
        for k_, (props, code) in enumerate(zip(props_list, codes, strict=True), qoff + 1):
            listener.arriving(
                topic, qid, k_, code, ts, None, LazyProperties(props) if lazy else NO_PROPERTIES
            )
    return len(sizes)


def _parsed_codes(
    props_list: list[str],
    sizes: list[int],
    phy: int,
    topic: str,
    heads: dict[str, int],
    hashes: list[int],
    hphys: list[int],
    indexed: bool,
) -> list[int]:
    """A batch's tagsCodes from each record's whole properties string; its index hashes and
    their records' offsets added to ``hashes`` and ``hphys``."""
    tag_codes = TAG_CODES
    tails = TAIL_TABLE
    add_hash = hashes.append
    add_phy = hphys.append
    codes: list[int] = []
    p = phy
    code = 0
    #: the record before's properties when they gave no index entry: a record with the same
    #: string object has the same tagsCode and no index entry either (op records of a
    #: transaction run: all one string, TAGS only), so its parse is skipped
    same: str | None = None
    # every record with equal properties (an END_TRANSACTION run's op records): the first's
    # parse is every record's when it gave no index entry (~0.5k instructions fewer a record)
    uniform = props_list.count(props_list[0]) == len(props_list)
    for props, size in zip(props_list, sizes, strict=True):
        if props is same:
            codes.append(code)
            p += size
            continue
        same = props
        code = 0
        if props:
            s = f"\x02{props}\x02"
            # inline of dispatch.props_fields.dispatch_fields (tagsCode; ``partition`` as in
            # reput_appended)
            _, found, rest = s.partition(TAGS_NEEDLE)
            if found:
                tags = rest.partition("\x02")[0]
                if tags:
                    c = tag_codes.get(tags)
                    code = tag_code(tags) if c is None else c
            if indexed:
                _, found, rest = s.partition(UNIQ_NEEDLE)
                if found:
                    key = rest.partition("\x02")[0]
                    if key:
                        # inline of index.hash.topic_key_hash (as in reput_appended)
                        head = key[:-2]
                        tail = key[-2:]
                        if len(key) >= 2 and head in heads and tail in tails:
                            u = (heads[head] + tails[tail]) & 0xFFFFFFFF
                            add_hash(u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF)
                        else:
                            add_hash(uniq_key_hash(topic, key))
                        add_phy(p)
                        same = None
                if KEYS_NEEDLE in s:
                    same = None
                    keys = s.partition(KEYS_NEEDLE)[2].partition("\x02")[0]
                    for k in keys.split(" ") if " " in keys else (keys,):
                        if k:
                            try:
                                # inline of index.hash.topic_key_hash
                                u = (heads[k[:-2]] + tails[k[-2:]]) & 0xFFFFFFFF
                                add_hash(u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF)
                            except KeyError:
                                add_hash(topic_key_hash(topic, k))
                            add_phy(p)
        codes.append(code)
        if uniform and same is not None:
            codes += [code] * (len(sizes) - 1)
            break
        p += size
    return codes


def _body_codes(
    props_list: BodyStrings,
    sizes: list[int],
    phy: int,
    topic: str,
    heads: dict[str, int],
    index: tuple[list[int], list[int]] | None,
) -> list[int] | None:
    """``_parsed_codes`` of a batch body's records (``BodyStrings``: each string is the
    record's own properties then the shared tail) whose own part is UNIQ_KEY alone or TAGS
    then UNIQ_KEY (the SDK's messages), with one prefix up to the UNIQ_KEY value (the same
    TAGS): the prefix's and the tail's TAGS and KEYS parsed once a batch, each record's
    UNIQ_KEY sliced from its own part (no framed string built, no partition: what the parse
    finds, as the first occurrence wins and the own part comes first). ``index``: the lists
    the index hashes and their records' offsets are added to (None: the index is off). None,
    with nothing added, when a record's own part holds anything else: the caller parses
    every record."""
    tail = props_list.tail
    # the first record's own part up to its UNIQ_KEY value: every record must start so
    first = props_list[0]
    own_tags = None
    if first[:_UNIQ_LEN] == _UNIQ_ONLY:
        lead = _UNIQ_LEN
    elif first[:_TAGS_LEN] == _TAGS_ONLY and first[(e := first.find("\x02")) + 1 :][:_UNIQ_LEN] == _UNIQ_ONLY:
        own_tags = first[_TAGS_LEN:e]
        lead = e + 1 + _UNIQ_LEN
    else:
        return None
    prefix = first[:lead]
    # the own part ends where the tail starts, or one before when the items end with a
    # separator (a tail not starting with one: ``batch_body.checked_body``); a tail that
    # starts with one in that case leaves the separator in the key, which sends the batch
    # to the parse
    cut = len(tail) if tail[:1] == "\x02" else len(tail) + 1
    s = f"\x02{tail}\x02"
    if UNIQ_NEEDLE in s:
        # (a record whose own part is shorter than the prefix could match it with the tail's
        # UNIQ_KEY: no broker's tail has one)
        return None
    code = 0
    _, found, rest = s.partition(TAGS_NEEDLE)
    if own_tags is not None or found:
        tags = own_tags if own_tags is not None else rest.partition("\x02")[0]
        if tags:
            c = TAG_CODES.get(tags)
            code = tag_code(tags) if c is None else c
    n = len(sizes)
    # every record starts with the prefix and holds no separator past the prefix's but the
    # tail's (and, items ending with one, its own last): C-level counts over the joined
    # strings, not a slice compare and a search per record. The strings hold no NUL of their
    # own (``checked_body``); one in the tail puts a match in every string, too many
    joined = "\x00".join(props_list)
    seps = prefix.count("\x02") + tail.count("\x02") + cut - len(tail)
    if joined.count("\x00" + prefix) != n - 1 or joined.count("\x02") != n * seps:
        return None
    if index is not None:
        hashes, hphys = index
        # the tail's KEYS tokens' hashes, each record's after its UNIQ_KEY's (as the parse)
        tail_hashes = []
        if KEYS_NEEDLE in s:
            keys = s.partition(KEYS_NEEDLE)[2].partition("\x02")[0]
            tail_hashes = [topic_key_hash(topic, k) for k in keys.split(" ") if k]
        tails = TAIL_TABLE
        add_hash = hashes.append
        last = "\x02"  # (no head holds a separator)
        hv = 0
        # (the first key's length: a fast path needs every key of it)
        if not tail_hashes and (
            same := _same_head_hashes(joined, n, len(first) + 1, lead, len(first) - lead - cut, topic, heads)
        ):
            hashes += same
            uniqs = []  # (hashed: the offsets below)
        else:
            uniqs = [props[lead:-cut] for props in props_list]
        for key in uniqs:
            if key:
                # inline of index.hash.topic_key_hash; the head's part kept from the record
                # before when the head is equal (a batch's keys differ in their counter: a
                # compare instead of the new head string's hash and lookup, ~0.4k
                # instructions). A miss raises (a new millisecond: every ~200 records of a
                # batch); a 1-character key's tail is in no table
                head = key[:-2]
                try:
                    if head != last:
                        hv = heads[head]
                        last = head
                    u = (hv + tails[key[-2:]]) & 0xFFFFFFFF
                    add_hash(u if u < 0x80000000 else (0x100000000 - u) & 0x7FFFFFFF)
                except KeyError:
                    add_hash(uniq_key_hash(topic, key))
            if tail_hashes:
                hashes += tail_hashes
        if not tail_hashes and "" not in uniqs:  # (one entry a record: offsets C-level)
            hphys += accumulate(sizes[:-1], initial=phy)
        else:
            p = phy
            for key, size in zip(uniqs, sizes, strict=True):
                if key:
                    hphys.append(p)
                hphys += [p] * len(tail_hashes)
                p += size
    return [code] * len(sizes)


#: a tail's part of the hash is ``ord(a) * 31 + ord(b)`` for two ASCII characters (``index.hash``):
#: at most this
_ASCII_TAIL_MAX = 127 * 31 + 127
_MUL31 = (31).__mul__


def _same_head_hashes(
    joined: str, n: int, w: int, lead: int, size: int, topic: str, heads: dict[str, int]
) -> list[int] | None:
    """The index hashes (``topic_key_hash`` each) of ``n`` UNIQ_KEYs of ``size`` characters in
    ``joined``, ``n`` strings of ``w - 1`` characters joined with NULs (a batch body's
    properties, no NUL of their own: ``checked_body``), each key at ``lead`` in its string,
    when all is ASCII and the keys come in runs of one head each (all but the last two
    characters: a batch's messages are made in a millisecond or two, its counter's high byte
    changes once every 256), computed by C-level maps per run: the head's part ``hv`` is
    looked up once, a tail's part is ``31 * a + b`` of its two bytes, and when ``hv`` plus any
    tail's part stays on one side of 2**31 (all but ~1 run in 500,000) the folded hash is
    ``hv + t`` (below) or ``2**32 - hv - t`` (above) for every key of the run. None, with
    nothing done, for anything else (the caller's per-key loop); also [] for n = 0."""
    # a NUL at every string's end: all of one length, so are the keys
    if not (
        size >= 6
        and len(joined) == n * w - 1
        and joined[w - 1 :: w].count("\x00") == n - 1
        and joined.isascii()
    ):
        return None
    raw = joined.encode()
    out: list[int] = []
    i = 0
    at = lead + size - 2  # (a key's head ends, its tail starts, here in its string)
    while i < n:
        start = i * w
        # the strings after string i that start as it does up to its key's tail (a needle
        # starting with NUL matches at a string's start only): j - i - 1 of them, which must
        # all come before string j
        needle = "\x00" + joined[start : start + at]
        j = i + 1 + joined.count(needle, start)
        if j < n and joined.count(needle, start, j * w - 1) != j - i - 1:
            return None
        head = joined[start + lead : start + at]
        hv = heads.get(head)
        if hv is None:
            # (it fills the head's part in, as the loop's miss)
            uniq_key_hash(topic, joined[start + lead : start + at + 2])
            if (hv := heads.get(head)) is None:
                return None
        parts = map(add, map(_MUL31, raw[start + at : j * w : w]), raw[start + at + 1 : j * w : w])
        if hv + _ASCII_TAIL_MAX < 0x80000000:
            out += map(hv.__add__, parts)
        elif hv > 0x80000000 and hv + _ASCII_TAIL_MAX <= 0xFFFFFFFF:
            out += map((0x100000000 - hv).__sub__, parts)
        else:
            return None
        i = j
    return out
