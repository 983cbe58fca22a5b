"""SYNC_FLUSH writes the window ahead of the CommitLog writer as zeros (``allocate._zero_step``):
its extents are written ones before the writer reaches them, and only a window's worth is
(issue 23: segments stay sparse past what is written)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import struct

import pytest

from pocketmq.store import MessageStore, PutMessageStatus
from pocketmq.store.log.mapped_file import MappedFile
from pocketmq.store.services import allocate

from .conftest import make_msg, pull_all, tiny_config

FS_IOC_FIEMAP = 0xC020660B
FIEMAP_EXTENT_UNWRITTEN = 0x800
_HEAD = struct.Struct("=QQIIII")  # struct fiemap
_EXTENT = struct.Struct("=QQQ2Q I3I")  # struct fiemap_extent
_MAX_EXTENTS = 256


def _extents(path: str, start: int, length: int) -> list[tuple[int, int, int]]:
    """(logical offset, length, flags) of the file's extents in ``[start, start + length)``."""
    buf = bytearray(_HEAD.size + _EXTENT.size * _MAX_EXTENTS)
    _HEAD.pack_into(buf, 0, start, length, 0, 0, _MAX_EXTENTS, 0)
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
    finally:
        os.close(fd)
    count = _HEAD.unpack_from(buf, 0)[3]
    out = []
    for i in range(count):
        logical, _phys, size, _r1, _r2, flags, *_ = _EXTENT.unpack_from(buf, _HEAD.size + i * _EXTENT.size)
        out.append((logical, size, flags))
    return out


@pytest.fixture
def reports_unwritten(tmp_path) -> None:
    """Skip unless this file system reports fallocated blocks as unwritten extents (ext4, xfs)."""
    path = str(tmp_path / "probe")
    with open(path, "wb") as f:
        try:
            os.posix_fallocate(f.fileno(), 0, 1 << 20)
            ext = _extents(path, 0, 1 << 20)
        except OSError as exc:
            pytest.skip(f"no fallocate/FIEMAP here: {exc}")
    os.unlink(path)
    if not ext or not all(flags & FIEMAP_EXTENT_UNWRITTEN for _, _, flags in ext):
        pytest.skip("this file system does not report unwritten extents")


def _unwritten(path: str, end: int) -> list[tuple[int, int, int]]:
    return [e for e in _extents(path, 0, end) if e[2] & FIEMAP_EXTENT_UNWRITTEN]


async def _until(cond, timeout=10.0):
    async with asyncio.timeout(timeout):
        while not cond():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


@pytest.mark.usefixtures("reports_unwritten")
async def test_sync_flush_writes_the_window_ahead_of_the_writer_as_zeros(tmp_path):
    size = 64 << 20
    store = MessageStore(tiny_config(str(tmp_path / "s"), flush_disk_type="SYNC_FLUSH", mapped_file_size_commit_log=size))
    store.load()
    await store.start()
    try:
        r = await store.put_message_async(make_msg(0, body_size=1000))
        assert r.status is PutMessageStatus.PUT_OK
        first = store.commitlog.mfq.files[0].path
        window = allocate.PREFAULT_WINDOW
        # blocks reserved ahead of the writer are written ones once the window is zeroed
        def zeroed() -> bool:
            covered = sum(min(n, window - off) for off, n, _ in _extents(first, 0, window))
            return covered == window and not _unwritten(first, window)

        await _until(zeroed)
        # the message is intact (the zeros went only where nothing was written)
        await _until(lambda: store.dispatch_behind_bytes == 0)
        assert [m.body for m in pull_all(store, "TopicA", 0)] == [make_msg(0, body_size=1000).body]
        # and no more than a window's worth of blocks (plus the prepared next segment's)
        assert os.stat(first).st_blocks * 512 <= window + allocate.RESERVE_WINDOW
    finally:
        await store.shutdown()


