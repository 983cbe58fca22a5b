"""Async services: reput wake-up, async flush, group commit, WAIT=false, preallocation, cleanup,
disk full (injected ENOSPC), shutdown, runtime info; plus the pure retention decisions."""

from __future__ import annotations

import asyncio
import errno
import os
import threading

import pytest

from pocketmq.store import MessageStore, PutMessageStatus
from pocketmq.store.log import mapped_file as mapped_file_module
from pocketmq.store.services import allocate as allocate_module
from pocketmq.store.services.cleanup import count_expired_files, decide, is_time_to_delete

from .conftest import FakeClock, make_msg, pull_all, tiny_config


async def _started(root: str, clock=None, **overrides) -> MessageStore:
    store = (
        MessageStore(tiny_config(root, **overrides), clock=clock)
        if clock
        else MessageStore(tiny_config(root, **overrides))
    )
    store.load()
    await store.start()
    return store


@pytest.fixture
def flush_module(monkeypatch):
    """store.services.flush with group commit fsyncing in a thread (the process: test_fsync_process)."""
    from pocketmq.store.services import flush

    monkeypatch.setattr(flush.GroupCommitService, "use_process", False)
    return flush


async def _until(cond, timeout=5.0):
    """Poll store state that has no event of its own (queue ends, flushed offsets)."""
    async with asyncio.timeout(timeout):
        while not cond():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


async def test_reput_dispatches_without_polling_and_notifies(tmp_path):
    seen = []

    class L:
        def arriving(self, topic, queue_id, logic_offset, tags_code, store_ts, bitmap, props):
            seen.append(logic_offset)

    store = await _started(str(tmp_path / "s"))
    store.arriving_listener = L()
    for i in range(50):
        store.put_message(make_msg(i))
    await _until(lambda: store.get_max_offset_in_queue("TopicA", 0) == 50)
    assert seen == list(range(1, 51))
    assert store.dispatch_behind_bytes == 0
    await store.shutdown()


async def test_async_flush_advances_flushed_offset_and_checkpoint(tmp_path):
    store = await _started(str(tmp_path / "s"), flush_commit_log_least_pages=0)
    for i in range(100):
        store.put_message(make_msg(i, body_size=500))
    await _until(lambda: store.commitlog.mfq.flushed_where == store.get_max_phy_offset())
    await _until(lambda: store.checkpoint.logics_msg_timestamp > 0)  # type: ignore[union-attr]
    assert store.checkpoint.physic_msg_timestamp > 0  # type: ignore[union-attr]
    await store.shutdown()
    assert not (tmp_path / "s" / "abort").exists()


async def test_sync_flush_group_commit_with_many_waiters(tmp_path):
    store = await _started(str(tmp_path / "s"), flush_disk_type="SYNC_FLUSH")
    results = await asyncio.gather(
        *(store.put_message_async(make_msg(i, queue_id=i % 4)) for i in range(300))
    )
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    flushed = store.commitlog.mfq.flushed_where
    assert all(r.append.wrote_offset + r.append.wrote_bytes <= flushed for r in results)  # type: ignore[union-attr]
    batch = await store.put_messages_async([make_msg(i) for i in range(8)])
    assert batch.status is PutMessageStatus.PUT_OK and batch.append.msg_num == 8  # type: ignore[union-attr]
    await store.shutdown()


async def test_flush_waiter_direct_callback_runs_as_the_round_resolves(tmp_path):
    # FlushReplies' seam: the callback runs in the call that resolves the round (before the
    # future's done-callbacks, which asyncio runs a loop turn later), once per round
    store = await _started(str(tmp_path / "s"), flush_disk_type="SYNC_FLUSH")
    order: list[tuple[str, bool]] = []

    def direct(f: asyncio.Future[bool]) -> None:
        order.append(("direct", f.result()))

    a = store.put_message(make_msg(0))
    fut = store.flush_waiter(a, direct)
    assert fut is not None and not fut.done()
    fut.add_done_callback(lambda f: order.append(("done", f.result())))
    assert await fut is True
    await asyncio.sleep(0)
    assert order == [("direct", True), ("done", True)]
    await store.shutdown()


