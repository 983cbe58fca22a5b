"""The HA slave's write into its CommitLog: a verbatim copy of the master's bytes."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pocketmq.store.log.commitlog import CommitLog

__all__ = ["append_replicated"]


def append_replicated(log: CommitLog, start_offset: int, data: bytes | memoryview) -> bool:
    """HA seam: write replicated bytes at ``start_offset`` (must equal ``max_offset``, or be a
    segment boundary when the CommitLog is empty).

    The bytes are a verbatim copy of the master's CommitLog, BLANKs included, so file
    boundaries line up; records may be cut anywhere (reput waits for the rest).

    Raises:
        OSError: a segment could not be created.
    """
    # an empty slave starts wherever the master's transfer starts (a segment boundary: the
    # master begins a new slave at its last segment)
    empty_start = log.mfq.last is None and start_offset % log.mfq.file_size == 0
    if start_offset != log.max_offset and not empty_start:
        return False
    view = memoryview(data)
    off = start_offset
    while view:
        mf = log.mfq.last
        if mf is None or mf.is_full:
            mf = log.mfq.last_for_append(off)
        pos = off - mf.file_from_offset
        n = min(len(view), mf.file_size - pos)
        mf.ensure(pos + n)  # blocks first: a full disk is an OSError, not a SIGBUS
        mf.write(pos, view[:n], log.write_through)
        mf.wrote_position = pos + n
        view = view[n:]
        off += n
    return True
