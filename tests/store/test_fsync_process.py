"""SYNC_FLUSH group commit, and the periodic flushes (``FsyncPipe``), through the fsync helper
process (store/services/fsync_process.py).

The thread path is covered by test_store_services.py (those tests switch the process off to
inject faults into ``_fsync_all``); here the same guarantees hold with the helper: waiters are
answered only after their bytes are synced, an fsync error is retried and never acknowledged,
a stuck fsync times out, a helper that dies hands over to the thread without acknowledging
anything, and the helper never outlives the broker (also when it is killed with -9).
"""

from __future__ import annotations

import asyncio
import errno
import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from pocketmq.store import MessageStore, PutMessageStatus
from pocketmq.store.services import flush as flush_module
from pocketmq.store.services.fsync_process import FsyncHelperGone, FsyncPipe, FsyncProcess, results_error
from tests.pids import pid_alive

from .conftest import make_msg, tiny_config


async def _started(root: str, **overrides: object) -> MessageStore:
    store = MessageStore(tiny_config(root, flush_disk_type="SYNC_FLUSH", **overrides))
    store.load()
    await store.start()
    return store


def _answer(proc: FsyncProcess) -> list[int] | None:
    ready, _, _ = select.select([proc.fd], [], [], 5.0)
    assert ready, "the fsync process did not answer within 5 s"
    return proc.results()


def _record_thread_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The fd lists the executor's ``_fsync_all`` is called with from now on."""
    threaded: list[list[int]] = []
    real = flush_module._fsync_all

    def recording(fds: list[int]) -> None:
        threaded.append(fds)
        real(fds)

    monkeypatch.setattr(flush_module, "_fsync_all", recording)
    return threaded


def test_helper_syncs_each_path_and_reports_errors(tmp_path):
    proc = FsyncProcess()
    try:
        paths = []
        for i in range(3):
            path = tmp_path / f"seg{i}"
            path.write_bytes(b"x" * 5000)
            paths.append(str(path))
        assert proc.results() == []  # nothing asked: nothing to read, no blocking
        proc.request(paths)
        assert _answer(proc) == [0, 0, 0]
        # a segment deleted meanwhile counts as synced (as EBADF does for the thread)
        os.unlink(paths[0])
        proc.request(paths)
        assert _answer(proc) == [0, 0, 0]
        # a path that cannot be opened for another reason reports its errno
        proc.request([str(tmp_path / "seg1" / "not-a-dir")])
        assert _answer(proc) == [errno.ENOTDIR]
    finally:
        proc.close()
    assert not pid_alive(proc.pid)
    with pytest.raises(OSError):
        proc.request(paths)  # closed


def test_a_request_repeated_syncs_the_kept_files_again_and_a_new_one_is_read_afresh(tmp_path):
    """The helper answers a request equal to the last one (paths with their inodes, all kept)
    from the fds it kept, without parsing it again; any other request is parsed and the fds
    it does not name are closed."""
    from pocketmq.store.log.mapped_file import MappedFile

    proc = FsyncProcess()
    try:
        a = MappedFile(str(tmp_path / "a"), 0, 4096, create=True)
        b = MappedFile(str(tmp_path / "b"), 0, 4096, create=True)
        for i in range(3):  # the first parsed, the next two from the kept fds
            a.mm[i] = b.mm[i] = 1
            proc.request([a.sync_key, b.sync_key])
            assert _answer(proc) == [0, 0]
        proc.request([b.sync_key])  # another request: parsed, a's fd closed
        assert _answer(proc) == [0]
        fd_dir = f"/proc/{proc.pid}/fd"
        targets = {os.readlink(os.path.join(fd_dir, fd)) for fd in os.listdir(fd_dir)}
        assert b.path in targets and a.path not in targets
        proc.request([b.sync_key])  # repeated: its kept fd synced, also once the path is gone
        assert _answer(proc) == [0]
        b.destroy()
        proc.request([b.sync_key])
        assert _answer(proc) == [0]
        proc.request([str(tmp_path / "a" / "not-a-dir")])  # an error after a repeat
        assert _answer(proc) == [errno.ENOTDIR]
        a.close()
    finally:
        proc.close()


def test_results_error_is_the_first_failed_fdatasync():
    assert results_error([0]) is None
    assert results_error([0, 0, 0]) is None
    error = results_error([0, errno.EIO, errno.ENOSPC])
    assert isinstance(error, OSError) and error.errno == errno.EIO