async def test_group_commit_lowers_the_gil_switch_interval_while_running(tmp_path, flush_module):
    """Thread fsync completions must not wait 5 ms for the GIL; the interval is put back on stop."""
    import sys

    before = sys.getswitchinterval()
    a = await _started(str(tmp_path / "a"), flush_disk_type="SYNC_FLUSH")
    b = await _started(str(tmp_path / "b"), flush_disk_type="SYNC_FLUSH")
    assert sys.getswitchinterval() <= 0.0005
    await a.shutdown()
    assert sys.getswitchinterval() <= 0.0005  # b still runs
    await b.shutdown()
    assert sys.getswitchinterval() == before


async def test_wait_false_returns_before_the_flush(tmp_path):
    store = await _started(str(tmp_path / "s"), flush_disk_type="SYNC_FLUSH")
    msg = make_msg(0, extra={"WAIT": "false"})
    r = await store.put_message_async(msg)
    assert r.status is PutMessageStatus.PUT_OK
    assert store.commitlog.mfq.flushed_where < r.append.wrote_offset + r.append.wrote_bytes  # type: ignore[union-attr]
    await store.shutdown()


async def test_sync_flush_timeout_reports_flush_disk_timeout(tmp_path, monkeypatch, flush_module):
    store = await _started(str(tmp_path / "s"), flush_disk_type="SYNC_FLUSH", sync_flush_timeout=100)
    release = threading.Event()
    real = flush_module._fsync_all

    def stuck(fds):  # an fsync that hangs (runs in the flush executor)
        release.wait(10)
        real(fds)

    monkeypatch.setattr(flush_module, "_fsync_all", stuck)
    r = await store.put_message_async(make_msg(0))
    assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert r.is_ok and r.append is not None  # stored, just not confirmed on disk
    release.set()
    await store.shutdown()


async def test_sync_flush_fsync_error_is_retried_not_acknowledged(tmp_path, monkeypatch, flush_module):
    store = await _started(str(tmp_path / "s"), flush_disk_type="SYNC_FLUSH", sync_flush_timeout=2000)
    real = flush_module._fsync_all
    failures = []

    def flaky(fds):  # the first fsync reports EIO: its waiters must not be told "on disk"
        if not failures:
            failures.append(1)
            raise OSError(errno.EIO, "Input/output error")
        real(fds)

    monkeypatch.setattr(flush_module, "_fsync_all", flaky)
    r = await store.put_message_async(make_msg(0))
    assert failures and r.status is PutMessageStatus.PUT_OK  # acknowledged by the retried fsync
    assert store.commitlog.mfq.flushed_where >= r.append.wrote_offset + r.append.wrote_bytes  # type: ignore[union-attr]
    await store.shutdown()


async def test_group_commit_splits_waiters_into_pipelined_rounds(tmp_path, flush_module):
    store = await _started(str(tmp_path / "s"), flush_disk_type="SYNC_FLUSH")
    gc = store._services.group_commit  # type: ignore[union-attr]
    fsyncs = 0
    real = gc.executor.submit

    def counting_submit(fn, *args):
        nonlocal fsyncs
        fsyncs += 1
        return real(fn, *args)

    gc.executor.submit = counting_submit  # type: ignore[method-assign]
    done = 0

    async def worker(k: int) -> None:
        nonlocal done
        for i in range(10):
            r = await store.put_message_async(make_msg(k * 100 + i, queue_id=k % 4))
            assert r.status is PutMessageStatus.PUT_OK
            done += 1

    await asyncio.gather(*(worker(k) for k in range(64)))
    assert done == 640 and gc.pending == 0
    # one fsync serves many waiters: far fewer fsyncs than messages
    assert 2 <= fsyncs < 640 // 4
    await store.shutdown()


async def test_next_segment_is_preallocated(tmp_path):
    store = await _started(str(tmp_path / "s"))
    store.put_message(make_msg(0))
    d = store.config.commit_log_dir
    await _until(lambda: len(os.listdir(d)) == 2)  # the next segment waits, ready
    n = 0
    while store.get_max_phy_offset() < 64 * 1024:
        store.put_message(make_msg(n, body_size=1000))
        n += 1
    await _until(lambda: len(os.listdir(d)) == 3)
    await store.shutdown()
    # the unused preallocated segment is removed on shutdown
    assert sorted(os.listdir(d)) == [f"{0:020d}", f"{64 * 1024:020d}"]


