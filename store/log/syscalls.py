"""Thin wrappers over the few Linux syscalls the store needs beyond ``os``.

``madvise`` and ``fallocate`` with a mode go through libc via ``ctypes`` because ctypes releases
the GIL for the call (``mmap.madvise`` does not, docs/development.md). Every wrapper degrades to a
portable fallback when the call or the flag is unavailable. These are blocking calls: services
run them in a worker thread; the synchronous core calls them directly.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os

MADV_WILLNEED = 3
MADV_POPULATE_READ = 22  # Linux >= 5.14
MADV_POPULATE_WRITE = 23  # Linux >= 5.14
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_ZERO_RANGE = 0x10
#: sync_file_range flags (linux/fs.h): wait for writeback already running, start it, wait for it
SYNC_FILE_RANGE_WAIT_BEFORE = 1
SYNC_FILE_RANGE_WRITE = 2
SYNC_FILE_RANGE_WAIT_AFTER = 4

_libc: ctypes.CDLL | None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    _libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    _libc.fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong)
except (OSError, AttributeError):  # pragma: no cover - non-glibc platforms
    _libc = None
_sync_file_range = getattr(_libc, "sync_file_range", None)  # (Linux only)
if _sync_file_range is not None:
    _sync_file_range.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint)

_UNSUPPORTED = {errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS}


def preallocate(fd: int, size: int) -> None:
    """Reserve real blocks for ``[0, size)`` so mapped writes cannot hit ENOSPC (SIGBUS).

    Raises ``OSError`` (ENOSPC on a full disk). File systems without fallocate get ftruncate.
    """
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED:
            raise
        os.ftruncate(fd, size)


def extend_sparse(fd: int, size: int) -> None:
    """Give the file its ``size`` without disk blocks (a sparse file, as RocketMQ's are)."""
    os.ftruncate(fd, size)


def allocate_range(fd: int, start: int, length: int) -> None:
    """Reserve real blocks for ``[start, start + length)`` before mapped writes reach it.

    Raises ``OSError`` (ENOSPC on a full disk: the caller refuses the write instead of taking
    a SIGBUS). File systems without fallocate get nothing (their writes are as before).
    """
    try:
        os.posix_fallocate(fd, start, length)
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED:
            raise


def mmap_address(mm: mmap.mmap) -> int:
    buf = (ctypes.c_char * 1).from_buffer(mm)
    try:
        return ctypes.addressof(buf)
    finally:
        del buf  # the exported buffer would block mm.close()


def madvise(mm: mmap.mmap, start: int, length: int, advice: int) -> bool:
    """libc madvise on part of a mapping (page-aligned start); False if unsupported."""
    if _libc is None or length <= 0:
        return False
    addr = mmap_address(mm) + start
    rc = _libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(length), advice)
    return bool(rc == 0)


def prefault(mm: mmap.mmap, length: int, *, write: bool, start: int = 0) -> None:
    """Populate page tables so the first appends do not take page faults on the hot path.

    READ maps the (zero) page-cache pages without dirtying them: the hot path is left with a
    cheap write-protect fault per page instead of an allocation fault. WRITE (Java's
    ``warmMapedFileEnable``) also dirties them, so zeros get written to disk once.
    """
    if not madvise(mm, start, length, MADV_POPULATE_WRITE if write else MADV_POPULATE_READ):
        madvise(mm, start, length, MADV_WILLNEED)


def write_back(fd: int, start: int, length: int) -> None:
    """Write the dirty pages of ``[start, start + length)`` to disk and wait for them
    (``sync_file_range``: no metadata, no cache flush; ``fdatasync`` where it is unavailable).

    Raises ``OSError`` (EIO...): an error it reports is consumed for ``fd``'s open file
    description only (errseq), so callers pass an fd of their own, not one a durability
    fsync uses.
    """
    if _sync_file_range is not None:
        how = SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER
        if _sync_file_range(fd, start, length, how) == 0:
            return
        err = ctypes.get_errno()
        if err not in _UNSUPPORTED:
            raise OSError(err, os.strerror(err))
    os.fdatasync(fd)


def zero_range(fd: int, mm: mmap.mmap, start: int, end: int) -> None:
    """Make ``[start, end)`` of a preallocated, mapped file read as zeros, keeping its blocks.

    Used after truncating to the last valid record: stale bytes beyond it must never be
    revived by a later recovery scan. Small ranges are memset; large ones use
    FALLOC_FL_ZERO_RANGE (or punch-hole + re-allocate), which costs no data writes.
    """
    if end <= start:
        return
    # skip the leading hole: after a crash the tail past the last record is usually never
    # written (an unwritten extent with no cached pages), so there is nothing to erase
    try:
        start = max(start, os.lseek(fd, start, os.SEEK_DATA))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return  # no data at all after ``start``
        if exc.errno not in _UNSUPPORTED:
            raise
    length = end - start
    if length <= 0:
        return
    if length <= 1 << 20 or _libc is None:
        _memset(mm, start, end)
        return
    if _libc.fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, start, length) == 0:
        return
    if _libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, start, length) == 0:
        try:
            os.posix_fallocate(fd, start, length)
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
        return
    _memset(mm, start, end)


def _memset(mm: mmap.mmap, start: int, end: int) -> None:
    chunk = bytes(min(end - start, 1 << 20))
    pos = start
    while pos < end:
        n = min(len(chunk), end - pos)
        mm[pos : pos + n] = chunk[:n] if n != len(chunk) else chunk
        pos += n


def fsync(fd: int) -> None:
    """Durability for mapped writes: on Linux a MAP_SHARED mapping shares the page cache."""
    os.fdatasync(fd)


def disk_usage_ratio(path: str) -> float:
    """Used fraction of the file system holding ``path`` (0.0-1.0), like Java's getDiskPartitionSpaceUsedPercent.

    A directory not created yet (a fresh store's commitlog/) is measured at its nearest
    existing parent: same file system, and tools then show a real ratio instead of -1.
    """
    probe = os.path.abspath(path)
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    st = os.statvfs(probe)
    total = st.f_blocks * st.f_frsize
    if total == 0:
        return 0.0
    free = st.f_bfree * st.f_frsize
    return (total - free) / total


def physical_memory() -> int:
    """Bytes of RAM (``accessMessageInMemoryMaxRatio`` is a share of it); 8 GiB if unknown."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover
        return 8 << 30


def short_write(fd: int, wrote: int, size: int) -> OSError:
    """The error for a ``pwrite`` to a CommitLog segment that wrote ``wrote`` of ``size`` bytes
    (regular files write all or fail: only a full disk or an I/O error stops one part way)."""
    return OSError(errno.EIO, f"short write to fd {fd}: {wrote} of {size} bytes")