async def test_group_commit_acknowledges_only_after_the_helper_synced(tmp_path, monkeypatch):
    threaded = _record_thread_fsyncs(monkeypatch)
    store = await _started(str(tmp_path / "s"))
    gc = store._services.group_commit  # type: ignore[union-attr]
    assert gc._proc is not None
    requests: list[list[str]] = []
    real_request = gc._proc.request

    def counting(paths: list[str], realtime: bool = False) -> None:
        requests.append(list(paths))
        real_request(paths, realtime)

    gc._proc.request = counting  # type: ignore[method-assign]

    async def worker(k: int) -> None:
        for i in range(20):
            r = await store.put_message_async(make_msg(k * 100 + i, queue_id=k % 4))
            assert r.status is PutMessageStatus.PUT_OK
            assert r.append is not None
            # answered only once synced: the flushed position covers this message
            assert store.commitlog.mfq.flushed_where >= r.append.wrote_offset + r.append.wrote_bytes

    await asyncio.gather(*(worker(k) for k in range(32)))
    assert gc.pending == 0
    assert 1 <= len(requests) < 640 // 4  # group commit: one fsync serves many waiters
    segments = {mf.sync_key for mf in store.commitlog.mfq.files}  # (path and inode)
    assert {p for r in requests for p in r} <= segments and len(segments) > 1  # rolled meanwhile
    commitlog_fds = {mf.fd for mf in store.commitlog.mfq.files}
    # no CommitLog fsync went through the thread (ConsumeQueue/index flushes still do)
    assert not any(commitlog_fds & set(fds) for fds in threaded)
    pid = gc._proc.pid
    await store.shutdown()
    assert gc._proc is None and not pid_alive(pid)  # the helper is reaped on stop


def test_answered_tells_an_answer_is_waiting_without_reading_it(tmp_path):
    proc = FsyncProcess()
    try:
        path = tmp_path / "seg"
        path.write_bytes(b"x" * 5000)
        for _ in range(300):  # past the one-byte count's wrap-around
            assert not proc.answered()
            proc.request([str(path)])
            deadline = time.monotonic() + 5.0
            while not proc.answered():
                assert time.monotonic() < deadline, "the helper did not answer within 5 s"
                time.sleep(0.0005)
            assert proc.results() == [0]
        assert not proc.answered()
    finally:
        proc.close()


async def test_a_put_collects_the_finished_fsync_before_the_loop_does(tmp_path):
    # the put path answers the round as soon as the helper has synced it, inside the put,
    # without the loop turn that would run the helper's reader callback
    store = await _started(str(tmp_path / "s"))
    gc = store._services.group_commit  # type: ignore[union-attr]
    assert gc._proc is not None
    first = store.put_message(make_msg(0))
    answered: list[bool] = []
    fut = store.flush_waiter(first, lambda f: answered.append(f.result()))
    assert fut is not None and not fut.done() and gc.pending == 1
    deadline = time.monotonic() + 5.0
    while not gc._proc.answered():  # (no await: the loop cannot run the reader callback)
        assert time.monotonic() < deadline, "the helper did not answer within 5 s"
        time.sleep(0.0005)  # noqa: ASYNC251 - blocking on purpose (see above)
    assert answered == [] and not fut.done()
    second = store.put_message(make_msg(1))
    assert answered == [True] and fut.done() and fut.result() is True
    assert first.append is not None and second.append is not None
    assert store.commitlog.mfq.flushed_where >= first.append.wrote_offset + first.append.wrote_bytes
    assert gc.pending == 0  # nothing waits for the second put: no fsync was started for it
    second_waiter = store.flush_waiter(second)
    assert second_waiter is not None and await second_waiter is True
    await store.shutdown()