def _vm_flags(path: str) -> list[str]:
    """VmFlags of this process's mapping of ``path`` (``/proc/self/smaps``)."""
    with open("/proc/self/smaps") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(path):
            for flags in lines[i + 1 :]:
                if flags.startswith("VmFlags:"):
                    return flags.split()[1:]
    raise AssertionError(f"{path} is not mapped")


async def test_segment_being_written_is_mapped_random_then_normal(tmp_path):
    """Readahead would put large folios under the writer, and each SYNC_FLUSH fdatasync would
    write whole folios back; a full segment gets readahead back for catch-up reads."""
    store = await _started(str(tmp_path / "s"), flush_disk_type="SYNC_FLUSH")
    assert (await store.put_message_async(make_msg(0))).status is PutMessageStatus.PUT_OK
    d = store.config.commit_log_dir
    first = os.path.join(d, f"{0:020d}")
    assert "rr" in _vm_flags(first)
    n = 1
    while store.get_max_phy_offset() < 64 * 1024:
        store.put_message(make_msg(n, body_size=1000))
        n += 1
    second = os.path.join(d, f"{64 * 1024:020d}")
    assert "rr" in _vm_flags(second)  # prepared by the allocator: advised before its prefault
    assert "rr" not in _vm_flags(first)
    r = await store.put_message_async(make_msg(n))
    assert r.status is PutMessageStatus.PUT_OK
    await store.shutdown()


async def test_async_flush_keeps_default_readahead_on_the_segment_being_written(tmp_path):
    """ASYNC_FLUSH flushes rarely and in bulk: no per-page faults for the prefault thread."""
    store = await _started(str(tmp_path / "s"), flush_disk_type="ASYNC_FLUSH")
    assert store.put_message(make_msg(0)).status is PutMessageStatus.PUT_OK
    first = os.path.join(store.config.commit_log_dir, f"{0:020d}")
    assert "rr" not in _vm_flags(first)
    await store.shutdown()


async def test_disk_full_enospc_refuses_puts_keeps_reads_and_recovers(tmp_path, monkeypatch):
    # Segments are sparse; blocks are reserved a step ahead of the writer, so a full disk is an
    # ENOSPC from fallocate answered with SERVICE_NOT_AVAILABLE (14), never a SIGBUS nor the
    # CREATE_MAPEDFILE_FAILED (1) a fully preallocated next segment used to give first.
    from pocketmq.store.services import clean as clean_module

    store = await _started(str(tmp_path / "s"))
    monkeypatch.setattr(mapped_file_module, "ALLOCATION_STEP", 4096)
    real = mapped_file_module._allocate
    full = True

    def fake_allocate(fd, start, length):
        if full:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, start, length)

    monkeypatch.setattr(mapped_file_module, "_allocate", fake_allocate)
    statuses = []
    ok = 0
    for i in range(200):
        r = store.put_message(make_msg(i, queue_id=i % 2, body_size=700))
        statuses.append(r.status)
        ok += r.is_ok
    assert PutMessageStatus.SERVICE_NOT_AVAILABLE in statuses
    assert PutMessageStatus.CREATE_MAPEDFILE_FAILED not in statuses
    assert statuses[:ok] == [PutMessageStatus.PUT_OK] * ok  # refused only once the reserve is used
    assert store.disk_full
    await _until(
        lambda: store.get_max_offset_in_queue("TopicA", 0) + store.get_max_offset_in_queue("TopicA", 1) == ok
    )
    served = pull_all(store, "TopicA", 0) + pull_all(store, "TopicA", 1)
    assert len(served) == ok  # reads keep working
    full = False  # space is back: the cleaner's next round accepts puts again, no restart
    monkeypatch.setattr(clean_module, "disk_usage_ratio", lambda path: 0.10)
    await store._services.clean.run_once()  # type: ignore[union-attr]
    r = store.put_message(make_msg(999, body_size=700))
    assert r.status is PutMessageStatus.PUT_OK
    await _until(lambda: store.dispatch_behind_bytes == 0)
    await store.shutdown()
    again = MessageStore(tiny_config(str(tmp_path / "s")))
    again.load()
    assert len(pull_all(again, "TopicA", 0)) + len(pull_all(again, "TopicA", 1)) == ok + 1
    again.close()


