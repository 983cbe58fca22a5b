"""The halves this broker stored lately, kept until their END_TRANSACTION names them.

A producer sends END_TRANSACTION a few milliseconds after its half was stored (the local
transaction runs in between). RocketMQ then reads the half back from the CommitLog and decodes
it; this process still holds what it wrote, so :meth:`RecentHalves.take` hands the commit the
stored fields without the read, the record decode and the property look-ups (on the bench's
path that was a third of END_TRANSACTION's broker time). The table is bounded by count and by
the bytes of the bodies it holds, oldest out first: halves a producer never resolves cannot make
it hold more than :data:`MAX_BYTES`. The committed copy and the op record
are the same bytes either way (``tests/broker/transaction/test_recent.py``).

What is not here goes the CommitLog way (``TransactionalMessageService.find_half``): a half
stored before a restart, a check-back copy, one pushed out by newer halves (at most
:data:`MAX_ENTRIES` and :data:`MAX_BYTES`; bodies over :data:`MAX_BODY` are not kept), one whose segment retention
has deleted (the caller checks the offset against the CommitLog's first), and a half prepared on
the SYNC_FLUSH / SYNC_MASTER path (its put result comes later).
"""

from __future__ import annotations

from pocketmq.store import MessageInner

__all__ = ["MAX_BODY", "MAX_BYTES", "MAX_ENTRIES", "Recent", "RecentHalves"]

#: halves remembered at once: END_TRANSACTIONs arrive about in prepare order, a few thousand in
#: flight is far more than producers keep, and a half never resolved falls out after this many
MAX_ENTRIES = 4096
#: bodies larger than this are read back instead
MAX_BODY = 16 << 10
#: the bodies held at once, in bytes (4096 x 1 KiB fit; without it 4096 x 16 KiB could be held)
MAX_BYTES = 8 << 20


#: a half as prepare stored it: (the message as put -- topic RMQ_SYS_TRANS_HALF_TOPIC, the
#: half's sysFlag --, its properties as stored, its queue offset, the transaction it belongs to
#: (``bookkeeping.transaction_offset``), the real topic, the real queue id, its PGROUP). A plain tuple: one
#: is made per prepare and unpacked once per END_TRANSACTION (a NamedTuple's constructor and
#: attribute reads cost about 0.3 us more per transaction)
Recent = tuple[MessageInner, str, int, int, str, int, str | None]


class RecentHalves:
    """CommitLog offset -> :data:`Recent`, oldest first, bounded (module docstring)."""

    __slots__ = ("bytes", "entries", "max_bytes", "max_entries")

    def __init__(self) -> None:
        #: (read directly by ``ends.RecentEnds.end_oneway_of``: one call less each)
        self.entries: dict[int, Recent] = {}
        #: the bodies held, in bytes
        self.bytes = 0
        #: the bounds (the module's, when made)
        self.max_entries = MAX_ENTRIES
        self.max_bytes = MAX_BYTES

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, commit_log_offset: int, recent: Recent) -> None:
        entries = self.entries
        size = len(recent[0].body)
        held = self.bytes + size
        while entries and (len(entries) >= self.max_entries or held > self.max_bytes):
            held -= len(entries.pop(next(iter(entries)))[0].body)
        entries[commit_log_offset] = recent
        self.bytes = held

    def get(self, commit_log_offset: int) -> Recent | None:
        return self.entries.get(commit_log_offset)

    def discard(self, commit_log_offset: int) -> None:
        gone = self.entries.pop(commit_log_offset, None)
        if gone is not None:
            self.bytes -= len(gone[0].body)

    def clear(self) -> None:
        self.entries.clear()
        self.bytes = 0