def _realtime_permitted() -> bool:
    """Whether this user may make a process SCHED_FIFO (root, CAP_SYS_NICE, RLIMIT_RTPRIO)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        os.sched_setscheduler(child.pid, os.SCHED_FIFO, os.sched_param(1))
        return True
    except OSError:
        return False
    finally:
        child.kill()
        child.wait()


async def test_a_lone_put_starts_its_fsync_at_once_a_burst_waits_for_its_registration(tmp_path):
    fifo = os.SCHED_FIFO if _realtime_permitted() else os.SCHED_OTHER
    store = await _started(str(tmp_path / "s"))
    gc = store._services.group_commit  # type: ignore[union-attr]
    assert gc._proc is not None
    # one send at a time: the put itself starts the fsync (before its registration), by the
    # helper at real-time priority where permitted
    for i in range(3):
        r = store.put_message(make_msg(i))
        assert gc._inflight is not None
        waiter = store.flush_waiter(r)
        assert waiter is not None and await waiter is True
        assert os.sched_getscheduler(gc._proc.pid) == fifo
    # a burst: its first put still starts one at once, the next fsync covers the rest
    # together (more than one put), at normal priority, and from then on a put waits for its
    # registration. The helper is stopped through the burst: an answer to the first fsync
    # collected by a later put of the burst (``poll``) would let that put start a fsync of
    # its own, and the test would depend on how fast the helper is
    os.kill(gc._proc.pid, signal.SIGSTOP)
    try:
        burst = [store.put_message(make_msg(10 + i)) for i in range(4)]
        waiter = store.flush_waiter(burst[-1])
    finally:
        os.kill(gc._proc.pid, signal.SIGCONT)
    assert waiter is not None and await asyncio.wait_for(waiter, 10) is True
    after = store.put_message(make_msg(20))
    assert gc._inflight is None
    assert os.sched_getscheduler(gc._proc.pid) == os.SCHED_OTHER
    waiter = store.flush_waiter(after)
    assert waiter is not None and await waiter is True
    assert after.append is not None
    assert store.commitlog.mfq.flushed_where >= after.append.wrote_offset + after.append.wrote_bytes
    await store.shutdown()


def test_helper_switches_to_real_time_and_back_per_request(tmp_path):
    fifo = os.SCHED_FIFO if _realtime_permitted() else os.SCHED_OTHER
    proc = FsyncProcess()
    try:
        path = tmp_path / "seg"
        path.write_bytes(b"x" * 5000)
        for realtime in (False, True, True, False, True, False, False):
            proc.request([str(path)], realtime)  # (a repeated request: the helper's kept fds)
            assert _answer(proc) == [0]
            assert os.sched_getscheduler(proc.pid) == (fifo if realtime else os.SCHED_OTHER)
        time.sleep(0.05)
        assert proc.results() == []  # a scheduling change is not answered
    finally:
        proc.close()


def test_a_helper_not_permitted_real_time_syncs_at_normal_priority(tmp_path):
    # no CAP_SYS_NICE (dropped from the bounding set: gone after exec, also for root) and no
    # RLIMIT_RTPRIO: the switch fails in the helper, which goes on at normal priority
    if shutil.which("setpriv") is None or shutil.which("prlimit") is None:
        pytest.skip("setpriv/prlimit not installed")
    path = tmp_path / "seg"
    path.write_bytes(b"x" * 5000)
    script = textwrap.dedent(
        f"""
        import os, select
        from pocketmq.store.services.fsync_process import FsyncProcess
        proc = FsyncProcess()
        for realtime in (True, False, True):
            proc.request([{str(path)!r}], realtime)
            assert select.select([proc.fd], [], [], 5.0)[0]
            assert proc.results() == [0]
            assert os.sched_getscheduler(proc.pid) == os.SCHED_OTHER
        proc.close()
        print("ok")
        """
    )
    argv = ["prlimit", "--rtprio=0", "setpriv", "--bounding-set", "-sys_nice", sys.executable, "-c", script]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    if "Operation not permitted" in done.stderr and "setpriv" in done.stderr:
        pytest.skip(f"cannot drop the capability here: {done.stderr.strip()}")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


async def test_helper_fsync_error_is_retried_not_acknowledged(tmp_path):
    store = await _started(str(tmp_path / "s"), sync_flush_timeout=3000)
    gc = store._services.group_commit  # type: ignore[union-attr]
    assert gc._proc is not None
    real_results = gc._proc.results
    failed: list[int] = []

    def eio_once() -> list[int] | None:
        results = real_results()
        if results and not failed:
            failed.append(1)
            return [errno.EIO] + results[1:]
        return results

    gc._proc.results = eio_once  # type: ignore[method-assign]
    r = await store.put_message_async(make_msg(0))
    assert failed, "the injected EIO was not seen"
    assert r.status is PutMessageStatus.PUT_OK  # acknowledged only by the retried fsync
    assert r.append is not None
    assert store.commitlog.mfq.flushed_where >= r.append.wrote_offset + r.append.wrote_bytes
    await store.shutdown()


async def test_a_stuck_helper_fsync_times_out_as_flush_disk_timeout(tmp_path):
    store = await _started(str(tmp_path / "s"), sync_flush_timeout=100)
    gc = store._services.group_commit  # type: ignore[union-attr]
    assert gc._proc is not None
    os.kill(gc._proc.pid, signal.SIGSTOP)  # the helper hangs (as in an fsync of a dead disk)
    try:
        r = await store.put_message_async(make_msg(0))
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert r.is_ok and r.append is not None  # stored, not confirmed on disk
    finally:
        os.kill(gc._proc.pid, signal.SIGCONT)
    # the next round's deadline: 100 ms also timed out a healthy fsync on a loaded machine (the
    # just-resumed helper waiting for a core), which is not what this test is about
    gc.timeout_s = 5.0
    r = await store.put_message_async(make_msg(1))
    assert r.status is PutMessageStatus.PUT_OK  # going again once the fsync returned
    await store.shutdown()


async def test_helper_killed_hands_over_to_the_thread_without_false_acks(tmp_path, monkeypatch):
    store = await _started(str(tmp_path / "s"), sync_flush_timeout=3000)
    gc = store._services.group_commit  # type: ignore[union-attr]
    assert gc._proc is not None
    r = await store.put_message_async(make_msg(0))
    assert r.status is PutMessageStatus.PUT_OK
    threaded = _record_thread_fsyncs(monkeypatch)
    pid = gc._proc.pid
    os.kill(pid, signal.SIGKILL)
    for i in range(1, 4):
        r = await store.put_message_async(make_msg(i))
        assert r.status is PutMessageStatus.PUT_OK
        assert r.append is not None
        assert store.commitlog.mfq.flushed_where >= r.append.wrote_offset + r.append.wrote_bytes
    assert gc._proc is None and threaded  # synced by the thread from then on
    assert not pid_alive(pid)  # reaped, not left a zombie
    await store.shutdown()


def test_helper_exits_when_the_broker_is_killed(tmp_path):
    """kill -9 of the process that owns the store: the helper sees its socket close and exits."""
    script = textwrap.dedent(
        f"""
        import asyncio, sys, time
        sys.path[:0] = {sys.path!r}
        from tests.store.conftest import tiny_config
        from pocketmq.store import MessageStore

        async def main():
            store = MessageStore(tiny_config({str(tmp_path / "s")!r}, flush_disk_type="SYNC_FLUSH"))
            store.load()
            await store.start()
            print(store._services.group_commit._proc.pid, flush=True)
            await asyncio.sleep(60)

        asyncio.run(main())
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=os.getcwd())
    try:
        assert owner.stdout is not None
        helper = int(owner.stdout.readline())
        assert pid_alive(helper)
        owner.kill()
        owner.wait(10)
        deadline = time.monotonic() + 5
        while pid_alive(helper) and time.monotonic() < deadline:
            time.sleep(0.02)
        # orphaned, it is re-parented and reaped by init; either way it must not keep running
        assert not pid_alive(helper)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


