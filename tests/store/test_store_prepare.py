"""ConsumeQueue files are made off the loop thread and ahead of need (issue 21): at topic creation
(``MessageStore.prepare_topic``) and before a queue rolls to its next file."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from pocketmq.store import MessageStore
from pocketmq.store.log import mapped_file as mapped_file_module
from pocketmq.store.services import prepare as prepare_module
from tests.waiting import wait_until

from .conftest import make_msg, pull_all, tiny_config

CQ_SIZE = 100 * 20  # 100 units per file


@pytest.fixture
def creations(monkeypatch) -> list[tuple[str, int]]:
    """``(thread name, size)`` of every new file sized (sparse files are sized by ``_extend``)."""
    seen: list[tuple[str, int]] = []
    real = mapped_file_module._extend

    def spy(fd: int, size: int) -> None:
        seen.append((threading.current_thread().name, size))
        real(fd, size)

    monkeypatch.setattr(mapped_file_module, "_extend", spy)
    return seen


async def _started(root: str) -> MessageStore:
    store = MessageStore(tiny_config(root, mapped_file_size_consume_queue=CQ_SIZE))
    store.load()
    await store.start()
    return store


def _exists(*parts: str) -> bool:
    return os.path.exists(os.path.join(*parts))


def _cq_threads(creations: list[tuple[str, int]]) -> list[str]:
    return [name for name, size in creations if size == CQ_SIZE]


async def _prepared(store: MessageStore) -> None:
    """Wait for the preparations in flight (their futures are the event)."""
    services = store._services
    assert services is not None
    for fut in list(services.prepare._pending.values()):
        await asyncio.wrap_future(fut)


async def test_a_new_topics_first_files_are_made_off_the_loop(tmp_path, creations) -> None:
    store = await _started(str(tmp_path / "s"))
    loop_thread = threading.current_thread().name
    store.prepare_topic("NewTopic", 8)
    # the first sends follow at once: the queues take the prepared files (waiting if need be)
    for i in range(16):
        assert store.put_message(make_msg(i, topic="NewTopic", queue_id=i % 8)).is_ok
    store.do_reput()
    threads = _cq_threads(creations)
    assert len(threads) == 8 and loop_thread not in threads
    assert all(t.startswith("store-prepare") for t in threads)
    assert store._services is not None and store._services.prepare.taken == 8
    for q in range(8):
        cq = store.cq_table.find("NewTopic", q)
        assert cq is not None and cq.mfq.files[0].prefaulted == CQ_SIZE  # first-touched too
        assert [m.queue_offset for m in pull_all(store, "NewTopic", q)] == [0, 1]
    await store.shutdown()


async def test_a_queue_roll_finds_its_next_file_ready(tmp_path, creations) -> None:
    store = await _started(str(tmp_path / "s"))
    services = store._services
    assert services is not None
    loop_thread = threading.current_thread().name
    for i in range(60):  # 60 % of the first file: past NEXT_FILE_RATIO
        store.put_message(make_msg(i))
    store.do_reput()
    await services.cq_flush.run_once()  # the pass that looks ahead over the queues written
    await _prepared(store)
    assert _exists(store.config.consume_queue_dir, "TopicA", "0", f"{CQ_SIZE:020d}")
    taken = services.prepare.taken
    for i in range(60, 130):  # rolls into the second file
        store.put_message(make_msg(i))
    store.do_reput()
    cq = store.cq_table.find("TopicA", 0)
    assert cq is not None and len(cq.mfq.files) == 2
    assert services.prepare.taken == taken + 1
    threads = _cq_threads(creations)
    # the very first file of an auto-created queue is made inline (nothing created the topic
    # first); the second one was made by the preparer
    assert threads[0] == loop_thread and threads[1:] == ["store-prepare_0"]
    assert [m.queue_offset for m in pull_all(store, "TopicA", 0)] == list(range(130))
    await store.shutdown()


async def test_unused_prepared_files_are_removed_on_delete_and_shutdown(tmp_path) -> None:
    store = await _started(str(tmp_path / "s"))
    root = store.config.consume_queue_dir
    store.prepare_topic("Gone", 2)
    store.prepare_topic("Idle", 1)
    await _prepared(store)
    store.prepare_topic("Gone", 2)  # asked twice: one file per queue
    assert sorted(os.listdir(os.path.join(root, "Gone"))) == ["0", "1"]
    store.delete_topics(["Gone"])
    assert not _exists(root, "Gone")
    assert os.listdir(os.path.join(root, "Idle", "0")) == [f"{0:020d}"]
    await store.shutdown()
    assert os.listdir(os.path.join(root, "Idle", "0")) == []


async def test_prefault_window_advances_ahead_of_the_writer(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(prepare_module, "WINDOW", 4096)
    store = MessageStore(tiny_config(str(tmp_path / "s"), mapped_file_size_consume_queue=20 * 3000))
    store.load()
    await store.start()
    services = store._services
    assert services is not None
    store.prepare_topic("W", 1)
    store.put_message(make_msg(0, topic="W"))
    store.do_reput()
    cq = store.cq_table.find("W", 0)
    assert cq is not None
    mf = cq.mfq.files[0]
    assert mf.prefaulted == 4096
    for i in range(1, 120):  # 2,400 bytes: past half the window
        store.put_message(make_msg(i, topic="W"))
    store.do_reput()
    await services.cq_flush.run_once()
    assert mf.prefaulted == 2 * 4096  # the next window, from the end of the first
    await store.shutdown()


async def test_commitlog_blocks_are_reserved_off_the_loop_ahead_of_the_writer(tmp_path, monkeypatch) -> None:
    """The writer's ``fallocate`` (a step ahead of its appends) finds the blocks reserved by the
    allocation thread, so the loop makes none in steady state."""
    from pocketmq.store.services import allocate as allocate_module

    monkeypatch.setattr(allocate_module, "RESERVE_WINDOW", 64 * 1024)
    monkeypatch.setattr(mapped_file_module, "ALLOCATION_STEP", 4096)
    calls: list[str] = []
    real = mapped_file_module._allocate

    def spy(fd: int, start: int, length: int) -> None:
        calls.append(threading.current_thread().name)
        real(fd, start, length)

    monkeypatch.setattr(mapped_file_module, "_allocate", spy)
    store = MessageStore(tiny_config(str(tmp_path / "s"), mapped_file_size_commit_log=1 << 20))
    store.load()
    await store.start()
    services = store._services
    assert services is not None
    loop_thread = threading.current_thread().name
    first_round: list[str] = []
    for i in range(40):  # ~8 KiB per round: a quarter of the window, well inside it
        for j in range(30):
            store.put_message(make_msg(i * 30 + j, body_size=150))
        # the reput pass that asks for the next window, then the I/O thread's work, are the events
        await wait_until(lambda: store.dispatch_behind_bytes == 0)
        await asyncio.wrap_future(services.prepare_executor.submit(lambda: None))
        if i == 0:
            # the first segment is created inline when the store starts, and reserves its own
            # first steps before the I/O thread is asked for anything
            first_round = list(calls)
    assert store.get_max_phy_offset() > 4 * 64 * 1024  # several windows
    later = calls[len(first_round) :]
    assert loop_thread not in later, calls
    # the windows are the prepare thread's; the I/O thread may meanwhile create the next segment
    # with its first blocks (when, against the rounds, depends on the machine's load)
    assert sum(t.startswith("store-prepare") for t in later) >= 4, calls
    assert all(t.startswith(("store-prepare", "store-io")) for t in later), calls
    await store.shutdown()


async def test_an_index_roll_finds_its_next_file_ready(tmp_path, creations) -> None:
    """tiny_config: 64 entries per IndexFile; each message has a KEYS and a UNIQ_KEY entry."""
    store = await _started(str(tmp_path / "s"))
    services = store._services
    assert services is not None and services.index_prepare is not None
    index_size = store.index.file_size
    loop_thread = threading.current_thread().name
    for i in range(20):  # 40 entries: past half of the first file
        store.put_message(make_msg(i))
    store.do_reput()
    await services.cq_flush.run_once()
    pending = services.index_prepare._pending
    assert pending is not None
    await asyncio.wrap_future(pending)
    for i in range(20, 40):  # rolls to the second file
        store.put_message(make_msg(i))
    store.do_reput()
    assert len(store.index.files) == 2 and services.index_prepare.taken == 2
    names = sorted(os.listdir(store.config.index_dir))
    assert len(names) == 2 and all(len(n) == 17 and n.isdigit() for n in names)  # renamed
    threads = [name for name, size in creations if size == index_size]
    # both ahead: the first when the fresh store started, the second half way through the first
    assert threads == ["store-prepare_0", "store-prepare_0"] and loop_thread not in threads
    for i in (0, 39):
        found = store.query_message("TopicA", f"key-{i}", 10, 0, 1 << 62)
        assert len(found.messages) == 1
    await store.shutdown()


@pytest.mark.parametrize("role", ["ASYNC_MASTER", "SLAVE"])
async def test_a_fresh_store_starts_with_its_first_files_made(tmp_path, creations, role) -> None:
    """A fresh master's first CommitLog segment (offset 0) and a fresh store's first IndexFile
    exist once it has started, so its first put creates no file on the loop (issue 21). A
    slave's first segment is where the master's transfer starts: it is not made ahead."""
    store = MessageStore(tiny_config(str(tmp_path / "s"), broker_role=role))
    store.load()
    await store.start()
    services = store._services
    assert services is not None and services.index_prepare is not None
    pending = services.index_prepare._pending
    assert pending is not None  # the first IndexFile, made in the prepare thread
    await asyncio.wrap_future(pending)
    segments = [mf.file_from_offset for mf in store.commitlog.mfq.files]
    assert segments == ([] if role == "SLAVE" else [0])
    if role == "SLAVE":
        await store.shutdown()
        return
    loop_thread = threading.current_thread().name
    made = len(creations)
    store.put_message(make_msg(0))
    store.do_reput()
    store.dispatcher.write_index_backlog()  # the first index entries: the file taken
    assert services.index_prepare.taken == 1 and len(store.index.files) == 1
    assert store.commitlog.mfq.files[0].file_from_offset == 0 and store.get_max_phy_offset() > 0
    # (the queue's first ConsumeQueue file is made at the topic's creation, not tested here)
    cq_size = store.config.mapped_file_size_consume_queue
    assert loop_thread not in [name for name, size in creations[made:] if size != cq_size], creations
    assert len(store.query_message("TopicA", "key-0", 10, 0, 1 << 62).messages) == 1
    written = store.get_max_phy_offset()
    await store.shutdown()
    # a restart finds the segment with the message (and nothing to redo)
    again = MessageStore(tiny_config(str(tmp_path / "s")))
    again.load()
    assert again.get_max_phy_offset() == written
    again.close()