async def test_segments_are_sparse_until_written_unless_warm(tmp_path):
    # issue 23: a default broker took ~2.4 GiB of real disk at its first message
    store = await _started(str(tmp_path / "s"), mapped_file_size_commit_log=64 << 20)
    store.put_message(make_msg(0))
    await _until(lambda: store.dispatch_behind_bytes == 0)
    for mf in store.commitlog.mfq.files:
        # blocks are reserved a small window ahead of the writer (services.allocate), no more
        assert os.stat(mf.path).st_blocks * 512 <= allocate_module.RESERVE_WINDOW + (1 << 20)
    await store.shutdown()
    warm = await _started(
        str(tmp_path / "w"), mapped_file_size_commit_log=64 << 20, warm_maped_file_enable=True
    )
    warm.put_message(make_msg(0))
    first = warm.commitlog.mfq.files[0]
    assert os.stat(first.path).st_blocks * 512 >= 64 << 20  # warmMapedFileEnable: all blocks at once
    await warm.shutdown()


async def test_past_the_warning_ratio_at_an_allocation_step_puts_are_refused(tmp_path, monkeypatch):
    from pocketmq.store.log import commitlog as commitlog_module

    store = await _started(str(tmp_path / "s"))
    monkeypatch.setattr(mapped_file_module, "ALLOCATION_STEP", 4096)
    monkeypatch.setattr(commitlog_module, "disk_usage_ratio", lambda path: 0.95)
    statuses = [store.put_message(make_msg(i, body_size=700)).status for i in range(20)]
    assert statuses[0] is PutMessageStatus.PUT_OK  # the step that saw the ratio still went in
    # the ratio is checked after each reservation of blocks: the writer's own (a step ahead), or
    # the allocation thread's (a window ahead), which schedules the check back on the loop
    await _until(lambda: store.disk_full)
    assert store.put_message(make_msg(20, body_size=700)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    await store.shutdown()


async def test_enospc_creating_a_consume_queue_file_blocks_reput_then_resumes(tmp_path, monkeypatch):
    store = await _started(str(tmp_path / "s"))
    real = mapped_file_module._extend  # ConsumeQueue files are sparse: sized, not allocated
    state = {"full": True}

    def fake(fd, size):
        if state["full"] and size == store.config.cq_file_size:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, size)

    monkeypatch.setattr(mapped_file_module, "_extend", fake)
    for i in range(5):
        assert store.put_message(make_msg(i, topic="NewTopic")).is_ok
    await asyncio.sleep(0.1)
    assert store.get_max_offset_in_queue("NewTopic", 0) == 0  # not dispatched, nothing skipped
    assert store.dispatch_behind_bytes > 0
    state["full"] = False
    await _until(lambda: store.get_max_offset_in_queue("NewTopic", 0) == 5, timeout=5)
    assert [m.queue_offset for m in pull_all(store, "NewTopic", 0)] == list(range(5))
    await store.shutdown()


async def test_disk_full_flag_from_the_cleaner(tmp_path, monkeypatch):
    from pocketmq.store.services import clean as clean_module

    store = await _started(str(tmp_path / "s"))
    monkeypatch.setattr(clean_module, "disk_usage_ratio", lambda path: 0.95)
    await store._services.clean.run_once()  # type: ignore[union-attr]
    assert store.disk_full
    assert store.put_message(make_msg(0)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    monkeypatch.setattr(clean_module, "disk_usage_ratio", lambda path: 0.10)
    await store._services.clean.run_once()  # type: ignore[union-attr]
    assert not store.disk_full
    assert store.put_message(make_msg(1)).is_ok
    await store.shutdown()


async def test_cleaner_deletes_expired_segments_and_queue_files(tmp_path):
    clock = FakeClock()
    root = str(tmp_path / "s")
    store = await _started(root, clock=clock, file_reserved_time=1, delete_when="04")
    for i in range(300):
        store.put_message(make_msg(i, body_size=700))
    await _until(lambda: store.get_max_offset_in_queue("TopicA", 0) == 300)
    segs = len(store.commitlog.mfq.files)
    assert segs >= 4
    # run a round at 04:xx local time, with files last written 2 h before
    import time as _t

    lt = _t.localtime(clock.now / 1000)
    clock.now = int(_t.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday + 1, 4, 30, 0, 0, 0, -1)) * 1000)
    old = (clock.now - 2 * 3_600_000) / 1000
    for mf in store.commitlog.mfq.files:
        os.utime(mf.path, (old, old))
    store.config = store.config.model_copy(update={"delete_commit_log_files_interval": 0})
    await store._services.clean.run_once()  # type: ignore[union-attr]
    assert len(store.commitlog.mfq.files) == 1  # all but the newest
    min_phy = store.get_min_phy_offset()
    assert min_phy == (segs - 1) * 64 * 1024
    survivors = pull_all(store, "TopicA", 0, store.get_min_offset_in_queue("TopicA", 0))
    assert survivors and all(m.commit_log_offset >= min_phy for m in survivors)
    assert store.get_min_offset_in_queue("TopicA", 0) == survivors[0].queue_offset
    assert store.get_max_offset_in_queue("TopicA", 0) == 300
    cq_files = os.listdir(os.path.join(root, "consumequeue", "TopicA", "0"))
    assert len(cq_files) < 30
    await store.shutdown()
    again = MessageStore(tiny_config(root))
    again.load()
    assert again.get_min_offset_in_queue("TopicA", 0) == survivors[0].queue_offset
    assert [
        m.queue_offset for m in pull_all(again, "TopicA", 0, again.get_min_offset_in_queue("TopicA", 0))
    ] == [m.queue_offset for m in survivors]
    again.close()


