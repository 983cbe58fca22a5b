"""indexProcessEnable: the index built by a second process (store/index/process/main.py).

The reference is the in-process index: for the same records, the files the child writes must be
byte-identical (file names aside: they carry creation times). Also: queries see the child's
entries, restarts continue, a killed child is replaced without double or lost entries, a killed
store leaves a recoverable index, and the checkpoint's index time follows the child's flushes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from pocketmq.remoting.protocol.message import decode_message
from pocketmq.store import MessageInner, MessageStore
from pocketmq.store.index.hash import index_key_hash
from pocketmq.store.index.scan import KeyHashCache, index_range, scan_keys
from pocketmq.store.log.layout import INDEX_ENTRY, INDEX_HEADER

from .conftest import BORN_HOST, STORE_HOST, FakeClock, tiny_config

FAR = 2**62
V6 = (bytes(range(1, 17)), 9876)


def _msg(i: int, props: str, *, queue_id: int = 0, sys_flag: int = 0, v6: bool = False) -> MessageInner:
    return MessageInner(
        topic="TopicA",
        body=f"body-{i}".encode() * 3,
        queue_id=queue_id,
        properties=props,
        sys_flag=sys_flag,
        born_timestamp=1_700_000_000_000 + i,
        born_host=V6 if v6 else BORN_HOST,
        store_host=STORE_HOST,
    )


def _props(i: int, keys: str | None = None) -> str:
    k = f"order-{i}" if keys is None else keys
    return f"TAGS\x01TagA\x02KEYS\x01{k}\x02UNIQ_KEY\x01UNIQ{i:028X}\x02WAIT\x01true"


#: records whose index entries are easy to get wrong: property placement, odd keys, tx flags
ODD: list[tuple[str, dict[str, object]]] = [
    ("UNIQ_KEY\x01FIRST0000000000000001\x02KEYS\x01a b", {}),  # UNIQ_KEY starts the string
    ("XKEYS\x01decoy\x02KEYS\x01real-1\x02XUNIQ_KEY\x01no", {}),  # names that end like ours
    ("KEYS\x01\x02UNIQ_KEY\x01", {}),  # empty values: nothing indexed
    ("KEYS\x01  ab  c   dddd  \x02TAGS\x01t", {}),  # empty tokens, keys shorter than 4
    ("KEYS\x01заказ-1 注文-二 𝄞𝄞𝄞𝄞 ключ\x02UNIQ_KEY\x01ÄÖÜ-0001", {}),  # non-ASCII, astral
    ("KEYS\x01tail\x01x1\x02", {}),  # a \x01 in a key's tail, trailing separator
    ("KEYS\x01rolled-back", {"sys_flag": 0xC}),  # rollback: not indexed
    ("KEYS\x01prepared", {"sys_flag": 0x4}),  # prepared: indexed
    ("KEYS\x01ipv6-host\x02UNIQ_KEY\x01V6000000000000000001", {"v6": True}),
    ("", {}),  # no properties
    # PROPERTIESLENGTH 258 and 514: its low byte is the separator's value
    ("KEYS\x01len-258\x02PAD\x01" + "p" * 241, {}),
    ("UNIQ_KEY\x01LEN514000000000000000\x02PAD\x01" + "p" * 479, {}),
]


def _put_workload(store: MessageStore, clock: FakeClock, start: int, n: int) -> int:
    """Singles, odd records and 8-message batches; returns the next message number."""
    i = start
    for k in range(n):
        if k % 10 == 3:
            props, kw = ODD[k // 10 % len(ODD)]
            assert store.put_message(_msg(i, props, **kw)).is_ok  # type: ignore[arg-type]
            i += 1
        elif k % 10 == 7:
            q = k % 3
            assert store.put_messages([_msg(i + j, _props(i + j), queue_id=q) for j in range(8)]).is_ok
            i += 8
        else:
            assert store.put_message(_msg(i, _props(i))).is_ok
            i += 1
        clock.advance(370)
    return i


def _index_bytes(root: str, sub: str = "index") -> list[bytes]:
    d = os.path.join(root, sub)
    names = sorted(n for n in os.listdir(d) if len(n) == 17 and n.isdigit())
    out = []
    for n in names:
        with open(os.path.join(d, n), "rb") as f:
            out.append(f.read())
    return out


def _entries(root: str) -> list[tuple[int, int]]:
    """(keyHash, phyOffset) of every entry below each file's header count."""
    out = []
    for data in _index_bytes(root):
        *_, slots_used, count = INDEX_HEADER.unpack_from(data, 0)
        del slots_used
        slot_num = 16
        base = INDEX_HEADER.size + slot_num * 4
        for i in range(1, count):
            h, phy, _diff, _prev = INDEX_ENTRY.unpack_from(data, base + i * INDEX_ENTRY.size)
            out.append((h, phy))
    return out


