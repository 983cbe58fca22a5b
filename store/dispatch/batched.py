"""Batch puts' dispatch for the reput fast path (``appended.reput_appended``): a batch entry's
ConsumeQueue units written by one ``pack_into`` (``ConsumeQueue.put_run``), its tagsCodes and
index hashes from its records' properties -- parsed once a batch where the body's records share
their shape (``_body_codes``; UNIQ_KEYs hashed per run of one head by C-level maps,
``same_head_hashes``), else record by record (``_parsed_codes``) -- and what it does not handle
split back into per-record entries (``split_batch``).
"""

from __future__ import annotations

import struct
from itertools import accumulate, repeat
from operator import add, itemgetter, sub
from typing import TYPE_CHECKING

from pocketmq.remoting.protocol.message import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from pocketmq.store.dispatch.props_fields import (
    KEYS_NEEDLE,
    NO_PROPERTIES,
    TAG_CODES,
    TAGS_NEEDLE,
    UNIQ_NEEDLE,
    LazyProperties,
    tag_code,
)
from pocketmq.store.index.hash import TAIL_TABLE, topic_key_hash, uniq_key_hash
from pocketmq.store.log.batch_encode import BodyStrings
from pocketmq.store.log.commitlog import AppendedRecord, BatchFields
from pocketmq.store.log.layout import SCHEDULE_TOPIC

if TYPE_CHECKING:
    from pocketmq.store.dispatch.appended import ReputState

__all__ = [
    "TX_MASK",
    "UNIQ_LEN",
    "UNIQ_ONLY",
    "UNQUEUED",
    "dispatch_batch",
    "one_head_hashes",
    "same_head_hashes",
    "split_batch",
]

TX_MASK = TRANSACTION_ROLLBACK_TYPE
#: prepared and rolled-back transaction records get no ConsumeQueue unit
UNQUEUED = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
#: a properties string with UNIQ_KEY first starts so
UNIQ_ONLY = UNIQ_NEEDLE[1:]
UNIQ_LEN = len(UNIQ_ONLY)
#: a properties string with TAGS first starts so (the SDK's with tags: TAGS, then UNIQ_KEY)
_TAGS_ONLY = TAGS_NEEDLE[1:]
_TAGS_LEN = len(_TAGS_ONLY)


def split_batch(rec: AppendedRecord, batch: BatchFields) -> list[AppendedRecord]:
    """A batch entry as one entry per record (for what ``dispatch_batch`` does not handle)."""
    phy, _total, topic, qid, qoff, ts, sys_flag, _prepared, _props, _ = rec
    out: list[AppendedRecord] = []
    for size, props in zip(*batch, strict=True):
        out.append((phy, size, topic, qid, qoff, ts, sys_flag, 0, props, None))
        phy += size
        qoff += 1
    return out


