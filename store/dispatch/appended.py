"""Reput fast path: dispatch the records this process appended from their put-time fields.

``CommitLog.appended`` holds, in CommitLog order, one entry per single put and one per batch
put (``BatchFields``: the records' sizes and properties). When the dispatcher is exactly at an
entry's offset, the entry is dispatched without decoding anything: tagsCode, KEYS and
UNIQ_KEY come from the properties string (parsed inline, as ``dispatch.props_fields.dispatch_fields``),
index hashes from the cached heads and tails of ``index.hash``. A batch writes its
ConsumeQueue units with one ``pack_into`` (``ConsumeQueue.put_run``) and its index entries with
another (``IndexService.put_hashes``), in ``dispatch.batched``. Whatever is unusual (a
transaction batch, the schedule topic) is split back into per-record entries. This is the per-message cost of dispatch
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

from bisect import bisect_right
from collections import deque
from operator import itemgetter
from typing import Protocol

from pocketmq.remoting.protocol.message import (
    TRANSACTION_ROLLBACK_TYPE,
    MessageConst,
)
from pocketmq.remoting.protocol.topics import RMQ_SYS_TRANS_HALF_TOPIC
from pocketmq.store.dispatch.batched import TX_MASK as _TX_MASK
from pocketmq.store.dispatch.batched import UNIQ_LEN as _UNIQ_LEN
from pocketmq.store.dispatch.batched import UNIQ_ONLY as _UNIQ_ONLY
from pocketmq.store.dispatch.batched import UNQUEUED as _UNQUEUED
from pocketmq.store.dispatch.batched import dispatch_batch, one_head_hashes, same_head_hashes, split_batch
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
from pocketmq.store.log.commitlog import AppendedRecord, CommitLog
from pocketmq.store.log.layout import CQ_UNIT, CQ_UNIT_SIZE, SCHEDULE_TOPIC
from pocketmq.store.queue.consume_queue import ConsumeQueue, put_in_turn
from pocketmq.store.queue.cq_table import ConsumeQueueTable

__all__ = ["INDEX_RUN", "RUN_MIN", "Arriving", "ReputState", "reput_appended", "reput_one", "reput_run"]

#: index entries collected before the fast path writes them (one ``put_hashes``): 128 sends
#: of two keys (UNIQ_KEY and KEYS), a few KiB of lists
INDEX_RUN = 256

_ROLLBACK = TRANSACTION_ROLLBACK_TYPE
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
#: pending records from which ``reput_run`` tries a slice whole (one: ``reput_one``)
RUN_MIN = 8
#: records a queue at least, on average, in a slice ``reput_run`` takes
RUN_PER_QUEUE = 3
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
                    done = dispatch_batch(d, rec, batch, heads, hashes, hphys, htss, waiting)
                except BaseException:
                    pending.appendleft(rec)
                    raise
                if not done:
                    pending.extendleft(reversed(split_batch(rec, batch)))
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


def reput_run(d: ReputState, pending: deque[AppendedRecord]) -> int:
    """Dispatch all of ``pending`` at once (a reput slice of single sends, ~32 a read at 128
    in flight) when every entry has ``reput_one``'s shape: single plain records from
    ``d.reput_from_offset`` on, adjacent, of one topic (not the half or schedule topic),
    properties UNIQ_KEY then the learnt CLUSTER part (tagsCode 0, no KEYS), all of one length
    and ASCII, and no listener call due (nothing held). The batch path's economy for records
    that were put one by one: the shape checked by C-level counts over the properties joined
    (``batched.same_head_hashes``' form), the UNIQ_KEYs hashed by its C-level maps per run of
    one head, the ConsumeQueue units written per queue with one ``pack_into``
    (``ConsumeQueue.put_units``; the records grouped by queue id by a C-level sort) and the
    index columns extended whole: no Python statement per record.

    Returns the number dispatched, or 0, with nothing changed, for any other slice (the caller
    then takes ``reput_appended``). A ConsumeQueue write that raises leaves the slice
    pending and the index backlog as it was (units already written are rewritten alike by
    the retry: ``ConsumeQueue.put`` is idempotent)."""
    n = len(pending)
    rec = pending[0]
    topic = rec[2]
    first = rec[8]
    cluster_tail, cut = _LEARNT[0]
    w = len(first) + 1  # (a string and its NUL in the joined properties)
    at = w - 3 + cut  # (where a key's head, all but its last two characters, ends in its string)
    # First what a few reads tell, before the slice's columns are made (they cost ~1k
    # instructions a record, wasted on a slice left to the per-record path):
    # - a queue's units cost a ``put_units`` call (a record of the per-record path ~15k
    #   instructions): fewer than RUN_PER_QUEUE records a queue of the topic, the run costs more
    # - at most two heads, a millisecond or a counter byte turning over in the slice (the
    #   middle record's head is the first's or the last's): a run of one head costs
    #   ``same_head_hashes`` two counts over the rest of the string (a new millisecond every
    #   record: ~3x the per-record path)
    if (
        (queues := d.cq_table.queues.get(topic)) is None
        or n < RUN_PER_QUEUE * len(queues)
        or at - _UNIQ_LEN < 4  # (a key of 6 characters at least, as ``same_head_hashes`` needs)
        or ((mid := pending[n >> 1][8][:at]) != first[:at] and mid != pending[-1][8][:at])
    ):
        return 0
    phys, sizes, topics, qids, qoffs, tss, flags, prepared, props, batches = zip(*pending, strict=True)
    listener, _, waiting = d.listener_view
    size = at + 2 - _UNIQ_LEN  # (a UNIQ_KEY's length)
    if (
        phys[0] != d.reput_from_offset
        or (listener is not None and (waiting is None or waiting))
        or topic in _PARSED_TOPICS
        or topics.count(topic) != n
        or batches.count(None) != n
        or any(flags)
        or any(prepared)
        or first[:_UNIQ_LEN] != _UNIQ_ONLY
        or props[-1][cut:] != cluster_tail
    ):
        return 0
    # adjacent: ``appended`` is in CommitLog order, a record never before the previous one's
    # end, so the records are adjacent iff the gaps (a file end's BLANK) sum to 0 (one C-level
    # sum; an ``accumulate`` of the ends and a tuple compare cost ~300 instructions a record)
    end = phys[-1] + sizes[-1]
    if end - phys[0] != sum(sizes):
        return 0
    # every string of one length, ASCII (as many bytes as characters), a NUL only between two
    # (none of their own): the string i at i * w of the joined bytes. One head (a slice within
    # a millisecond and a counter byte, the common case): the bytes with the keys' two tail
    # columns blanked are the first string's so blanked, n times (two strided assignments and
    # one memcmp; a count of the CLUSTER part, NUL and head ~400 instructions a record), the
    # key's separator looked for in the first's head and the tail columns (memchrs; a count
    # of "\x02" over all is a loop per character). Else (two heads) at each NUL the CLUSTER
    # part before and UNIQ_KEY's name after (with the first's start and the last's end
    # checked above: every string is UNIQ_KEY, its key, the CLUSTER part), its one separator
    # that part's: the key holds none (as ``reput_one`` checks per record)
    joined = "\x00".join(props)
    raw = joined.encode()
    if len(raw) != n * w - 1 or len(joined) != len(raw) or "\x00" in "".join(props):
        return 0
    blank = bytearray(raw)
    blank[at::w] = blank[at + 1 :: w] = bytes(n)
    row = raw[:w]
    if one := blank == memoryview((row[:at] + b"\x00\x00" + row[at + 2 :]) * n)[:-1]:
        if "\x02" in first[_UNIQ_LEN:at] or 2 in raw[at::w] or 2 in raw[at + 1 :: w]:
            return 0
    elif (
        joined[w - 1 :: w].count("\x00") != n - 1
        or joined.count("\x02") != n
        or joined.count(f"{cluster_tail}\x00{_UNIQ_ONLY}") != n - 1
    ):
        return 0
    indexed = d.index_enable
    if indexed:
        heads = HEAD_TABLES.get(topic) or heads_of(topic)
        got = (
            one_head_hashes(joined, raw, n, w, _UNIQ_LEN, size, topic, heads)
            if one
            else same_head_hashes(joined, n, w, _UNIQ_LEN, size, topic, heads)
        )
        if got is None:
            return 0
        hashes = got
    # one queue's records in slice order, its units written whole (``ConsumeQueue.put_units``)
    p = len(set(qids))
    if qids[p:] == qids[:-p]:
        # the queues in turn (a producer's round robin): queue k's records are every p-th
        # from the k-th, written by one call; a queue it leaves (and those after) by C-level
        # slices
        for k in range(put_in_turn(list(map(queues.get, qids[:p])), phys, sizes, qoffs, tss), p):
            offs = qoffs[k::p]
            m = len(offs)
            if (
                (cq := queues.get(qids[k])) is None
                or offs[-1] - offs[0] != m - 1
                or not cq.put_units(phys[k::p], sizes[k::p], None, offs[0], tss[k + (m - 1) * p])
            ):
                _put_units(d, queues, topic, qids[k], phys[k::p], sizes[k::p], offs, tss[k::p])
    else:
        take = itemgetter(*sorted(range(n), key=qids.__getitem__))  # (a stable sort)
        by_qid = take(qids)
        q_phys = take(phys)
        q_sizes = take(sizes)
        q_offs = take(qoffs)
        q_tss = take(tss)
        i = 0
        while i < n:
            j = bisect_right(by_qid, by_qid[i], i)
            _put_units(d, queues, topic, by_qid[i], q_phys[i:j], q_sizes[i:j], q_offs[i:j], q_tss[i:j])
            i = j
    pending.clear()
    d.reput_from_offset = end
    if indexed:
        backlog = d.index_backlog
        if backlog is None:
            backlog = (hashes, list(phys), list(tss))
            d.index_backlog = backlog
        else:
            backlog[0].extend(hashes)
            backlog[1].extend(phys)
            backlog[2].extend(tss)
        d.backlog_timestamp = tss[-1]
        # the last key's head and its part for ``reput_one`` and ``reput_appended`` (``_KEPT``)
        key = props[-1][_UNIQ_LEN:cut]
        if (part := heads.get(head := key[:-2])) is not None:
            h26 = heads.get(key[:-6])
            _KEPT[0] = (topic, head, part, None, 0) if h26 is None else (topic, head, part, key[:-6], h26)
        if len(backlog[0]) >= INDEX_RUN:
            d.write_index_backlog()
    else:
        d.last_dispatched_timestamp = tss[-1]
    return n


def _put_units(
    d: ReputState,
    queues: dict[int, ConsumeQueue],
    topic: str,
    qid: int,
    phys: tuple[int, ...],
    sizes: tuple[int, ...],
    offs: tuple[int, ...],
    tss: tuple[int, ...],
) -> None:
    """``reput_run``'s units of one queue (its records in slice order): one ``put_units``
    when they are the consecutive next units of its last file, else ``put`` one by one."""
    cq = queues.get(qid)
    if cq is None:  # (once per queue: its first record)
        cq = d.cq_table.find_or_create(topic, qid)
    if offs[-1] - offs[0] != len(offs) - 1 or not cq.put_units(phys, sizes, None, offs[0], tss[-1]):
        for phy, size, qoff, ts in zip(phys, sizes, offs, tss, strict=True):
            cq.put(phy, size, 0, qoff, ts)
