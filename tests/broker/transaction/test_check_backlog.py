"""The check run over a large op backlog: op records read in place and in slices, the resolved
set forgotten a stretch per slice, other tasks running between slices (issue 21: a run read a
minute of op records at once and held a busy broker's loop for seconds)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.broker.transaction.records import op_records
from pocketmq.remoting.protocol.message import (
    MessageDecodeError,
    decode_messages,
    encode_message,
    properties_to_string,
)
from pocketmq.remoting.protocol.route import RMQ_SYS_TRANS_OP_HALF_TOPIC
from pocketmq.store import MessageInner
from tests.broker.transaction.test_check_scan import HOST, V6, prepare, services

OP = RMQ_SYS_TRANS_OP_HALF_TOPIC
OP_PROPS = properties_to_string({"TAGS": "d"})  # (what the broker writes: read without decoding)


def store_op(broker: BrokerController, body: bytes, props: str = OP_PROPS) -> None:
    """An op record put straight into the store (not through the service: ``done`` does not
    learn it, only a read of the op queue does)."""
    result = broker.store.put_message(MessageInner(OP, body, 0, 0, props, 0, 1, HOST, HOST))
    assert result.append is not None


def op_view(buf: bytes) -> list[tuple[int, bytes | None]]:
    """What the service read from op records before: decode_messages, then tag and body."""
    return [(m.queue_offset, m.body if m.tags == "d" else None) for m in decode_messages(buf)]


def records() -> bytes:
    return b"".join(
        (
            encode_message(topic=OP, body=b"12", properties=OP_PROPS, queue_offset=5),
            encode_message(topic=OP, body=b"3,4", properties="TAGS\x01d\x02", queue_offset=6),
            encode_message(topic=OP, body=b"x", properties="KEYS\x01k\x02TAGS\x01d", queue_offset=7),
            encode_message(topic=OP, body=b"9", properties="TAGS\x01e\x02", queue_offset=8),
            encode_message(topic="Other", body=b"", properties="", queue_offset=1 << 40),
            encode_message(
                topic=OP, body=b"77", properties=OP_PROPS, born_host=V6, store_host=V6, queue_offset=9
            ),
            encode_message(topic=OP, body=b"78", properties=OP_PROPS, born_host=V6, queue_offset=10),
        )
    )


def test_op_records_read_what_decode_messages_decodes() -> None:
    buf = records()
    want = op_view(buf)
    assert [q for q, _ in want] == [5, 6, 7, 8, 1 << 40, 9, 10]
    assert op_records(buf) == want
    assert op_records(b"") == []


def outcome(read: Any, buf: bytes) -> Any:
    try:
        return read(buf)
    except MessageDecodeError:
        return "refused"


def test_op_records_refuse_what_decode_messages_refuses() -> None:
    buf = records()
    rng = random.Random(17)
    cases = [buf[:n] for n in range(0, len(buf), 7)]  # truncated anywhere
    for _ in range(3000):  # one byte changed anywhere (sizes, magic, lengths, UTF-8, tags)
        at = rng.randrange(len(buf))
        cases.append(buf[:at] + bytes([rng.randrange(256)]) + buf[at + 1 :])
    cases.append(buf[:-1] + b"\xff")  # properties not UTF-8
    refused = 0
    for case in cases:
        got = outcome(op_records, case)
        assert got == outcome(op_view, case), case
        refused += got == "refused"
    assert refused > 100


def backlog(broker: BrokerController, halves: int, filler: int) -> list[int]:
    """``halves`` due halves, the even ones resolved by op records the run has to read, behind
    ``filler`` op records naming halves long gone; the halves' offsets."""
    offsets = [prepare(broker, i) for i in range(halves)]
    for q in offsets[::2]:
        store_op(broker, str(q).encode())
    for i in range(filler):
        store_op(broker, b"%d" % (1_000_000 + i))
    broker.store.do_reput()
    return offsets


def run_beside(broker: BrokerController, turn: Callable[[int], None], cap: int = 1 << 30) -> int:
    """One check run (``run_once``) on a loop where another task calls ``turn(n)`` at its n-th
    turn (up to ``cap`` turns) until the run ends; how many turns it had."""
    turns, finished = 0, False

    async def other() -> None:
        nonlocal turns
        while not finished and turns < cap:
            turn(turns)
            turns += 1
            await asyncio.sleep(0)

    async def main() -> None:
        nonlocal finished
        task = asyncio.ensure_future(other())
        await asyncio.sleep(0)  # (the other task's first turn before the run's first slice)
        await broker.transaction_check_service.run_once()
        finished = True
        await task

    asyncio.run(main())
    return turns