async def _drain(store: MessageStore, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while store.dispatch_behind_bytes:
        assert time.monotonic() < deadline, "index process did not catch up"
        await asyncio.sleep(0.005)


def _reference(tmp_path, *parts: int, reopen: bool = False) -> list[bytes]:
    """The in-process index of the same workload (``_put_workload`` calls of ``parts`` sizes,
    the store closed and reopened between them if ``reopen``)."""
    root = str(tmp_path / "ref")
    clock = FakeClock()
    store = MessageStore(tiny_config(root), clock=clock)
    store.load()
    nxt = 0
    for k, n in enumerate(parts):
        if reopen and k:
            store.close()
            store = MessageStore(tiny_config(root), clock=clock)
            store.load()
        nxt = _put_workload(store, clock, nxt, n)
        store.do_reput()
    store.close()
    return _index_bytes(root)


async def _open_child_store(root: str, clock: FakeClock, **kw: object) -> MessageStore:
    store = MessageStore(tiny_config(root, index_process_enable=True, **kw), clock=clock)
    store.load()
    await store.start()
    return store


def test_scan_matches_reput_hashes(tmp_path) -> None:
    """``scan_keys`` over the raw records = the hashes reput computes from the strings."""
    clock = FakeClock()
    store = MessageStore(tiny_config(str(tmp_path / "s"), message_index_enable=False), clock=clock)
    store.load()
    _put_workload(store, clock, 0, 40)
    store.do_reput()
    expected = []
    mfq = store.commitlog.mfq
    off = mfq.min_offset()
    while off < store.commitlog.max_offset:
        mf = mfq.find_by_offset(off)
        assert mf is not None
        raw = store.get_message_bytes_by_offset(off)
        if raw is None:  # BLANK at the segment's end
            off = mf.file_from_offset + mf.file_size
            continue
        msg = decode_message(raw, read_body=False)
        if msg.sys_flag & 0xC != 0xC:
            uniq, keys = msg.get_property("UNIQ_KEY"), msg.get_property("KEYS")
            if uniq:
                expected.append((index_key_hash(f"TopicA#{uniq}"), off))
            expected += [(index_key_hash(f"TopicA#{k}"), off) for k in (keys or "").split(" ") if k]
        off += len(raw)
    got: list[tuple[int, int]] = []
    for mf in mfq.files:
        hashes: list[int] = []
        phys: list[int] = []
        tss: list[int] = []
        cache = KeyHashCache()
        for _ in range(2):  # a cold and a warm cache give the same hashes
            hashes.clear()
            phys.clear()
            scan_keys(mf.mm, mf.file_from_offset, 0, mf.wrote_position, cache, hashes, phys, tss)
        got += zip(hashes, phys, strict=True)
    assert got == expected
    store.close()


def test_index_range_in_process_is_byte_identical(tmp_path) -> None:
    """The scan + ``put_hashes`` (what the child runs) against reput's own index."""
    ref = _reference(tmp_path, 120)
    clock = FakeClock()
    root = str(tmp_path / "scan")
    store = MessageStore(tiny_config(root, message_index_enable=False), clock=clock)
    store.load()
    _put_workload(store, clock, 0, 120)
    store.do_reput()
    mfq = store.commitlog.mfq

    def seg(off: int):  # type: ignore[no-untyped-def]
        mf = mfq.find_by_offset(off)
        return None if mf is None else (mf.mm, mf.file_from_offset, mf.file_size)

    end = store.commitlog.max_offset
    off = 0
    while off < end:  # small steps, as the child's chunks
        off, _ = index_range(seg, store.index, KeyHashCache(), off, min(end, off + 1500))
    store.close()
    assert len(ref) > 3  # the tiny index files rolled
    assert _index_bytes(root) == ref


async def test_child_index_is_byte_identical_and_queryable(tmp_path) -> None:
    ref = _reference(tmp_path, 120)
    clock = FakeClock()
    root = str(tmp_path / "child")
    store = await _open_child_store(root, clock)
    child = store.dispatcher.index_child
    assert child is not None and not store.dispatcher.index_enable
    _put_workload(store, clock, 0, 120)
    await _drain(store)
    # the running child's entries are visible to queries (incl. files it created)
    r = store.query_message("TopicA", "order-5", 32, 0, FAR)
    assert [decode_message(m).get_property("KEYS") for m in r.messages] == ["order-5"]
    r = store.query_message("TopicA", "注文-二", 32, 0, FAR)
    assert len(r.messages) == 1
    assert store.query_message("TopicA", "rolled-back", 32, 0, FAR).messages == []
    assert len(store.query_message("TopicA", "prepared", 32, 0, FAR).messages) == 1
    assert len(store.query_message("TopicA", "ipv6-host", 32, 0, FAR).messages) == 1
    await store.shutdown()
    assert store.dispatcher.index_child is None
    assert _index_bytes(root) == ref


async def test_shutdown_and_restart_continue(tmp_path) -> None:
    ref = _reference(tmp_path, 50, 50, reopen=True)
    clock = FakeClock()
    root = str(tmp_path / "child")
    store = await _open_child_store(root, clock)
    nxt = _put_workload(store, clock, 0, 50)
    await store.shutdown()
    store = await _open_child_store(root, clock)
    _put_workload(store, clock, nxt, 50)
    await _drain(store)
    assert len(store.query_message("TopicA", "order-1", 32, 0, FAR).messages) == 1
    assert len(store.query_message("TopicA", f"order-{nxt + 1}", 32, 0, FAR).messages) == 1
    await store.shutdown()
    assert _index_bytes(root) == ref


async def test_killed_child_is_restarted_without_double_or_lost_entries(tmp_path) -> None:
    ref = _reference(tmp_path, 80, 80)
    clock = FakeClock()
    root = str(tmp_path / "child")
    store = await _open_child_store(root, clock)
    services = store._services
    assert services is not None and services.index_proc is not None
    proc = services.index_proc
    nxt = _put_workload(store, clock, 0, 80)
    deadline = time.monotonic() + 10
    while proc.indexed == 0:  # killed while at work, not while starting
        assert time.monotonic() < deadline
        await asyncio.sleep(0.001)
    first = proc.proc
    assert first is not None
    os.kill(first.pid, signal.SIGKILL)
    _put_workload(store, clock, nxt, 80)
    deadline = time.monotonic() + 10
    while proc.proc is None or proc.proc is first:
        assert time.monotonic() < deadline, "the index process was not restarted"
        await asyncio.sleep(0.02)
    await _drain(store)
    assert len(store.query_message("TopicA", f"order-{nxt + 2}", 32, 0, FAR).messages) == 1
    await store.shutdown()
    assert _index_bytes(root) == ref


async def test_checkpoint_index_time_follows_the_childs_flushes(tmp_path) -> None:
    clock = FakeClock()
    root = str(tmp_path / "child")
    # no periodic flushes during the test; 64 entries per file: no roll (a roll flushes)
    store = await _open_child_store(root, clock, flush_interval_consume_queue=600_000, max_index_num=4096)
    cp = store.checkpoint
    assert cp is not None
    for i in range(20):
        store.put_message(_msg(i, _props(i)))
        clock.advance(1000)
    last_ts = clock.now - 1000
    await _drain(store)
    services = store._services
    assert services is not None
    await services.cq_flush.run_once()
    assert cp.logics_msg_timestamp == last_ts
    assert cp.index_msg_timestamp == 0  # indexed, but the child has not flushed yet
    await store.shutdown()  # the child flushes when told to stop
    store = MessageStore(tiny_config(root, max_index_num=4096), clock=clock)
    store.load()
    assert store.checkpoint is not None and store.checkpoint.index_msg_timestamp == last_ts
    store.close()


_KILLED_STORE = textwrap.dedent(
    """
    import asyncio, itertools, os, signal, sys
    from pocketmq.store import MessageInner, MessageStore, MessageStoreConfig
    cfg = MessageStoreConfig(
        store_path_root_dir=sys.argv[1], mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=200, max_hash_slot_num=16, max_index_num=64,
        index_process_enable=True, flush_interval_consume_queue=20,
    )
    lag = sys.argv[2] == "lag"
    def msg(i):
        props = f"KEYS\\x01k-{i}\\x02UNIQ_KEY\\x01U{i:031d}"
        return MessageInner(topic="T", body=b"x" * 200, queue_id=i % 4, properties=props)
    async def main():
        # lag: store times 100 ms apart, so the checkpoint decides where recovery starts
        clock = itertools.count(1_700_000_000_000, 100).__next__
        store = MessageStore(cfg, clock=clock) if lag else MessageStore(cfg)
        store.load()
        await store.start()
        for i in range(400):
            if lag and i == 100:  # the index process stops; reput and checkpoints go on
                child = store._services.index_proc
                while not child.state.slots[5]:  # PID: it has started (its death signal set)
                    await asyncio.sleep(0.005)
                os.kill(child.proc.pid, signal.SIGSTOP)
            store.put_message(msg(i))
            if i % 50 == 0:
                await asyncio.sleep(0.01)
        while store.dispatcher.reput_from_offset < store.commitlog.max_offset:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.1)  # checkpoints (ConsumeQueue times) written meanwhile
        for i in range(400, 600):
            store.put_message(msg(i))
        await asyncio.sleep(0)
        print(store._services.index_proc.proc.pid, flush=True)
        await asyncio.sleep(60)
    asyncio.run(main())
    """
)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def _run_and_kill(root: str, mode: str) -> int:
    """Run ``_KILLED_STORE``, kill -9 it once it has written; returns its child's pid."""
    parent = subprocess.Popen([sys.executable, "-c", _KILLED_STORE, root, mode], stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    finally:
        if parent.poll() is None:
            parent.kill()
    return child_pid


@pytest.mark.parametrize("mode", ["plain", "lag"])
async def test_killed_store_leaves_a_recoverable_index(tmp_path, mode: str) -> None:
    """kill -9 of the store: its index process exits too; recovery leaves every record findable
    once and no entry past the CommitLog. ``lag``: the index process was stopped long before,
    so the index is far behind the ConsumeQueues (recovery must start early enough)."""
    root = str(tmp_path / "killed")
    child_pid = _run_and_kill(root, mode)
    deadline = time.monotonic() + 5
    while not _gone(child_pid):
        assert time.monotonic() < deadline, "the index process outlived its store"
        await asyncio.sleep(0.01)
    cfg = tiny_config(root, index_process_enable=True)
    store = MessageStore(cfg.model_copy(update={"flush_interval_consume_queue": 20}))
    store.load()
    assert not store.last_shutdown_clean
    end = store.commitlog.max_offset
    await store.start()
    await _drain(store)
    found = [len(store.query_message("T", f"k-{i}", 32, 0, FAR).messages) for i in range(600)]
    phys = [phy for _, phy in _entries(root)]
    await store.shutdown()
    assert found == [1] * 600
    assert all(p < end for p in phys)
    assert len(phys) == len(set(_entries(root))) == 1200  # UNIQ_KEY + KEYS, none twice


@pytest.mark.parametrize("enable", [False, True])
def test_config_key(enable: bool, tmp_path) -> None:
    from pocketmq.store import MessageStoreConfig

    cfg = MessageStoreConfig.model_validate(
        {"storePathRootDir": str(tmp_path), "indexProcessEnable": "true" if enable else "false"}
    )
    assert cfg.index_process_enable is enable


@pytest.mark.parametrize("entries_written", [True, False])
def test_a_slice_cut_by_a_kill_is_repaired(tmp_path, entries_written: bool) -> None:
    """A child killed inside ``put_hashes`` leaves slots (and maybe entries) past the header;
    the next child's load repairs them, so redoing the slice writes the same bytes."""
    import random

    from pocketmq.store.index.file import IndexService
    from pocketmq.store.index.process.main import load_last

    rnd = random.Random(7)
    slices = []
    phy = 100
    for _ in range(3):
        n = rnd.randrange(5, 15)
        hashes = [rnd.randrange(0, 2**31) for _ in range(n)]
        slices.append(
            (hashes, [phy + 10 * k for k in range(n)], [1_700_000_000_000 + phy + k for k in range(n)])
        )
        phy += 10 * n

    def service(name: str) -> IndexService:
        return IndexService(str(tmp_path / name), 16, 64, FakeClock())

    ref = service("ref")
    for s in slices:
        ref.put_hashes(*s)
        ref.write_headers()
    ref.close()
    cut = service("cut")
    cut.put_hashes(*slices[0])
    cut.write_headers()
    f = cut.files[-1]
    header = bytes(f.mf.mm[: INDEX_HEADER.size])
    start = f.entries_base + f.index_count * INDEX_ENTRY.size
    cut.put_hashes(*slices[1])  # killed before the header write ...
    assert len(cut.files) == 1
    f.mf.mm[: INDEX_HEADER.size] = header
    if not entries_written:  # ... or even before the entries were packed (slots set first)
        size = len(slices[1][0]) * INDEX_ENTRY.size
        f.mf.mm[start : start + size] = bytes(size)
    f.mf.close()
    again = service("cut")
    load_last(again)
    for s in slices[1:]:
        again.put_hashes(*s)
        again.write_headers()
    again.close()
    assert _index_bytes(str(tmp_path), "cut") == _index_bytes(str(tmp_path), "ref")


async def test_dispatch_behind_includes_the_childs_lag(tmp_path) -> None:
    clock = FakeClock()
    store = await _open_child_store(str(tmp_path / "child"), clock)
    services = store._services
    assert services is not None and services.index_proc is not None and services.index_proc.proc is not None
    pid = services.index_proc.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        for i in range(20):
            store.put_message(_msg(i, _props(i)))
        deadline = time.monotonic() + 10
        while store.dispatcher.reput_from_offset < store.commitlog.max_offset:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.005)
        # consumable (ConsumeQueue written), not yet findable by key, and counted as behind
        assert store.get_max_offset_in_queue("TopicA", 0) == 20
        assert store.query_message("TopicA", "order-3", 32, 0, FAR).messages == []
        assert store.dispatch_behind_bytes == store.commitlog.max_offset
        assert store.runtime_info()["dispatchBehindBytes"] == str(store.commitlog.max_offset)
    finally:
        os.kill(pid, signal.SIGCONT)
    await _drain(store)
    assert len(store.query_message("TopicA", "order-3", 32, 0, FAR).messages) == 1
    await store.shutdown()


async def test_a_child_that_keeps_failing_falls_back_to_in_process_indexing(tmp_path, monkeypatch) -> None:
    from pocketmq.store.index.process import control as index_child

    clock = FakeClock()
    store = await _open_child_store(str(tmp_path / "child"), clock)
    services = store._services
    assert services is not None and services.index_proc is not None
    proc = services.index_proc
    monkeypatch.setattr(index_child.sys, "executable", "/bin/false")  # every restart fails
    assert proc.proc is not None
    proc.proc.kill()
    _put_workload(store, clock, 0, 30)
    deadline = time.monotonic() + 20
    while store.dispatcher.index_child is not None:
        assert time.monotonic() < deadline, "no fallback to in-process indexing"
        await asyncio.sleep(0.05)
    assert store.dispatcher.index_enable and not store.index.shared
    _put_workload(store, clock, 100, 5)
    await _drain(store)
    assert len(store.query_message("TopicA", "order-1", 32, 0, FAR).messages) == 1
    assert len(store.query_message("TopicA", "order-101", 32, 0, FAR).messages) == 1
    await store.shutdown()


def test_a_blank_shorter_than_a_record_prefix_ends_the_segment(tmp_path) -> None:
    """192-byte records leave 64 bytes at the end of a 64 KiB segment: a BLANK too short for
    the scan's 88-byte read."""
    clock = FakeClock()
    roots = {}
    for name, index_on in (("ref", True), ("scan", False)):
        root = roots[name] = str(tmp_path / name)
        store = MessageStore(tiny_config(root, message_index_enable=index_on), clock=clock)
        store.load()
        for i in range(700):
            props = f"KEYS\x01k-{i:04d}"
            msg = MessageInner(topic="TopicA", body=b"b" * 84, properties=props, born_host=BORN_HOST)
            result = store.put_message(msg)
            assert result.append is not None and result.append.wrote_bytes == 192
        store.do_reput()
        if not index_on:
            mfq = store.commitlog.mfq
            assert len(mfq.files) > 1 and mfq.files[0].file_size % 192 == 64

            def seg(off: int, mfq=mfq):  # type: ignore[no-untyped-def]
                mf = mfq.find_by_offset(off)
                return None if mf is None else (mf.mm, mf.file_from_offset, mf.file_size)

            index_range(seg, store.index, KeyHashCache(), 0, store.commitlog.max_offset)
        store.close()
    assert _index_bytes(roots["scan"]) == _index_bytes(roots["ref"])


def _chains_complete(svc) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    """Every entry below each header count, checking that its bucket's chain reaches it."""
    out = []
    for f in svc.files:
        mm, base = f.mf.mm, f.entries_base
        entries = [INDEX_ENTRY.unpack_from(mm, base + i * INDEX_ENTRY.size) for i in range(f.index_count)]
        for i in range(1, f.index_count):
            h, phy, _diff, _prev = entries[i]
            out.append((h, phy))
            j = f.mf.aux[h % f.slot_num]
            seen = set()
            while j != i:
                assert 0 < j < f.index_count and j not in seen, f"entry {i} unreachable in {f.path}"
                seen.add(j)
                j = entries[j][3]
    return out


def test_a_kill_while_rolling_to_a_new_file_is_settled(tmp_path) -> None:
    """Killed inside ``_new_file``: the new file has no header yet and the full one's last
    header write is missing. The next load undoes the unrecorded entries and indexes them again:
    every entry once, every chain complete."""
    import random

    from pocketmq.store.index.file import IndexService
    from pocketmq.store.index.process.main import load_last

    rnd = random.Random(3)
    slices = []
    phy = 100
    for _ in range(12):
        n = 10  # 1 + 6 * 10 entries, then a slice of which 3 fit: the roll is inside a slice
        hashes = [rnd.randrange(0, 2**31) for _ in range(n)]
        slices.append(
            (hashes, [phy + 10 * k for k in range(n)], [1_700_000_000_000 + phy + k for k in range(n)])
        )
        phy += 10 * n
    cut = IndexService(str(tmp_path / "cut"), 16, 64, FakeClock())
    done = 0
    while len(cut.files) < 2:
        f = cut.files[-1] if cut.files else None
        header = bytes(f.mf.mm[: INDEX_HEADER.size]) if f is not None else b""
        cut.put_hashes(*slices[done])
        if len(cut.files) == 2:  # this slice rolled: undo both header writes
            assert f is not None and f.index_count == 64 and INDEX_HEADER.unpack(header)[5] == 61
            f.mf.mm[: INDEX_HEADER.size] = header
            cut.files[1].mf.mm[: INDEX_HEADER.size] = bytes(INDEX_HEADER.size)
        else:
            cut.write_headers()
            done += 1
    for f in cut.files:
        f.mf.close()
    again = IndexService(str(tmp_path / "cut"), 16, 64, FakeClock())
    redo = load_last(again)  # the last record of the full file: its slice is redone too
    assert redo == slices[done - 1][1][-1]
    for s in slices[done - 1 :]:
        again.put_hashes(*s)
        again.write_headers()
    again.close()
    final = IndexService(str(tmp_path / "cut"), 16, 64, FakeClock())
    final.load(adopt=False)
    got = _chains_complete(final)
    final.close()
    expected = [(h, p) for hashes, phys, _ in slices for h, p in zip(hashes, phys, strict=True)]
    assert sorted(got) == sorted(expected)


async def test_cleanup_deletes_old_files_while_the_child_writes(tmp_path) -> None:
    clock = FakeClock()
    root = str(tmp_path / "child")
    store = await _open_child_store(root, clock)
    nxt = _put_workload(store, clock, 0, 60)
    await _drain(store)
    before = len(_index_bytes(root))
    assert before > 2
    # what the clean service does once the CommitLog start moved past every old file
    assert store.index.delete_expired(store.commitlog.max_offset) == before - 1
    _put_workload(store, clock, nxt, 60)
    await _drain(store)
    assert len(store.query_message("TopicA", f"order-{nxt + 1}", 32, 0, FAR).messages) == 1
    assert store.query_message("TopicA", "order-1", 32, 0, FAR).messages == []  # deleted
    await store.shutdown()
    assert len(_index_bytes(root)) > 1


async def test_no_child_without_the_index(tmp_path) -> None:
    store = await _open_child_store(str(tmp_path / "s"), FakeClock(), message_index_enable=False)
    assert store.dispatcher.index_child is None and store._services is not None
    assert store._services.index_proc is None
    store.put_message(_msg(1, _props(1)))
    await _drain(store)
    assert store.query_message("TopicA", "order-1", 32, 0, FAR).messages == []
    await store.shutdown()
