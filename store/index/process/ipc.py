"""What the store and its index process (``index.process.main``) share: one 64-byte state file.

``index/indexproc.state``, mapped by both, eight native int64 slots (8-byte aligned, so each
store is one machine store and a reader never sees half of one)::

    0 DISPATCHED   store -> child   reput's offset: the records below it are complete
    1 STOP         store -> child   1: index up to DISPATCHED, flush, exit
    2 INDEXED      child -> store   every record below it is indexed, its header written
    3 INDEXED_TS   child -> store   store time of the last record indexed
    4 FLUSHED_TS   child -> store   store time of the last record whose entries are fsynced
    5 PID          child -> store   the child's pid once it has loaded (0 before)
    6 STARTS       store            how many children were started (diagnostics)

The child writes entries, then the index header, then INDEXED (x86 keeps stores in order, so
whoever sees INDEXED sees the header, and whoever sees a header's count sees its entries).
``index/indexproc.lock`` is flock()ed by a running child: the store takes it briefly before
loading the index, so a child left over from a killed store has exited first.
"""

from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import time

__all__ = [
    "DISPATCHED",
    "FLUSHED_TS",
    "INDEXED",
    "INDEXED_TS",
    "PID",
    "STARTS",
    "STOP",
    "SharedState",
    "lock_path",
    "state_path",
    "wait_unlocked",
]

DISPATCHED, STOP, INDEXED, INDEXED_TS, FLUSHED_TS, PID, STARTS = range(7)
_SLOTS = 8
_SIZE = _SLOTS * 8


def state_path(index_dir: str) -> str:
    return os.path.join(index_dir, "indexproc.state")


def lock_path(index_dir: str) -> str:
    return os.path.join(index_dir, "indexproc.lock")


class SharedState:
    """The state file mapped; ``slots[i]`` reads or writes one slot."""

    __slots__ = ("_mm", "slots")

    def __init__(self, path: str, *, create: bool) -> None:
        fd = os.open(path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        try:
            if create:
                os.ftruncate(fd, _SIZE)
            self._mm = mmap.mmap(fd, _SIZE, flags=mmap.MAP_SHARED)
        finally:
            os.close(fd)
        self.slots = (ctypes.c_int64 * _SLOTS).from_buffer(self._mm)

    def reset(self, start: int) -> None:
        """A child is about to start at ``start`` (everything below it indexed)."""
        s = self.slots
        s[STOP] = 0
        s[PID] = 0
        s[INDEXED] = start
        s[DISPATCHED] = max(s[DISPATCHED], start)
        s[STARTS] += 1

    def close(self) -> None:
        del self.slots
        try:
            self._mm.close()
        except BufferError:  # a frame of a traceback still holds the view: unmapped at exit
            pass


def wait_unlocked(index_dir: str, timeout_s: float) -> bool:
    """Wait until no index process holds the lock (one of a killed store exits by itself)."""
    path = lock_path(index_dir)
    if not os.path.exists(path):
        return True
    fd = os.open(path, os.O_RDWR)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.01)
                continue
            fcntl.flock(fd, fcntl.LOCK_UN)
            return True
    finally:
        os.close(fd)