# ---------------------------------------------------------------- FsyncPipe (periodic flushes)
async def test_pipe_syncs_in_order_chunks_and_reports_errors(tmp_path):
    pipe = FsyncPipe()
    try:
        paths = []
        for i in range(1200):  # more than one request's worth of paths: sent in chunks
            path = tmp_path / f"cq{i:04d}"
            path.write_bytes(b"x")
            paths.append(str(path))
        assert pipe._proc is not None
        requests: list[int] = []
        real_request = pipe._proc.request

        def counting(chunk: list[str]) -> None:
            requests.append(len(chunk))
            real_request(chunk)

        pipe._proc.request = counting  # type: ignore[method-assign]
        await asyncio.gather(pipe.fsync(paths), pipe.fsync(paths[:3]))  # queued, one at a time
        assert len(requests) >= 4 and sum(requests) == 1203
        # an fdatasync error is the caller's OSError, with its errno (not "helper gone")
        with pytest.raises(OSError) as info:
            await pipe.fsync([str(tmp_path / "cq0000" / "not-a-dir")])
        assert info.value.errno == errno.ENOTDIR and not isinstance(info.value, FsyncHelperGone)
        assert pipe.alive
    finally:
        pipe.close()
    with pytest.raises(FsyncHelperGone):
        await pipe.fsync(paths[:1])


