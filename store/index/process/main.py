"""The index process: builds IndexFiles on a second core (``indexProcessEnable``).

Started by the store (``index.process.control.IndexProcess``) as ``python -m pocketmq.store.index.process.main``
after recovery, with the offset where the index ends. It maps CommitLog segments read-only,
indexes every record below the store's published DISPATCHED offset (``index.scan``: the same
entries reput would write in process), and publishes INDEXED after each chunk (state layout:
``index.process.ipc``). It owns the last index file and the ones it creates; older files are the
store's (it may delete them). Every ``--flush-ms`` it fsyncs what it wrote and publishes
FLUSHED_TS, which the store copies into the checkpoint's indexMsgTimestamp.

Wake-ups come on an eventfd (one write per reput slice). The child exits after STOP (index
to DISPATCHED, flush), on EOF of ``--parent-fd`` (the store died: write the header, exit), or
on its parent's death signal.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import logging
import mmap
import os
import select
import signal
import sys
import time
from collections.abc import Sequence

from pocketmq.store.clock import now_ms
from pocketmq.store.index.file import IndexFile, IndexService
from pocketmq.store.index.process.ipc import (
    DISPATCHED,
    FLUSHED_TS,
    INDEXED,
    INDEXED_TS,
    PID,
    STOP,
    SharedState,
    lock_path,
    state_path,
)
from pocketmq.store.index.scan import KeyHashCache, index_range, settle_last_files
from pocketmq.store.log.layout import file_name_of

__all__ = ["SegmentReader", "load_last", "main"]

logger = logging.getLogger("pocketmq.store.index.process.main")

#: CommitLog bytes per chunk: INDEXED is published (and the parent checked) after each
CHUNK = 2 << 20
_PR_SET_PDEATHSIG = 1


class SegmentReader:
    """CommitLog segments mapped read-only on demand (``index.scan.SegmentFinder``)."""

    def __init__(self, directory: str, file_size: int) -> None:
        self.dir = directory
        self.file_size = file_size
        self.maps: dict[int, mmap.mmap] = {}

    def __call__(self, offset: int) -> tuple[mmap.mmap, int, int] | None:
        size = self.file_size
        base = offset - offset % size
        mm = self.maps.get(base)
        if mm is None:
            mm = self._map(base)
            if mm is None:  # deleted by retention: the next segment that exists
                later = sorted(b for b in self._bases() if b > base)
                if not later:
                    return None
                base = later[0]
                mm = self._map(base)
                if mm is None:
                    return None
        return mm, base, size

    def _bases(self) -> list[int]:
        return [int(n) for n in os.listdir(self.dir) if len(n) == 20 and n.isdigit()]

    def _map(self, base: int) -> mmap.mmap | None:
        try:
            fd = os.open(os.path.join(self.dir, file_name_of(base)), os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            mm = mmap.mmap(fd, self.file_size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        self.maps[base] = mm
        return mm

    def release_below(self, offset: int) -> None:
        for base in [b for b in self.maps if b + self.file_size <= offset]:
            self.maps.pop(base).close()

    def close(self) -> None:
        self.release_below(1 << 62)


def load_last(index: IndexService) -> int | None:
    """Open only the newest index file, trusting the headers: what a killed child wrote past
    them is undone and indexed again. While the newest files hold no entry, the ones before
    are opened too, for ``settle_last_files`` (then closed). Returns where indexing must
    resume at the latest, or None."""
    try:
        names = sorted(n for n in os.listdir(index.dir) if len(n) == 17 and n.isdigit())
    except FileNotFoundError:
        return None
    files: list[IndexFile] = []
    for name in reversed(names):
        path = os.path.join(index.dir, name)
        files.insert(0, IndexFile(path, index.slot_num, index.index_num, create=False, adopt=False))
        if files[0].index_count > 1:
            break
    redo = settle_last_files(files)
    while len(files) > 1:
        files.pop(0).mf.close()
    index.files.extend(files)
    return redo


class _Child:
    def __init__(self, args: argparse.Namespace) -> None:
        self.state = SharedState(state_path(args.index_dir), create=False)
        self.index = IndexService(args.index_dir, args.slots, args.entries, now_ms)
        redo = load_last(self.index)
        self.reader = SegmentReader(args.commitlog_dir, args.segment_size)
        self.cache = KeyHashCache()
        self.cache.prefill()
        self.offset = args.start if redo is None else min(args.start, redo)
        self.flush_s = args.flush_ms / 1000
        self.last_flush = time.monotonic()
        self.indexed_ts = self.flushed_ts = self.state.slots[FLUSHED_TS]
        self.poller = select.poll()
        self.wake_fd = args.wake_fd
        self.parent_fd = args.parent_fd
        self.poller.register(self.wake_fd, select.POLLIN)
        self.poller.register(self.parent_fd, select.POLLIN)

    def run(self) -> int:
        slots = self.state.slots
        slots[INDEXED] = self.offset
        slots[PID] = os.getpid()
        while True:
            target = slots[DISPATCHED]
            if self.offset < target:
                self.step(min(target, self.offset + CHUNK))
                if self._parent_gone(0):
                    return 0
                continue
            if slots[STOP]:
                self.flush()
                return 0
            now = time.monotonic()
            if now - self.last_flush >= self.flush_s:
                self.flush()
                now = self.last_flush
            if self._parent_gone(max(1, int((self.last_flush + self.flush_s - now) * 1000))):
                return 0

    def step(self, stop: int) -> None:
        off, ts = index_range(self.reader, self.index, self.cache, self.offset, stop)
        if off == self.offset:
            # nothing below DISPATCHED where it must be: never spin on it
            logger.error("index process: no CommitLog segment for offset %d", off)
            time.sleep(0.1)
            return
        self.offset = off
        slots = self.state.slots
        if ts:
            self.indexed_ts = ts
            slots[INDEXED_TS] = ts
        slots[INDEXED] = off
        self.reader.release_below(off)
        if len(self.index.files) > 1 or time.monotonic() - self.last_flush >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        """fsync the files written since the last flush; files before the last are closed."""
        index = self.index
        ts = self.indexed_ts
        index.write_headers()
        for f in index.files:
            f.mf.fsync()
        while len(index.files) > 1:
            index.files.pop(0).mf.close()
        index.full_unflushed.clear()
        self.last_flush = time.monotonic()
        if ts != self.flushed_ts:
            self.flushed_ts = ts
            self.state.slots[FLUSHED_TS] = ts

    def _parent_gone(self, timeout_ms: int) -> bool:
        """Wait up to ``timeout_ms`` for a wake-up; True if the store has gone away."""
        for fd, _ev in self.poller.poll(timeout_ms):
            if fd == self.parent_fd:
                self.index.write_headers()  # (no fsync: the store's recovery takes over)
                return True
            try:
                os.eventfd_read(fd)
            except BlockingIOError:
                pass
        return False

    def close(self) -> None:
        self.index.close()
        self.reader.close()
        self.state.close()


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m pocketmq.store.index.process.main")
    p.add_argument("--index-dir", required=True)
    p.add_argument("--commitlog-dir", required=True)
    p.add_argument("--segment-size", type=int, required=True)
    p.add_argument("--slots", type=int, required=True)
    p.add_argument("--entries", type=int, required=True)
    p.add_argument("--start", type=int, required=True)
    p.add_argument("--flush-ms", type=int, required=True)
    p.add_argument("--wake-fd", type=int, required=True)
    p.add_argument("--parent-fd", type=int, required=True)
    p.add_argument("--pdeathsig", action="store_true")
    p.add_argument("--log-level", default="INFO", help="the store's effective level (DEBUG, INFO, ...)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    # the servers' stderr format (``remoting.common.logsetup``) at the store's level; "index
    # process" in each line tells it from the broker's own lines on the same stream
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        format=f"%(asctime)s %(levelname)-5s [%(name)s] (index process {os.getpid()}) %(message)s",
        stream=sys.stderr,
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is the store's to handle
    if args.pdeathsig:
        _die_with_parent()
    lock_fd = os.open(lock_path(args.index_dir), os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(lock_fd, fcntl.LOCK_EX)
    gone = select.poll()
    gone.register(args.parent_fd, select.POLLIN)
    if gone.poll(0):  # the store died while we started (or waited for a predecessor)
        return 0
    child = _Child(args)
    try:
        return child.run()
    finally:
        child.close()
        os.close(lock_fd)


if __name__ == "__main__":
    sys.exit(main())
