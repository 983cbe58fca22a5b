"""Recovery corruption table, all cases through ONE routine (etcd repair_test style):
write, corrupt, reopen, exact survivors, append, re-read, reopen again, re-read."""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from pocketmq.store import MessageStore

from .conftest import crash, make_msg, pull_all, tiny_config

N = 240  # ~ 4 CommitLog segments of 64 KiB, 8 CQ files per queue
QUEUES = 3
SEG = 64 * 1024


@dataclass
class Written:
    root: str
    records: list[tuple[int, int]]  # (offset, size) in put order

    def path_of(self, offset: int) -> tuple[str, int]:
        base = offset - offset % SEG
        return os.path.join(self.root, "commitlog", f"{base:020d}"), offset - base

    def cq_dir(self, q: int) -> str:
        return os.path.join(self.root, "consumequeue", "TopicA", str(q))


def _patch(path: str, pos: int, fn: Callable[[bytes], bytes], n: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        old = f.read(n)
        f.seek(pos)
        f.write(fn(old))


def _flip(b: bytes) -> bytes:
    return bytes(x ^ 0x5A for x in b)


# each corruption returns how many records (in put order) must survive
def truncate_mid_record(w: Written) -> int:
    j = N - 30
    off, size = w.records[j]
    path, pos = w.path_of(off)
    os.truncate(path, pos + size // 2)
    return j


def truncate_at_record_boundary(w: Written) -> int:
    j = N - 7
    path, pos = w.path_of(w.records[j][0])
    os.truncate(path, pos)
    return j


def flip_body(w: Written) -> int:
    j = N - 12
    off, size = w.records[j]
    path, pos = w.path_of(off)
    _patch(path, pos + 100, _flip, 3)
    return j


def flip_crc(w: Written) -> int:
    j = N - 40
    path, pos = w.path_of(w.records[j][0])
    _patch(path, pos + 8, _flip, 4)
    return j


def flip_length(w: Written) -> int:
    j = N - 3
    path, pos = w.path_of(w.records[j][0])
    _patch(path, pos, lambda b: (int.from_bytes(b, "big") ^ 0x10).to_bytes(4, "big"), 4)
    return j


def zero_a_page(w: Written) -> int:
    target = w.records[N - 20][0] + 10
    path, pos = w.path_of(target)
    page = pos - pos % 4096
    _patch(path, page, lambda b: bytes(len(b)), 4096)
    page_abs = target - target % 4096
    return next(i for i, (off, size) in enumerate(w.records) if off + size > page_abs)


def delete_checkpoint(w: Written) -> int:
    os.unlink(os.path.join(w.root, "checkpoint"))
    return N


def delete_last_cq_file(w: Written) -> int:
    d = w.cq_dir(1)
    os.unlink(os.path.join(d, sorted(os.listdir(d))[-1]))
    return N


def delete_middle_cq_file(w: Written) -> int:
    d = w.cq_dir(2)
    os.unlink(os.path.join(d, sorted(os.listdir(d))[3]))
    return N


def delete_whole_cq_dir(w: Written) -> int:
    d = w.cq_dir(0)
    for n in os.listdir(d):
        os.unlink(os.path.join(d, n))
    os.rmdir(d)
    return N


def stale_abort_file(w: Written) -> int:
    open(os.path.join(w.root, "abort"), "w").close()
    return N


def nothing(w: Written) -> int:
    return N


CASES = [
    # (corruption, how the writer stopped)
    (truncate_mid_record, "crash"),
    (truncate_mid_record, "clean"),
    (truncate_at_record_boundary, "crash"),
    (flip_body, "crash"),
    (flip_body, "clean"),
    (flip_crc, "crash"),
    (flip_length, "clean"),
    (flip_length, "crash"),
    (zero_a_page, "crash"),
    (zero_a_page, "clean"),
    (delete_checkpoint, "crash"),
    (delete_last_cq_file, "crash"),
    (delete_last_cq_file, "clean"),
    (delete_middle_cq_file, "clean"),
    (delete_whole_cq_dir, "crash"),
    (stale_abort_file, "clean"),
    (nothing, "crash"),
    (nothing, "clean"),
]


def _open(root: str) -> MessageStore:
    s = MessageStore(tiny_config(root))
    s.load()
    return s


def _check_all_served(store: MessageStore, expected_bodies: list[list[bytes]]) -> None:
    for q in range(QUEUES):
        msgs = pull_all(store, "TopicA", q)
        assert [m.queue_offset for m in msgs] == list(range(len(expected_bodies[q])))
        assert [m.body for m in msgs] == expected_bodies[q]
        for m in msgs:  # nothing failing its CRC is ever served
            assert zlib.crc32(m.body) & 0x7FFFFFFF == m.body_crc
        assert store.get_max_offset_in_queue("TopicA", q) == len(expected_bodies[q])


@pytest.mark.parametrize(("corrupt", "stop"), CASES, ids=[f"{c.__name__}-{s}" for c, s in CASES])
def test_corruption_table(tmp_path, corrupt, stop):
    root = str(tmp_path / "store")
    store = _open(root)
    msgs = [make_msg(i, queue_id=i % QUEUES, body_size=700 + i % 50) for i in range(N)]
    records = []
    for m in msgs:
        a = store.put_message(m).append
        records.append((a.wrote_offset, a.wrote_bytes))
    store.do_reput()
    if stop == "crash":
        crash(store)
    else:
        store.close()
    w = Written(root, records)

    survivors = corrupt(w)

    store = _open(root)
    assert store.last_shutdown_clean == (stop == "clean" and corrupt is not stale_abort_file)
    end = records[survivors - 1][0] + records[survivors - 1][1] if survivors else 0
    assert store.get_max_phy_offset() == end
    expected: list[list[bytes]] = [[] for _ in range(QUEUES)]
    for i in range(survivors):
        expected[i % QUEUES].append(msgs[i].body)
    _check_all_served(store, expected)
    for i in range(survivors):
        assert store.look_message_by_offset(records[i][0]).body == msgs[i].body  # type: ignore[union-attr]

    # append after repair, then everything (old survivors + new) is served in order
    for i in range(N, N + 30):
        m = make_msg(i, queue_id=i % QUEUES, body_size=333)
        assert store.put_message(m).is_ok
        expected[i % QUEUES].append(m.body)
    store.do_reput()
    _check_all_served(store, expected)
    # keys of survivors and new messages are found; lost ones are not
    assert len(store.query_message("TopicA", f"key-{N + 29}", 4, 0, 2**62).messages) == 1
    if survivors < N:
        lost = store.query_message("TopicA", f"key-{N - 1}", 4, 0, 2**62).messages
        assert lost == []
    crash(store)  # a second, unclean reopen must not revive stale bytes either
    store = _open(root)
    _check_all_served(store, expected)
    store.close()
    store = _open(root)
    assert store.last_shutdown_clean
    _check_all_served(store, expected)
    store.close()


def test_empty_store_reopens_and_lock_is_exclusive(tmp_path):
    from pocketmq.store import StoreLockedError

    root = str(tmp_path / "s")
    a = _open(root)
    with pytest.raises(StoreLockedError):
        _open(root)
    a.close()
    b = _open(root)
    assert b.get_max_phy_offset() == 0 and b.last_shutdown_clean
    crash(b)
    c = _open(root)
    assert not c.last_shutdown_clean and c.get_max_phy_offset() == 0
    c.close()
    assert not os.path.exists(os.path.join(root, "abort"))


def test_abnormal_recovery_starts_from_the_checkpoint(tmp_path):
    """With a fresh checkpoint only the last segments are rescanned (CRC checked)."""
    from .conftest import FakeClock

    root = str(tmp_path / "s")
    clock = FakeClock()
    store = MessageStore(tiny_config(root), clock=clock)
    store.load()
    for i in range(400):
        store.put_message(make_msg(i, body_size=700))
        clock.advance(100)
    store.do_reput()
    store.flush()  # checkpoint = last record time
    for i in range(400, 420):
        store.put_message(make_msg(i, body_size=700))
        clock.advance(100)
    # corrupt a record in the FIRST segment: abnormal recovery must not even look there
    first = os.path.join(root, "commitlog", f"{0:020d}")
    crash(store)
    _patch(first, 8 + 5000, _flip, 2)  # inside some record's body
    store = MessageStore(tiny_config(root), clock=clock)
    store.load()
    assert store.get_max_offset_in_queue("TopicA", 0) == 420
    store.close()