async def test_pipe_reopens_a_path_made_again(tmp_path):
    """A file deleted and made again under the same path is synced, not the deleted one."""
    pipe = FsyncPipe()
    try:
        assert pipe._proc is not None
        path = tmp_path / "00000000000000000000"
        path.write_bytes(b"old")
        await pipe.fsync([str(path)])
        path.unlink()
        path.write_bytes(b"new")
        await pipe.fsync([str(path)])
        fd_dir = f"/proc/{pipe._proc.pid}/fd"
        targets = [os.readlink(os.path.join(fd_dir, fd)) for fd in os.listdir(fd_dir)]
        assert str(path) in targets and f"{path} (deleted)" not in targets
    finally:
        pipe.close()


async def test_pipe_reopens_a_file_made_again_named_with_its_inode(tmp_path):
    """``MappedFile.sync_key`` carries the inode: a new file at the same path is opened again
    (and synced), the deleted one's fd closed, with no stat of the path per request."""
    from pocketmq.store.log.mapped_file import MappedFile

    pipe = FsyncPipe()
    try:
        assert pipe._proc is not None
        path = str(tmp_path / "00000000000000000000")
        old = MappedFile(path, 0, 4096, create=True)
        old.mm[0:3] = b"old"
        await pipe.fsync([old.sync_key])
        await pipe.fsync([old.sync_key])  # kept: the inode matches
        old.destroy()
        new = MappedFile(path, 0, 4096, create=True)
        assert new.sync_key != old.sync_key
        new.mm[0:3] = b"new"
        await pipe.fsync([new.sync_key])
        fd_dir = f"/proc/{pipe._proc.pid}/fd"
        targets = [os.readlink(os.path.join(fd_dir, fd)) for fd in os.listdir(fd_dir)]
        assert path in targets and f"{path} (deleted)" not in targets
        new.close()
    finally:
        pipe.close()


async def test_async_flush_goes_through_the_helper_and_survives_its_death(tmp_path, monkeypatch):
    threaded = _record_thread_fsyncs(monkeypatch)
    store = MessageStore(tiny_config(str(tmp_path / "s"), flush_disk_type="ASYNC_FLUSH"))
    store.load()
    await store.start()
    services = store._services
    assert services is not None
    pipe = services.fsync_pipe
    assert pipe is not None and pipe._proc is not None
    asked: list[str] = []
    real_request = pipe._proc.request

    def recording(paths: list[str]) -> None:
        asked.extend(paths)
        real_request(paths)

    pipe._proc.request = recording  # type: ignore[method-assign]
    for i in range(20):
        assert (await store.put_message_async(make_msg(i, queue_id=i % 4))).status is PutMessageStatus.PUT_OK
    end = store.commitlog.max_offset
    assert await services.commitlog_flush.flush_commitlog() == end
    for _ in range(500):  # dispatched (reput is woken by the puts)
        if store.dispatcher.reput_from_offset >= end:
            break
        await asyncio.sleep(0.01)
    await services.cq_flush.run_once()
    segment = store.commitlog.mfq.files[0].sync_key  # (path and inode)
    cq = store.cq_table.find("TopicA", 0)
    assert cq is not None
    queue_file = cq.mfq.files[0].sync_key
    assert {segment, queue_file, store.checkpoint.mf.sync_key} <= set(asked)  # type: ignore[union-attr]
    assert threaded == []  # nothing went through a thread
    pid = pipe._proc.pid
    os.kill(pid, signal.SIGKILL)
    r = await store.put_message_async(make_msg(99))
    assert r.status is PutMessageStatus.PUT_OK and r.append is not None
    assert await services.commitlog_flush.flush_commitlog() >= r.append.wrote_offset + r.append.wrote_bytes
    assert not pipe.alive and threaded  # synced by the thread from then on
    assert not pid_alive(pid)
    await store.shutdown()


