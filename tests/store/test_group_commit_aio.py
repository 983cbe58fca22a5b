"""SYNC_FLUSH group commit through kernel AIO fdatasync (store/aio_fsync.py).

The thread path is covered by test_store_services.py (those tests switch AIO off to inject
faults into ``_fsync_all``); here the same guarantees hold with the fsyncs queued to the kernel:
waiters are answered only after their bytes are synced, an fsync error is retried and never
acknowledged, a stuck fsync times out, and a kernel without AIO fsync falls back to the thread.
"""

from __future__ import annotations

import asyncio
import errno
import os
import platform
import select
import sys

import pytest

from pocketmq.store import MessageStore, PutMessageStatus
from pocketmq.store.aio_fsync import AioFsync, open_aio_fsync
from pocketmq.store.services import flush as flush_module

from .conftest import make_msg, tiny_config

#: the machines pocketmq's brokers run on; elsewhere open_aio_fsync() is None by design
LINUX_AIO = sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64")


async def _started(root: str, **overrides: object) -> MessageStore:
    store = MessageStore(tiny_config(root, flush_disk_type="SYNC_FLUSH", **overrides))
    store.load()
    await store.start()
    return store


def _wait(aio: AioFsync, expected: int) -> list[int]:
    out: list[int] = []
    while len(out) < expected:
        ready, _, _ = select.select([aio.fd], [], [], 5.0)
        assert ready, "no AIO completion within 5 s"
        out += aio.reap()
    return out


def test_fdatasync_through_aio_reports_each_result(tmp_path):
    aio = open_aio_fsync()
    if not LINUX_AIO:
        assert aio is None
        return
    assert aio is not None
    try:
        fds = [os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT, 0o644) for i in range(3)]
        for fd in fds:
            os.write(fd, b"x" * 5000)
        aio.submit(fds)
        assert aio.in_flight == 3
        assert _wait(aio, 3) == [0, 0, 0]
        assert aio.in_flight == 0 and aio.reap() == []  # nothing left, and no blocking
        with pytest.raises(OSError) as bad:
            aio.submit([10_000])  # not an open fd: refused at submit, nothing in flight
        assert bad.value.errno == errno.EBADF and aio.in_flight == 0
        with pytest.raises(OSError):
            aio.submit(fds * 6)  # more than the context's depth
        for fd in fds:
            os.close(fd)
    finally:
        aio.close()
    aio.close()  # idempotent


async def test_group_commit_uses_aio_and_acknowledges_after_the_sync(tmp_path, monkeypatch):
    if not LINUX_AIO:
        pytest.fail("pocketmq's SYNC_FLUSH path is tested on Linux x86_64/aarch64")
    threaded: list[list[int]] = []
    real = flush_module._fsync_all

    def recording(fds: list[int]) -> None:
        threaded.append(fds)
        real(fds)

    monkeypatch.setattr(flush_module, "_fsync_all", recording)
    store = await _started(str(tmp_path / "s"))
    gc = store._services.group_commit  # type: ignore[union-attr]
    assert gc._aio is not None
    submitted: list[list[int]] = []
    real_submit = gc._aio.submit

    def counting(fds: list[int]) -> None:
        submitted.append(list(fds))
        real_submit(fds)

    gc._aio.submit = counting  # type: ignore[method-assign]

    async def worker(k: int) -> None:
        for i in range(20):
            r = await store.put_message_async(make_msg(k * 100 + i, queue_id=k % 4))
            assert r.status is PutMessageStatus.PUT_OK
            assert r.append is not None
            # answered only once synced: the flushed position covers this message
            assert store.commitlog.mfq.flushed_where >= r.append.wrote_offset + r.append.wrote_bytes

    await asyncio.gather(*(worker(k) for k in range(32)))
    assert gc.pending == 0
    assert 1 <= len(submitted) < 640 // 4  # group commit: one fsync serves many waiters
    commitlog_fds = {mf.fd for mf in store.commitlog.mfq.files}
    # no CommitLog fsync went through the thread (ConsumeQueue/index flushes still do)
    assert not any(commitlog_fds & set(fds) for fds in threaded)
    await store.shutdown()
    assert gc._aio is None  # context and eventfd released on stop


async def test_aio_fsync_error_is_retried_not_acknowledged(tmp_path):
    store = await _started(str(tmp_path / "s"), sync_flush_timeout=3000)
    gc = store._services.group_commit  # type: ignore[union-attr]
    if gc._aio is None:
        pytest.fail("kernel AIO fdatasync expected on this machine")
    real_reap = gc._aio.reap
    failed: list[int] = []

    def eio_once() -> list[int]:
        results = real_reap()
        if results and not failed:
            failed.append(1)
            return [-errno.EIO] + results[1:]
        return results

    gc._aio.reap = eio_once  # type: ignore[method-assign]
    r = await store.put_message_async(make_msg(0))
    assert failed, "the injected EIO was not seen"
    assert r.status is PutMessageStatus.PUT_OK  # acknowledged only by the retried fsync
    assert r.append is not None
    assert store.commitlog.mfq.flushed_where >= r.append.wrote_offset + r.append.wrote_bytes
    await store.shutdown()


async def test_a_stuck_aio_fsync_times_out_as_flush_disk_timeout(tmp_path):
    store = await _started(str(tmp_path / "s"), sync_flush_timeout=100)
    gc = store._services.group_commit  # type: ignore[union-attr]
    if gc._aio is None:
        pytest.fail("kernel AIO fdatasync expected on this machine")
    real_on_aio = gc._on_aio
    held = asyncio.Event()

    def late() -> None:  # the completion is noticed only when the test allows it
        if held.is_set():
            real_on_aio()

    loop = asyncio.get_running_loop()
    loop.remove_reader(gc._aio.fd)
    loop.add_reader(gc._aio.fd, late)
    r = await store.put_message_async(make_msg(0))
    assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert r.is_ok and r.append is not None  # stored, not confirmed on disk
    held.set()
    real_on_aio()
    await store.shutdown()


async def test_kernel_without_aio_fsync_falls_back_to_the_thread(tmp_path, monkeypatch):
    store = await _started(str(tmp_path / "s"))
    gc = store._services.group_commit  # type: ignore[union-attr]
    if gc._aio is None:
        pytest.fail("kernel AIO fdatasync expected on this machine")

    def refused(fds: list[int]) -> None:  # what a kernel < 4.18 answers IOCB_CMD_FDSYNC
        raise OSError(errno.EINVAL, "Invalid argument")

    gc._aio.submit = refused  # type: ignore[method-assign]
    threaded: list[list[int]] = []
    real = flush_module._fsync_all

    def recording(fds: list[int]) -> None:
        threaded.append(fds)
        real(fds)

    monkeypatch.setattr(flush_module, "_fsync_all", recording)
    for i in range(3):
        r = await store.put_message_async(make_msg(i))
        assert r.status is PutMessageStatus.PUT_OK
    assert gc._aio is None  # given up for good, not tried per round
    assert threaded  # the rounds were synced by the thread
    await store.shutdown()
