"""T3: power loss simulated at the store level (issue 23).

A child process puts messages (64 concurrent producers) and reports every acknowledgement and
every completed CommitLog fsync; it is SIGKILLed at a random moment, and then every CommitLog
byte written after the last completed fsync is dropped (zeroed), except a random part of that
tail, as the kernel's page writeback might have saved it: the last record is usually torn.
Then the store recovers (abnormal recovery), and:

* SYNC_FLUSH: every acknowledged message ends before the last fsync and is served through its
  ConsumeQueue — nothing acknowledged is lost;
* ASYNC_FLUSH: every acknowledged message that ends before the last fsync is served; only the
  tail after it may be lost (counted);
* the torn record is cut: the recovered CommitLog ends at or before the cut, and the
  ConsumeQueues hold exactly the CommitLog's records;
* recovering the same damaged image twice gives the same state.
The next round continues on the recovered store.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
from pathlib import Path

import pytest

from pocketmq.remoting.protocol.message import decode_messages
from pocketmq.store import GetMessageStatus, MessageStore
from pocketmq.store.dispatch.dispatcher import DispatchRequest
from pocketmq.store.recovery.recover import scan_commit_log

sys.path.insert(0, os.path.dirname(__file__))
from store_crash_child import QUEUES, TOPIC, config  # noqa: E402
from test_store_crash import Child  # noqa: E402

pytestmark = pytest.mark.fault

CHILD = os.path.join(os.path.dirname(__file__), "power_loss_child.py")


def drop_after(root: str, cut: int) -> None:
    """Zero every CommitLog byte at or after physical offset ``cut`` (power loss)."""
    d = os.path.join(root, "commitlog")
    for name in os.listdir(d):
        start = int(name)
        path = os.path.join(d, name)
        size = os.path.getsize(path)
        if start + size <= cut:
            continue
        with open(path, "r+b") as f:
            f.seek(max(0, cut - start))
            f.write(b"\0" * (size - max(0, cut - start)))


def recovered_state(root: str, flush: str) -> tuple[int, dict[int, list[int]], dict[int, int]]:
    """(max phy offset, ConsumeQueue units per queue, served index -> phy) after recovery."""
    store = MessageStore(config(root, flush))
    store.load()
    try:
        served: dict[int, int] = {}
        for q in range(QUEUES):
            offset = 0
            while True:
                g = store.get_message("g", TOPIC, q, offset, 32)
                if g.status is not GetMessageStatus.FOUND:
                    break
                for m in decode_messages(g.body):
                    served[int(m.body.split(b"-")[1])] = m.commit_log_offset
                offset = g.next_begin_offset
        from_log: dict[int, list[int]] = {q: [] for q in range(QUEUES)}

        def on_record(req: DispatchRequest) -> None:
            from_log[req.queue_id].append(req.commit_log_offset)

        end = scan_commit_log(
            store.commitlog, store.get_min_phy_offset(), on_record, check_crc=True, delay_levels=[1]
        )
        assert end == store.get_max_phy_offset()
        units: dict[int, list[int]] = {}
        for q in range(QUEUES):
            cq = store.cq_table.find(TOPIC, q)
            units[q] = [phy for _, phy, _, _ in cq.iter_units()] if cq is not None else []
            assert units[q] == from_log[q], f"queue {q}: ConsumeQueue differs from the CommitLog"
        return store.get_max_phy_offset(), units, served
    finally:
        store.close()
        open(os.path.join(root, "abort"), "w").close()  # as if crashed again


def run_power_loss(root: Path, flush: str, rounds: int) -> tuple[int, int, int]:
    """Returns (acknowledged, lost among those durable, lost in the unflushed tail)."""
    store_dir = str(root / "store")
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    acked: dict[int, tuple[int, int]] = {}  # index -> (phy, end)
    first = 0
    lost_durable = lost_tail = 0
    durable = 0  # what the previous round recovered is on disk before the next child starts
    for _ in range(rounds):
        child = Child(store_dir, flush, first, 1_000_000, script=CHILD)
        child.kill_after(rng.uniform(0.3, 1.2))
        first += 1_000_000
        flushed = max(child.flushed, durable)
        cut = flushed + rng.randrange(0, 3 * 4096)  # part of the tail survives: a torn record
        drop_after(store_dir, cut)
        fresh = {i: (phy, phy + child.sizes[i]) for i, phy, _q in child.acks}
        if flush == "SYNC_FLUSH":  # an ack is given after its fsync
            late = [i for i, (_p, end) in fresh.items() if end > flushed]
            assert not late, f"acknowledged before their fsync: {late[:5]}"
        copy = str(root / "copy")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(store_dir, copy)
        max_phy, units, served = recovered_state(store_dir, flush)
        durable = max_phy
        assert max_phy <= cut, f"recovered CommitLog ends at {max_phy}, after the cut {cut}: torn record kept"
        again = recovered_state(copy, flush)
        assert again[0] == max_phy and again[1] == units, "recovering the same image twice differs"
        for i, (phy, end) in fresh.items():
            if served.get(i) == phy:
                acked[i] = (phy, end)
            elif end <= flushed:
                lost_durable += 1
            else:
                lost_tail += 1
        missing = [i for i, (phy, _e) in acked.items() if served.get(i) != phy]
        assert not missing, f"earlier acknowledged messages lost: {missing[:5]}"
    assert lost_durable == 0, f"{lost_durable} acknowledged messages before the last fsync lost"
    return len(acked) + lost_tail, lost_durable, lost_tail


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_t3_power_loss_keeps_everything_flushed_and_cuts_the_torn_record(tmp_path: Path, flush: str) -> None:
    acknowledged, lost_durable, lost_tail = run_power_loss(tmp_path, flush, rounds=3)
    assert acknowledged > 0 and lost_durable == 0
    if flush == "SYNC_FLUSH":
        assert lost_tail == 0
