"""Shared helpers for store tests: tiny files so rolling, cleanup and recovery really happen."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest

from pocketmq.remoting.protocol.message import MessageConst
from pocketmq.store import MessageInner, MessageStore, MessageStoreConfig

STORE_HOST = (b"\x0a\x00\x00\x01", 10911)
BORN_HOST = (b"\xc0\xa8\x00\x07", 40001)


def tiny_config(root: str, **overrides: object) -> MessageStoreConfig:
    base: dict[str, object] = {
        "store_path_root_dir": root,
        "mapped_file_size_commit_log": 64 * 1024,
        "mapped_file_size_consume_queue": 10 * 20,
        "max_hash_slot_num": 16,
        "max_index_num": 64,
        "flush_interval_commit_log": 20,
        "flush_interval_consume_queue": 20,
    }
    base.update(overrides)
    return MessageStoreConfig(**base)  # type: ignore[arg-type]


def make_msg(
    i: int,
    *,
    topic: str = "TopicA",
    queue_id: int = 0,
    body_size: int = 100,
    tags: str | None = "TagA",
    keys: str | None = None,
    extra: dict[str, str] | None = None,
    sys_flag: int = 0,
) -> MessageInner:
    props: dict[str, str] = {}
    if tags:
        props[MessageConst.TAGS] = tags
    props[MessageConst.KEYS] = keys if keys is not None else f"key-{i}"
    props[MessageConst.UNIQ_KEY] = f"UNIQ{i:028d}"
    if extra:
        props.update(extra)
    body = (f"msg-{i}-".encode() * (body_size // 6 + 1))[:body_size]
    return MessageInner(
        topic=topic,
        body=body,
        queue_id=queue_id,
        flag=i & 0xFF,
        properties=props,
        sys_flag=sys_flag,
        born_timestamp=1_700_000_000_000 + i,
        born_host=BORN_HOST,
        store_host=STORE_HOST,
    )


class FakeClock:
    """Wall-clock ms that tests move by hand (store timestamps, index names, retention)."""

    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def open_store(tmp_path) -> Iterator[Callable[..., MessageStore]]:
    """``open_store(**config_overrides, clock=...)`` -> a loaded store; all closed at teardown."""
    opened: list[MessageStore] = []
    counter = itertools.count()

    def _open(
        root: str | None = None, *, clock: Callable[[], int] | None = None, **overrides: object
    ) -> MessageStore:
        cfg = tiny_config(root or str(tmp_path / "store"), **overrides)
        store = MessageStore(cfg, clock=clock) if clock is not None else MessageStore(cfg)
        store.load()
        opened.append(store)
        next(counter)
        return store

    yield _open
    for s in opened:
        s.close()


def crash(store: MessageStore) -> None:
    """What kill -9 leaves behind: page cache as written, no final flush, ``abort`` still there,
    index headers not written back, lock released by the kernel."""
    store.commitlog.mfq.close()
    for cq in store.cq_table:
        cq.mfq.close()
    for f in store.index.files:
        f.mf.close()
    if store.checkpoint is not None:
        store.checkpoint.mf.close()
    if store._lock is not None:
        store._lock.release()
    store._state = "closed"


def pull_all(store: MessageStore, topic: str, queue_id: int, offset: int = 0, *, batch: int = 32) -> list:
    """Pull like a consumer (following next_begin_offset) until the queue end; decoded messages."""
    from pocketmq.remoting.protocol.message import decode_messages
    from pocketmq.store import GetMessageStatus

    out = []
    for _ in range(100_000):
        g = store.get_message("g", topic, queue_id, offset, batch)
        if g.status is GetMessageStatus.FOUND:
            out += decode_messages(g.body)
        elif (
            g.status is not GetMessageStatus.NO_MATCHED_MESSAGE
            and g.status is not GetMessageStatus.MESSAGE_WAS_REMOVING
        ):
            return out
        offset = g.next_begin_offset
    raise AssertionError("pull did not terminate")
