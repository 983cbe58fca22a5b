"""The selection loop behind ``MessageStore.get_message`` (Java ``DefaultMessageStore.getMessage``).

Walks ConsumeQueue units from the requested offset, applies the filter (tags code, then the
record itself), stops at the transfer limits (count, bytes; stricter when the data is "on disk",
i.e. further than ``accessMessageInMemoryMaxRatio`` of RAM behind the CommitLog end), skips
units whose record was deleted (MESSAGE_WAS_REMOVING, jumping to the next segment) and copies
the selected records out of the mapping once, contiguous ranges merged.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from itertools import accumulate

from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.listener import MessageFilter
from pocketmq.store.log.layout import CQ_BLANK_SIZE, CQ_UNIT, CQ_UNIT_SIZE
from pocketmq.store.log.mapped_file import MappedFile
from pocketmq.store.log.mapped_file_queue import MappedFileQueue
from pocketmq.store.results import GetMessageStatus

_UNPACK_UNITS = CQ_UNIT.iter_unpack
_BLANK_UNIT = CQ_UNIT.pack(0, CQ_BLANK_SIZE, 0)
#: n -> the struct of n consecutive units (``_select_run``), kept for n up to _RUNS_KEPT: a
#: pull reads max_nums + 1 units (33 for the SDK's 32), and a struct takes ~34 bytes an item
#: (tracemalloc: 3.4 KB for 33 units; all of 2-801 kept would be ~33 MB, up to 64 ~0.2 MB)
_RUNS: dict[int, struct.Struct] = {}
_RUNS_KEPT = 64
_unpack_unit = CQ_UNIT.unpack_from
# (an Enum member read is ~0.6k instructions in 3.11: read once here)
_FOUND = GetMessageStatus.FOUND
_NO_MATCHED_MESSAGE = GetMessageStatus.NO_MATCHED_MESSAGE
_MESSAGE_WAS_REMOVING = GetMessageStatus.MESSAGE_WAS_REMOVING

#: ``(status, scanned, body, count, max_phy_pulling, offsets)``: ``scanned`` units were consumed
#: (the next pull starts this far after the requested offset). A tuple, not a dataclass: built
#: per pull (~3k instructions less than its ``__init__``)
Selection = tuple[GetMessageStatus, int, bytes, int, int, list[int]]


def select_messages(
    units: bytes,
    max_nums: int,
    max_bytes: int | None,
    message_filter: MessageFilter | None,
    mfq: MappedFileQueue,
    cfg: MessageStoreConfig,
    mem_limit: int,
    max_phy: int,
) -> Selection:
    if message_filter is None and len(units) == CQ_UNIT_SIZE:
        # one unit, no filter (a held pull woken by its message: one a delivery at one send
        # in flight): what the loop below finds for it, without its setup. The first message
        # is taken whatever the limits, as in the loop; its record is in the CommitLog's last
        # file unless it rolled since
        phy, size, _ = _unpack_unit(units)
        if size == CQ_BLANK_SIZE:
            return _NO_MATCHED_MESSAGE, 1, b"", 0, 0, []
        files = mfq.files
        if files:
            seg = files[-1]
            pos = phy - seg.file_from_offset
            if pos < 0:
                found = mfq.find_by_offset(phy)
                if found is None:
                    return _MESSAGE_WAS_REMOVING, 1, b"", 0, phy, []
                seg = found
                pos = phy - seg.file_from_offset
            if pos + size <= seg.wrote_position:
                return _FOUND, 1, seg.mm[pos : pos + size], 1, phy, [phy]
        return _MESSAGE_WAS_REMOVING, 1, b"", 0, phy, []
    if message_filter is None and len(units) > CQ_UNIT_SIZE:
        got = _select_run(units, max_nums, max_bytes, mfq, cfg, mem_limit, max_phy)
        if got is not None:
            return got
    status = _NO_MATCHED_MESSAGE
    cap_mem_bytes, cap_mem_count = (
        cfg.max_transfer_bytes_on_message_in_memory,
        cfg.max_transfer_count_on_message_in_memory,
    )
    cap_disk_bytes, cap_disk_count = (
        cfg.max_transfer_bytes_on_message_in_disk,
        cfg.max_transfer_count_on_message_in_disk,
    )
    if max_bytes is not None:
        cap_mem_bytes = min(cap_mem_bytes, max_bytes)
        cap_disk_bytes = min(cap_disk_bytes, max_bytes)
    runs: list[tuple[MappedFile, int, int]] = []  # contiguous (file, start, end) ranges
    last_mf: MappedFile | None = None
    last_end = -1
    offsets: list[int] = []
    total = 0
    count = 0
    skip_below = -1
    max_phy_pulling = 0
    scanned = 0
    for phy, size, tags in _UNPACK_UNITS(units):
        if size == CQ_BLANK_SIZE:
            scanned += 1
            continue
        max_phy_pulling = phy
        if phy < skip_below:
            scanned += 1
            continue
        if count:
            if count >= max_nums:
                break
            if max_phy - phy > mem_limit:
                if total + size > cap_disk_bytes or count >= cap_disk_count:
                    break
            elif total + size > cap_mem_bytes or count >= cap_mem_count:
                break
        scanned += 1
        if message_filter is not None and not message_filter.is_matched_by_consume_queue(tags):
            continue
        mf = mfq.find_by_offset(phy)
        pos = phy - mf.file_from_offset if mf is not None else 0
        if mf is None or pos + size > mf.wrote_position:
            if not count:
                status = _MESSAGE_WAS_REMOVING
            skip_below = mfq.roll_next_file(phy)
            continue
        if message_filter is not None and not message_filter.is_matched_by_commit_log(
            mf.mm[pos : pos + size]
        ):
            if not count:
                status = _NO_MATCHED_MESSAGE
            continue
        if mf is last_mf and pos == last_end:
            last_end = pos + size
            runs[-1] = (mf, runs[-1][1], last_end)
        else:
            runs.append((mf, pos, pos + size))
            last_mf, last_end = mf, pos + size
        offsets.append(phy)
        total += size
        count += 1
        status = _FOUND
        skip_below = -1
    if count == 0:
        body = b""
    elif len(runs) == 1:
        mf0, a, b = runs[0]
        body = mf0.mm[a:b]  # one copy out of the mapping
    else:
        body = b"".join([r[0].mm[r[1] : r[2]] for r in runs])
    return status, scanned, body, count, max_phy_pulling, offsets


def _select_run(
    units: bytes,
    max_nums: int,
    max_bytes: int | None,
    mfq: MappedFileQueue,
    cfg: MessageStoreConfig,
    mem_limit: int,
    max_phy: int,
) -> Selection | None:
    """``select_messages``' loop for units without a filter (a drain's pulls), by C-level
    steps: the units it reads unpacked at once, how many it takes from their sizes'
    running total, their records sliced from one CommitLog file. None, with nothing done,
    unless it can say exactly what the loop selects: no blank unit among them, every record
    in memory (the memory limits then hold for each) and in one written CommitLog file;
    the loop then runs (a deleted file, records on disk, blanks)."""
    cap_bytes = cfg.max_transfer_bytes_on_message_in_memory
    if max_bytes is not None and max_bytes < cap_bytes:
        cap_bytes = max_bytes
    # the units the loop reads: those it takes (the first whatever the limits, at most
    # max_nums and the count limit) and the one it stops at, whose offset it reports
    n = len(units) // CQ_UNIT_SIZE
    most = min(max_nums, cfg.max_transfer_count_on_message_in_memory)
    m = most + 1 if most < n else n
    if m < 2:  # noqa: PLR1730 - no builtin call per pull
        m = 2  # (the first unit is taken whatever the limits; n > 1)
    if units.find(_BLANK_UNIT, 0, m * CQ_UNIT_SIZE) >= 0:
        return None
    fields = _units_struct(m).unpack_from(units)
    phys = fields[0::3]
    sizes = fields[1::3]
    if max_phy - min(phys) > mem_limit:
        return None
    # message j > 0 is taken while j < most and the running total through it fits cap_bytes
    totals = list(accumulate(sizes))
    taken = bisect_right(totals, cap_bytes)
    if taken > most:  # noqa: PLR1730
        taken = most
    if taken < 1:  # noqa: PLR1730 - (the first is taken whatever the limits)
        taken = 1
    first = phys[0]
    seg = mfq.find_by_offset(first)
    if seg is None:
        return None
    base = seg.file_from_offset
    offsets = list(phys[:taken])
    mm = seg.mm
    if (taken == 1 or offsets[-1] - first == totals[taken - 2]) and list(
        accumulate(sizes[: taken - 1], initial=first)
    ) == offsets:
        # one run of records, each starting where the one before ends (a batch's: one copy,
        # as the loop's merged range; the last's start checked first, then every one)
        end = first + totals[taken - 1]
        if first < base or end > base + seg.wrote_position:
            return None
        body = mm[first - base : end - base]
    else:
        if min(offsets) < base or max(offsets) + max(sizes[:taken]) > base + seg.wrote_position:
            return None
        body = b"".join([mm[p - base : p - base + size] for p, size in zip(offsets, sizes, strict=False)])
    return _FOUND, taken, body, taken, phys[taken] if taken < m else phys[-1], offsets


def _units_struct(n: int) -> struct.Struct:
    st = _RUNS.get(n)
    if st is None:
        st = struct.Struct(">" + "qiq" * n)
        if n <= _RUNS_KEPT:
            _RUNS[n] = st
    return st