async def test_runtime_info_keys_and_rates(tmp_path):
    store = await _started(str(tmp_path / "s"))
    for i in range(10):
        store.put_message(make_msg(i))
    await _until(lambda: store.get_max_offset_in_queue("TopicA", 0) == 10)
    store.get_message("g", "TopicA", 0, 0, 32)
    store.get_message("g", "TopicA", 0, 10, 32)
    store.stats.sample(1000, 0)
    store.stats.get_found_times += 20
    store.stats.sample(2000, 50)
    info = store.runtime_info()
    for key in ("putTps", "getFoundTps", "getMissTps", "getTotalTps", "putMessageTimesTotal",
                "putMessageSizeTotal", "commitLogDiskRatio", "dispatchBehindBytes", "commitLogMaxOffset"):  # fmt: skip
        assert key in info and isinstance(info[key], str)
    assert info["putMessageTimesTotal"] == "10"
    assert info["putTps"].split() == ["50.00", "50.00", "50.00"]
    assert info["getFoundTps"].split()[0] == "20.00"
    assert 0 <= float(info["commitLogDiskRatio"]) <= 1
    await store.shutdown()
    await store.shutdown()  # idempotent
    assert store.put_message(make_msg(0)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


# ---------------------------------------------------------------- pure retention decisions


def test_is_time_to_delete():
    assert is_time_to_delete("04", 4)
    assert not is_time_to_delete("04", 5)
    assert is_time_to_delete("04;16", 16)
    assert not is_time_to_delete("", 4)


@pytest.mark.parametrize(
    ("hour", "ratio", "expected"),
    [
        (4, 0.10, (True, False, False)),  # the daily hour, plenty of space
        (12, 0.10, (False, False, False)),  # wrong hour, plenty of space
        (12, 0.80, (True, False, False)),  # above diskMaxUsedSpaceRatio 75
        (12, 0.86, (True, True, False)),  # above forcibly 0.85: delete even unexpired
        (12, 0.91, (True, True, True)),  # above warning 0.90: disk full
        (12, -1.0, (True, False, False)),  # statvfs failed: reclaim
    ],
)
def test_decide(hour, ratio, expected):
    d = decide(
        hour=hour, used_ratio=ratio, delete_when="04", disk_max_used_space_ratio=75,
        disk_space_clean_forcibly_ratio=0.85, disk_space_warning_level_ratio=0.90, clean_file_forcibly_enable=True,
    )  # fmt: skip
    assert (d.delete, d.clean_immediately, d.disk_full) == expected


def test_decide_forcible_cleaning_can_be_disabled_and_manual_rounds():
    d = decide(hour=1, used_ratio=0.88, delete_when="04", disk_max_used_space_ratio=75,
               disk_space_clean_forcibly_ratio=0.85, disk_space_warning_level_ratio=0.9,
               clean_file_forcibly_enable=False)  # fmt: skip
    assert d.delete and not d.clean_immediately
    d = decide(hour=1, used_ratio=0.1, delete_when="04", disk_max_used_space_ratio=75,
               disk_space_clean_forcibly_ratio=0.85, disk_space_warning_level_ratio=0.9,
               clean_file_forcibly_enable=True, manual=True)  # fmt: skip
    assert d.delete and not d.clean_immediately


def test_count_expired_files():
    h = 3_600_000
    now = 100 * h
    mt = [now - 80 * h, now - 75 * h, now - 10 * h, now - 80 * h, now]
    assert count_expired_files(mt, now, 72 * h, clean_immediately=False) == 2  # stops at the first keeper
    assert count_expired_files(mt, now, 72 * h, clean_immediately=True) == 4  # never the newest
    assert count_expired_files([now - 99 * h] * 30, now, 72 * h, clean_immediately=False) == 10  # batch max
    assert count_expired_files([now - 99 * h], now, 72 * h, clean_immediately=True) == 0
    assert count_expired_files([], now, 0, clean_immediately=True) == 0


def test_prefault_window_follows_the_writer(tmp_path, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from pocketmq.store.log.mapped_file import MappedFile
    from pocketmq.store.services import allocate

    monkeypatch.setattr(allocate, "PREFAULT_WINDOW", 16 * 4096)
    calls: list[tuple[int, int]] = []

    class Recorder(ThreadPoolExecutor):
        def submit(self, fn, *args):  # type: ignore[override]
            if fn is allocate._prefault_range:
                calls.append((args[1], args[2]))
            return super().submit(fn, *args)

    ex = Recorder(max_workers=1)
    service = allocate.AllocateService(ex, prefault=True, warm_write=False)
    mf = MappedFile(str(tmp_path / f"{0:020d}"), 0, 64 * 4096, create=True)
    service._prepared.add(mf.path)  # as if it had been prepared: the first window is done
    assert service.take(str(tmp_path), 0, 64 * 4096) is None  # nothing pending
    mf.prefaulted = 16 * 4096
    service.advance(mf)
    assert calls == []  # the writer has not reached half the window
    mf.wrote_position = 9 * 4096
    service.advance(mf)
    service.advance(mf)  # requested once
    assert calls == [(16 * 4096, 32 * 4096)]
    mf.wrote_position = 60 * 4096
    service.advance(mf)
    assert calls[-1] == (60 * 4096, 76 * 4096) and mf.prefaulted >= mf.file_size
    service.advance(mf)
    assert len(calls) == 2  # nothing left to prefault
    ex.shutdown(wait=True)
    mf.close()


def test_prefault_paces_itself_unless_the_writer_closes_in(tmp_path, monkeypatch):
    # paced at half time, the prefault covers ~250 MB/s of fresh memory on the test VM; a writer
    # faster than that (64-message batches) took the first touches in its own write faults, so
    # the pause is skipped while the writer, at its pace, would reach the step just prefaulted
    # within PREFAULT_CATCH_UP_S; a writer standing still (or writing another file) keeps it
    from pocketmq.store.log.mapped_file import MappedFile
    from pocketmq.store.services import allocate

    step = 4 * 4096
    monkeypatch.setattr(allocate, "PREFAULT_STEP", step)
    pauses: list[float] = []
    monkeypatch.setattr(allocate.time, "sleep", pauses.append)
    mf = MappedFile(str(tmp_path / f"{0:020d}"), 0, 64 * 4096, create=True)
    real = MappedFile.prefault
    moves = {"by": 0}

    def prefault(self: MappedFile, **kw: int) -> None:  # the writer moves while a step is prefaulted
        real(self, **kw)
        self.wrote_position += moves["by"]

    monkeypatch.setattr(MappedFile, "prefault", prefault)
    try:
        allocate._prefault_range(mf, 0, 8 * step, False)
        assert len(pauses) == 8  # a writer standing still: every step paced
        pauses.clear()
        mf.wrote_position, moves["by"] = 7 * step, step  # a step behind, a step a step
        allocate._prefault_range(mf, 8 * step, 16 * step, False)
        assert pauses == [] and mf.wrote_position == 15 * step
        moves["by"] = 0  # it stops: paced again
        allocate._prefault_range(mf, 16 * step, 20 * step, False)
        assert len(pauses) == 4
    finally:
        mf.close()


def test_advance_looks_again_only_where_the_next_window_is_due(tmp_path, monkeypatch):
    # advance runs after every reput slice: between requests it is one compare against
    # advance_at, the first position where a reservation or a prefault is due; a window moved
    # by someone else (the segment taken into use) makes it look at once
    from concurrent.futures import ThreadPoolExecutor

    from pocketmq.store.log.mapped_file import MappedFile
    from pocketmq.store.services import allocate

    monkeypatch.setattr(allocate, "PREFAULT_WINDOW", 16 * 4096)
    monkeypatch.setattr(allocate, "RESERVE_WINDOW", 8 * 4096)
    calls: list[tuple[str, int]] = []

    class Recorder(ThreadPoolExecutor):
        def submit(self, fn, *args):  # type: ignore[override]
            if fn is allocate._prefault_range:
                calls.append(("prefault", args[1]))
            elif fn is allocate._reserve_range:
                calls.append(("reserve", args[1]))
            return super().submit(fn, *args)

    ex = Recorder(max_workers=1)
    service = allocate.AllocateService(ex, prefault=True, warm_write=False, reserve_executor=ex)
    mf = MappedFile(str(tmp_path / f"{0:020d}"), 0, 64 * 4096, create=True)
    mf.reserving, mf.prefaulted = 8 * 4096, 16 * 4096
    service.advance(mf)
    assert calls == [] and mf.advance_at == 4 * 4096  # the reservation's half-way mark first
    for pos in range(0, 64 * 4096 + 1, 1024):  # the writer, a record of 1 KiB at a time
        mf.wrote_position = pos
        service.advance(mf)
    # the windows of the check without the threshold: requested each when the writer passed
    # half of the one before, none twice, none past the file
    assert [c[1] // 4096 for c in calls if c[0] == "prefault"] == [16, 32, 48]
    assert [c[1] // 4096 for c in calls if c[0] == "reserve"] == [16, 24, 32, 40, 48, 56, 64]
    assert mf.advance_at == mf.file_size + 1  # both windows reach the file's end
    mf.prefaulted, mf.advance_at = 0, 0  # (on_created's reset: the window moved back)
    n = len(calls)
    service.advance(mf)
    assert len(calls) == n + 1 and calls[-1] == ("prefault", 64 * 4096)
    ex.shutdown(wait=True)
    mf.close()


async def test_flush_waiter_is_the_shared_round_future_or_none(tmp_path):
    loaded = MessageStore(tiny_config(str(tmp_path / "l"), flush_disk_type="SYNC_FLUSH"))
    loaded.load()  # not started: no group commit, no wait applies
    assert loaded.flush_waiter(loaded.put_message(make_msg(0))) is None
    loaded.close()
    async_store = await _started(str(tmp_path / "a"))
    assert async_store.flush_waiter(async_store.put_message(make_msg(0))) is None
    await async_store.shutdown()
    store = await _started(str(tmp_path / "s"), flush_disk_type="SYNC_FLUSH")
    first = store.put_message(make_msg(1))
    second = store.put_messages([make_msg(2), make_msg(3)])
    fut = store.flush_waiter(second)
    assert fut is not None and await fut is True
    assert store.commitlog.mfq.flushed_where >= second.append.wrote_offset + second.append.wrote_bytes  # type: ignore[union-attr]
    done = store.flush_waiter(first)  # already covered: a done future
    assert done is not None and done.done() and done.result() is True
    refused = store.put_message(make_msg(4, topic=""))
    assert refused.append is None and store.flush_waiter(refused) is None
    await store.shutdown()


async def test_reput_slices_move_the_segments_reservation_window(tmp_path, monkeypatch):
    """After each reput slice the allocation service is asked to move the windows of the
    segment being written once the writer reaches its ``advance_at`` (tested inline by the
    slice's hook): the reservation follows the writer through the segment."""
    monkeypatch.setattr(allocate_module, "RESERVE_WINDOW", 4 * 4096)
    store = await _started(str(tmp_path / "s"))
    try:
        n = 0
        marks = []
        while store.get_max_phy_offset() < 48 * 1024:
            store.put_message(make_msg(n, body_size=1000))
            n += 1
            await _until(lambda: store.dispatch_behind_bytes == 0)
            mf = store.commitlog.mfq.files[-1]
            assert mf.wrote_position < mf.advance_at  # moved on once the writer reached it
            marks.append(mf.advance_at)
        assert marks == sorted(marks) and len(set(marks)) >= 4
    finally:
        await store.shutdown()