async def test_an_end_the_fsync_in_flight_covers_rides_it_not_the_next_one(tmp_path):
    # A put written before the fsync started but registered after a later put (a turn's
    # puts register at its end) is answered by that fsync, not left for the next one; and
    # when it ends, the next fsync starts at once for the later put
    store = await _started(str(tmp_path / "s"))
    gc = store._services.group_commit  # type: ignore[union-attr]
    assert gc._proc is not None
    os.kill(gc._proc.pid, signal.SIGSTOP)  # the fsync asked for below waits for SIGCONT
    try:
        first = store.put_message(make_msg(0))  # a lone put: its fsync is asked for at once
        assert gc._inflight is not None
        second = store.put_message(make_msg(1))
        later = store.flush_waiter(second)
        riding = store.flush_waiter(first)
        assert later is not None and riding is not None and riding is not later
        assert not riding.done() and not later.done() and gc.pending == 2
    finally:
        os.kill(gc._proc.pid, signal.SIGCONT)
    assert await asyncio.wait_for(riding, 10) is True
    assert first.append is not None and second.append is not None
    flushed = store.commitlog.mfq.flushed_where
    assert first.append.wrote_offset + first.append.wrote_bytes <= flushed
    assert await asyncio.wait_for(later, 10) is True
    assert store.commitlog.mfq.flushed_where >= second.append.wrote_offset + second.append.wrote_bytes
    assert gc.pending == 0
    await store.shutdown()


async def test_puts_since_an_fsync_started_get_the_next_one_as_it_ends(tmp_path):
    # puts that no round holds yet (their turn has not ended), more than half as many as the
    # fsync in flight covers, are synced by an fsync started as it ends: the disk is not left
    # idle until they register
    store = await _started(str(tmp_path / "s"))
    gc = store._services.group_commit  # type: ignore[union-attr]
    assert gc._proc is not None
    os.kill(gc._proc.pid, signal.SIGSTOP)
    try:
        first = store.put_message(make_msg(0))  # lone: its fsync is asked for at once
        unregistered = store.put_message(make_msg(1))
    finally:
        os.kill(gc._proc.pid, signal.SIGCONT)
    assert first.append is not None and unregistered.append is not None
    end = unregistered.append.wrote_offset + unregistered.append.wrote_bytes
    async with asyncio.timeout(10):
        while store.commitlog.mfq.flushed_where < end:  # noqa: ASYNC110 - no event to wait on
            await asyncio.sleep(0.005)
    waiter = store.flush_waiter(unregistered)
    assert waiter is not None and waiter.done() and waiter.result() is True
    await store.shutdown()


async def test_a_lone_puts_request_follows_the_segment_being_written(tmp_path):
    # the group commit keeps the one-file request's bytes per segment: across a segment's end
    # every lone put is still acknowledged only once the file it went to is synced
    store = await _started(str(tmp_path / "s"))
    gc = store._services.group_commit  # type: ignore[union-attr]
    assert gc._proc is not None
    mfq = store.commitlog.mfq
    keys = []
    for i in range(120):  # ~1.1 KiB records in 64 KiB segments: two segment ends
        r = store.put_message(make_msg(i, body_size=1024))
        waiter = store.flush_waiter(r)
        assert waiter is not None and await waiter is True
        assert r.append is not None
        assert mfq.flushed_where >= r.append.wrote_offset + r.append.wrote_bytes
        if gc._request[0] not in keys:
            keys.append(gc._request[0])
            assert gc._request[1] == gc._request[0].encode()
    assert len(mfq.files) >= 3 and keys == [mf.sync_key for mf in mfq.files[: len(keys)]]
    await store.shutdown()


async def test_a_sync_flush_put_wakes_reput_once_a_turn_through_the_group_commit(tmp_path):
    # under SYNC_FLUSH the store's after_put is the group commit's poll itself (one call a put):
    # it wakes reput (its slice dispatches the put in the next turn) unless a wake-up is already
    # scheduled, and still starts a lone put's fsync
    store = await _started(str(tmp_path / "s"))
    services = store._services
    assert services is not None
    gc, reput = services.group_commit, services.reput
    assert store.commitlog.after_put == gc.poll
    woken: list[int] = []
    real = gc.wake_reput

    def counting() -> None:
        woken.append(1)
        real()

    gc.wake_reput = counting
    for turn in range(3):
        async with asyncio.timeout(5):
            while reput.scheduled:  # (the slice of what was put before runs first)  # noqa: ASYNC110
                await asyncio.sleep(0)
        rs = [store.put_message(make_msg(turn * 4 + i)) for i in range(4)]
        assert len(woken) == turn + 1 and reput.scheduled  # the turn's first put woke it
        waiter = store.flush_waiter(rs[-1])
        assert waiter is not None and await waiter is True
        async with asyncio.timeout(5):
            while store.get_max_offset_in_queue("TopicA", 0) < (turn + 1) * 4:  # noqa: ASYNC110
                await asyncio.sleep(0.001)
    await store.shutdown()