def test_a_check_run_reads_a_large_op_backlog_in_slices(tmp_path: Any) -> None:
    """20k op records not read yet (and one more stored during the run): the run reads them all
    before deciding a half, another task runs between its slices, and exactly the unresolved
    halves are checked."""
    with services(tmp_path) as (broker, sent):
        svc = broker.transactional_message_service
        checker = broker.transaction_check_service
        halves = backlog(broker, 40, 20_000)
        checker.budget = 500

        def turn(n: int) -> None:
            if n == 3:  # an op record stored while the run reads the backlog
                store_op(broker, str(halves[1]).encode())
                broker.store.do_reput()

        turns = run_beside(broker, turn)
        assert checker.runs == 1
        assert svc.op_read == broker.store.get_max_offset_in_queue(OP, 0)
        # (20k records at 500 a slice, 41 slices: the other task ran between every two)
        assert turns >= 40, turns
        assert sorted(h.msg_id for _, h, _ in sent) == sorted(f"U{i}" for i in range(3, 40, 2))
        assert svc.half_progress == 40


def test_the_resolved_set_is_forgotten_a_stretch_per_slice(tmp_path: Any) -> None:
    with services(tmp_path) as (broker, _):
        svc = broker.transactional_message_service
        checker = broker.transaction_check_service
        halves = [prepare(broker, i) for i in range(300)]
        for q in halves:
            svc.write_op(q, q)
        broker.store.do_reput()
        checker.budget = 16
        slices = 0
        while checker.check_slice(checker.now_ms()):
            slices += 1
            # never more than 2 * budget offsets forgotten per slice
            assert len(svc.done) >= 300 - 32 * (slices + 1) - 16 * slices
        assert svc.half_progress == 300 and svc.pruned_to == 300
        assert len(svc.done) == 0
        assert slices >= 300 // 32


def test_a_transaction_closed_below_the_pruned_stretch_leaves_the_resolved_set(tmp_path: Any) -> None:
    """A transaction still open when the prune passed its offset (a copy of it past the
    progress) leaves ``done`` when the progress passes that copy."""
    with services(tmp_path) as (broker, sent):
        svc = broker.transactional_message_service
        checker = broker.transaction_check_service
        first = prepare(broker, 0)
        checker.check_once()  # checked: a copy at 1 of transaction 0
        broker.store.do_reput()
        assert len(sent) == 1 and 0 in svc.open_txs
        copy = sent[0][1].tran_state_table_offset
        svc.write_op(copy, first)  # resolved through the copy: done = {1, 0}
        checker.check_once()  # the progress passes the copy: the transaction is over
        assert svc.half_progress == copy + 1 and 0 not in svc.open_txs
        assert set(svc.done) == set()


@pytest.mark.parametrize("ops", [0, 3])
def test_load_reads_the_op_records_from_the_op_progress(tmp_path: Any, ops: int) -> None:
    with services(tmp_path) as (broker, _):
        for i in range(ops):
            store_op(broker, b"%d" % i)
        broker.store.do_reput()
        broker.consumer_offset_manager.persist()
    with services(tmp_path) as (broker, _):
        svc = broker.transactional_message_service
        assert svc.counters.loaded_ops == ops
        assert set(svc.done) == set(range(ops))  # (at or past the half progress, 0: kept)


def test_a_run_ends_while_more_op_records_than_budget_arrive_between_slices(tmp_path: Any) -> None:
    """600 op records stored between every two slices of 500: the run still catches up with the
    op queue and decides the halves (a slice reads twice what arrived since the last one)."""
    with services(tmp_path) as (broker, sent):
        backlog(broker, 10, 5_000)
        broker.transaction_check_service.budget = 500

        def turn(n: int) -> None:
            for i in range(600):
                store_op(broker, b"%d" % (2_000_000 + n * 600 + i))
            broker.store.do_reput()

        assert run_beside(broker, turn, cap=200) < 200, (
            "the run did not catch up while op records kept arriving"
        )
        assert sorted(h.msg_id for _, h, _ in sent) == sorted(f"U{i}" for i in range(1, 10, 2))


def test_prune_step_prunes_again_from_a_progress_moved_back(tmp_path: Any) -> None:
    with services(tmp_path) as (broker, _):
        svc = broker.transactional_message_service
        for i in range(12):
            prepare(broker, i)
        svc.pruned_to = 100  # (pruned up to a progress since reset by an admin)
        svc.half_progress = 10
        svc.done.update({10, 11, 15})
        assert not svc.prune_step(1000)
        assert set(svc.done) == {10, 11, 15} and svc.pruned_to == 10
        svc.half_progress = 12  # (the next run passes 10 and 11)
        assert not svc.prune_step(1000)
        assert set(svc.done) == {15} and svc.pruned_to == 12
