"""kill -9 a real store process at random moments; every acknowledged message must survive.

SYNC_FLUSH: a child puts 100k messages (64 concurrent producers, group commit) and prints each
acknowledgement; it is SIGKILLed at 10 random points and restarted (abnormal recovery each
time). After every kill the parent reopens the store and checks that every acknowledged
message is readable by offset and through its ConsumeQueue, and that the ConsumeQueues match
the CommitLog exactly. ASYNC_FLUSH: the page cache survives kill -9, so nothing acknowledged
may be lost either.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time

import pytest

from pocketmq.remoting.protocol.message import decode_messages
from pocketmq.store import GetMessageStatus, MessageStore
from pocketmq.store.dispatch.dispatcher import DispatchRequest
from pocketmq.store.recovery.recover import scan_commit_log

sys.path.insert(0, os.path.dirname(__file__))
from store_crash_child import QUEUES, TOPIC, config, message  # noqa: E402

pytestmark = pytest.mark.fault

CHILD = os.path.join(os.path.dirname(__file__), "store_crash_child.py")


class Child:
    def __init__(self, root: str, flush: str, first: int, count: int, script: str = CHILD) -> None:
        self.acks: list[tuple[int, int, int]] = []
        #: index -> record size; the last CommitLog fsync reported (``power_loss_child.py``)
        self.sizes: dict[int, int] = {}
        self.flushed = 0
        self.ready = threading.Event()
        self.done = False
        self.proc = subprocess.Popen(
            [sys.executable, script, root, flush, str(first), str(count), "64"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("A "):
                _, i, phy, qoff, size = line.split()
                self.acks.append((int(i), int(phy), int(qoff)))
                self.sizes[int(i)] = int(size)
            elif line.startswith("F "):
                self.flushed = max(self.flushed, int(line.split()[1]))
            elif line.startswith("READY"):
                self.ready.set()
            elif line.startswith("DONE"):
                self.done = True

    def kill_after(self, delay: float) -> None:
        assert self.ready.wait(30), self.proc.stderr.read() if self.proc.poll() is not None else "no READY"  # type: ignore[union-attr]
        time.sleep(delay)
        self.proc.kill()
        self.proc.wait()
        self.reader.join(10)

    def finish(self) -> None:
        self.proc.wait(60)
        self.reader.join(10)
        assert self.proc.returncode == 0, self.proc.stderr.read()  # type: ignore[union-attr]


def _verify(root: str, flush: str, acked: dict[int, tuple[int, int]], fresh: list[int], clean: bool) -> int:
    store = MessageStore(config(root, flush))
    store.load()
    try:
        assert store.last_shutdown_clean == clean
        # fresh acknowledgements: the exact record at the acknowledged offset
        for i in fresh:
            phy, qoff = acked[i]
            msg = store.look_message_by_offset(phy)
            assert msg is not None, f"acked message {i} missing at {phy}"
            assert msg.body == message(i).body and msg.queue_offset == qoff and msg.keys == f"k{i}"
        # every acknowledged message is served through its ConsumeQueue
        served: dict[int, int] = {}
        for q in range(QUEUES):
            offset, expect = 0, 0
            while True:
                g = store.get_message("g", TOPIC, q, offset, 32)
                if g.status is not GetMessageStatus.FOUND:
                    assert g.status is GetMessageStatus.OFFSET_OVERFLOW_ONE or g.max_offset == 0
                    break
                for m in decode_messages(g.body):
                    assert m.queue_offset == expect and m.queue_id == q
                    expect += 1
                    served[int(m.body.split(b"-")[1])] = m.commit_log_offset
                offset = g.next_begin_offset
        missing = [i for i in acked if served.get(i) != acked[i][0]]
        assert not missing, f"{len(missing)} acknowledged messages not served, e.g. {missing[:5]}"
        # the ConsumeQueues hold exactly the CommitLog's records, in order
        from_log: dict[int, list[int]] = {q: [] for q in range(QUEUES)}

        def on_record(req: DispatchRequest) -> None:
            assert req.topic == TOPIC and req.consume_queue_offset == len(from_log[req.queue_id])
            from_log[req.queue_id].append(req.commit_log_offset)

        end = scan_commit_log(
            store.commitlog, store.get_min_phy_offset(), on_record, check_crc=True, delay_levels=[1]
        )
        assert end == store.get_max_phy_offset()
        for q in range(QUEUES):
            cq = store.cq_table.find(TOPIC, q)
            units = [phy for _, phy, _, _ in cq.iter_units()] if cq is not None else []
            assert units == from_log[q]
        return sum(len(v) for v in from_log.values())
    finally:
        store.close()
        # leave an abort file behind as if this process had crashed too: the next child
        # recovers abnormally again (and the parent verifies after the child's own kill)
        open(os.path.join(root, "abort"), "w").close()


def _run(tmp_path, flush: str, total: int, kills: int, delays: tuple[float, float]) -> None:
    root = str(tmp_path / "store")
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    acked: dict[int, tuple[int, int]] = {}
    first = 0
    for round_no in range(kills + 1):
        remaining = total - len(acked)
        if remaining == 0:
            break
        child = Child(root, flush, first, remaining)
        if round_no < kills:
            child.kill_after(rng.uniform(*delays))
        else:
            child.finish()
        fresh = [i for i, _, _ in child.acks]
        for i, phy, qoff in child.acks:
            acked[i] = (phy, qoff)
        first += remaining  # indexes never repeat across rounds (unacked puts may be stored)
        stored = _verify(root, flush, acked, fresh, child.done)
        assert stored >= len(acked)
    assert len(acked) == total


def test_sync_flush_kill_9_loses_no_acknowledged_message(tmp_path):
    _run(tmp_path, "SYNC_FLUSH", total=100_000, kills=10, delays=(0.05, 0.4))


def test_async_flush_kill_9_loses_nothing_page_cache_survives(tmp_path):
    _run(tmp_path, "ASYNC_FLUSH", total=60_000, kills=3, delays=(0.05, 0.3))