@pytest.mark.usefixtures("reports_unwritten")
async def test_async_flush_leaves_reserved_blocks_unwritten(tmp_path):
    """ASYNC_FLUSH's flushes are rare and large: no zeros written ahead (twice the bytes)."""
    store = MessageStore(tiny_config(str(tmp_path / "s"), mapped_file_size_commit_log=64 << 20))
    store.load()
    await store.start()
    try:
        store.put_message(make_msg(0, body_size=1000))
        first = store.commitlog.mfq.files[0].path
        await _until(lambda: bool(_unwritten(first, allocate.RESERVE_WINDOW)))
    finally:
        await store.shutdown()


def test_zeroing_keeps_what_the_writer_wrote_and_skips_what_it_passed(tmp_path, reports_unwritten):
    step = allocate.PREFAULT_STEP
    mf = MappedFile(str(tmp_path / f"{0:020d}"), 0, 4 * step, create=True)
    try:
        mf.reserve(4 * step)
        allocate._advise(mf, allocate.MADV_RANDOM)
        mf.mm[0:5] = b"hello"
        mf.mm[step + 10 : step + 15] = b"world"
        mf.wrote_position = step + 15
        allocate._prefault_range(mf, 0, 4 * step, False, True)
        assert bytes(mf.mm[0:5]) == b"hello" and bytes(mf.mm[step + 10 : step + 15]) == b"world"
        # the first step was behind the writer: left to its own fsync (still unwritten)
        assert _unwritten(mf.path, step)
        assert not [e for e in _unwritten(mf.path, 4 * step) if e[0] + e[1] > step]
    finally:
        mf.close()


def _thread_faults() -> tuple[int, int]:
    """(minflt, majflt) of the calling thread."""
    with open("/proc/thread-self/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return int(fields[7]), int(fields[9])


def _zeroed_random_file(tmp_path, steps: int) -> MappedFile:
    """A fresh fallocated segment mapped MADV_RANDOM (the SYNC_FLUSH writer's), zeroed ahead."""
    mf = MappedFile(str(tmp_path / f"{0:020d}"), 0, steps * allocate.PREFAULT_STEP, create=True)
    mf.reserve(mf.file_size)
    allocate._advise(mf, allocate.MADV_RANDOM)
    return mf


def test_zeroing_takes_no_major_fault(tmp_path, reports_unwritten):
    """The window is read into the page cache before its populate: under MADV_RANDOM each page
    was otherwise a cache miss served in its fault, a major fault (4,096 per 16 MiB window,
    the broker's whole majflt under SYNC_FLUSH)."""
    steps = 4
    mf = _zeroed_random_file(tmp_path, steps)
    try:
        _, major0 = _thread_faults()
        allocate._prefault_range(mf, 0, mf.file_size, False, True)
        _, major1 = _thread_faults()
        pages = mf.file_size // 4096
        assert major1 - major0 < pages // 100  # was one per page
        assert not _unwritten(mf.path, mf.file_size)
    finally:
        mf.close()


def test_zeroing_maps_single_pages(tmp_path, reports_unwritten):
    """The readahead before the populate allocates order-0 pages: large folios (mmap
    readahead's) would make every SYNC_FLUSH fdatasync write back whole folios (18x the bytes)."""
    try:
        kpageflags = open("/proc/kpageflags", "rb")  # noqa: SIM115
    except OSError as exc:
        pytest.skip(f"needs /proc/kpageflags (root): {exc}")
    mf = _zeroed_random_file(tmp_path, 2)
    try:
        allocate._prefault_range(mf, 0, mf.file_size, False, True)
        base = allocate.syscalls.mmap_address(mf.mm) // 4096
        compound = present = 0
        with open("/proc/self/pagemap", "rb") as pagemap, kpageflags:
            for i in range(mf.file_size // 4096):
                pagemap.seek((base + i) * 8)
                entry = struct.unpack("<Q", pagemap.read(8))[0]
                if not entry >> 63:
                    continue
                present += 1
                kpageflags.seek((entry & ((1 << 55) - 1)) * 8)
                flags = struct.unpack("<Q", kpageflags.read(8))[0]
                compound += (flags >> 15) & 3  # KPF_COMPOUND_HEAD, KPF_COMPOUND_TAIL
        assert present == mf.file_size // 4096
        assert compound == 0
    finally:
        mf.close()