def dispatch_batch(
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
    ``waiting``: the listener's ``held_queues`` (``appended.reput_appended``): while it is empty no
    listener is called, as for a single record.

    Returns the number of records, or 0 (nothing done) for a batch of transaction records
    or on the schedule topic, which the caller splits into per-record entries.
    """
    phy, total, topic, qid, qoff, ts, sys_flag, _prepared, _props, _ = rec
    if sys_flag & TX_MASK in UNQUEUED or topic == SCHEDULE_TOPIC:
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
    if first[:UNIQ_LEN] == UNIQ_ONLY:
        lead = UNIQ_LEN
    elif first[:_TAGS_LEN] == _TAGS_ONLY and first[(e := first.find("\x02")) + 1 :][:UNIQ_LEN] == UNIQ_ONLY:
        own_tags = first[_TAGS_LEN:e]
        lead = e + 1 + UNIQ_LEN
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
            same := same_head_hashes(joined, n, len(first) + 1, lead, len(first) - lead - cut, topic, heads)
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
#: a tail's two ASCII bytes ``a``, ``b`` read as one big-endian 16-bit value -> its part of the
#: hash, ``31 * a + b`` (a list read by its C-level ``__getitem__``; a non-ASCII byte never
#: comes here: ``same_head_hashes`` checks the string)
_TAIL_PARTS = [31 * (v >> 8) + (v & 0xFF) if v & 0x80 == 0 else 0 for v in range(0x8000)]
#: (string stride w, keys m) -> the struct reading m tails, one every w bytes (``_tails_struct``)
_TAILS: dict[tuple[int, int], struct.Struct] = {}


def _tails_struct(w: int, m: int) -> struct.Struct:
    st = _TAILS.get((w, m))
    if st is None:
        st = struct.Struct(">" + f"H{w - 2}x" * (m - 1) + "H")
        if len(_TAILS) < 1024:  # (a few shapes and slice lengths)
            _TAILS[w, m] = st
    return st


def same_head_hashes(
    joined: str, n: int, w: int, lead: int, size: int, topic: str, heads: dict[str, int]
) -> list[int] | None:
    """The index hashes (``topic_key_hash`` each) of ``n`` UNIQ_KEYs of ``size`` characters in
    ``joined``, ``n`` strings of ``w - 1`` characters joined with NULs (a batch body's
    properties, no NUL of their own: ``checked_body``), each key at ``lead`` in its string,
    when all is ASCII and the keys come in runs of one head each (all but the last two
    characters: a batch's messages are made in a millisecond or two, its counter's high byte
    changes once every 256), computed by C-level maps per run (``_run_hashes``). None, with
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
        if not _run_hashes(out, joined, raw, start, lead, at, w, j - i, topic, heads):
            return None
        i = j
    return out


def one_head_hashes(
    joined: str, raw: bytes, n: int, w: int, lead: int, size: int, topic: str, heads: dict[str, int]
) -> list[int] | None:
    """``same_head_hashes`` of strings the caller has checked are ASCII (``raw``: their
    bytes), of ``w - 1`` characters each and all alike up to their keys' tails (one run:
    ``appended.reput_run``'s compare): no check of its own."""
    if size < 6:
        return None
    out: list[int] = []
    if not _run_hashes(out, joined, raw, 0, lead, lead + size - 2, w, n, topic, heads):
        return None
    return out


def _run_hashes(
    out: list[int],
    joined: str,
    raw: bytes,
    start: int,
    lead: int,
    at: int,
    w: int,
    m: int,
    topic: str,
    heads: dict[str, int],
) -> bool:
    """Extend ``out`` by the hashes of ``m`` keys of one head, the first in the string at
    ``start`` of ``joined`` (ASCII; ``raw`` its bytes), each in a string of ``w`` with its
    NUL: the head's part ``hv`` is looked up once, a tail's part is ``31 * a + b`` of its two
    bytes, and when ``hv`` plus any tail's part stays on one side of 2**31 (all but ~1 run in
    500,000) the folded hash is ``hv + t`` (below) or ``2**32 - hv - t`` (above) for every
    key. False, ``out`` as it was, for a run across 2**31."""
    head = joined[start + lead : start + at]
    hv = heads.get(head)
    if hv is None:
        # (it fills the head's part in, as the loop's miss)
        uniq_key_hash(topic, joined[start + lead : start + at + 2])
        if (hv := heads.get(head)) is None:
            return False
    if not (hv + _ASCII_TAIL_MAX < 0x80000000 or (hv > 0x80000000 and hv + _ASCII_TAIL_MAX <= 0xFFFFFFFF)):
        return False
    # the run's tails as 16-bit values by one unpack, their parts by one C-level itemgetter
    # over ``_TAIL_PARTS`` (three maps of operator calls cost ~400 instructions a key more)
    parts = itemgetter(*_tails_struct(w, m).unpack_from(raw, start + at))(_TAIL_PARTS)
    if m == 1:
        parts = (parts,)
    if hv < 0x80000000:
        out += map(add, parts, repeat(hv))
    else:
        out += map(sub, repeat(0x100000000 - hv), parts)
    return True
