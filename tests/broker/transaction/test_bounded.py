"""Issue 17: the resolved set and the startup read stay bounded however long the history.

A broker's services over a store in a temp dir (no sockets), END_TRANSACTION through its
processor: transactions resolved over several check runs, then a restart.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.broker.transaction.resolved import SEAL
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemoteSystemError
from pocketmq.remoting.protocol.message import properties_to_string
from pocketmq.store import MessageInner
from tests.broker.transaction.test_check_backlog import OP, OP_PROPS
from tests.broker.transaction.test_check_scan import HOST, services

ROUNDS, PER = 6, 40
COMMIT, ROLLBACK = "8", "12"
CONN: Any = argparse.Namespace(attrs={}, remote_addr="127.0.0.1:5555")


def half(broker: BrokerController, i: int, age_ms: int = 60_000) -> dict[str, str]:
    """Prepare one half born ``age_ms`` ago; the END_TRANSACTION fields naming it."""
    props = properties_to_string({"UNIQ_KEY": f"U{i}", "TRAN_MSG": "true", "PGROUP": "PG"})
    born_ms = int(time.time() * 1000) - age_ms
    inner = MessageInner("TxT", f"body-{i}".encode(), 0, 0, props, 4, born_ms, HOST, HOST, 0, 0)
    result: Any = broker.transactional_message_service.prepare_message(inner)
    broker.store.do_reput()
    return fields_of(i, result.append.logics_offset, result.append.wrote_offset)


def fields_of(i: int, queue_offset: int, commit_log_offset: int) -> dict[str, str]:
    return {
        "producerGroup": "PG", "tranStateTableOffset": str(queue_offset),
        "commitLogOffset": str(commit_log_offset), "msgId": f"U{i}", "transactionId": f"U{i}",
        "fromTransactionCheck": "false",
    }  # fmt: skip


def end(broker: BrokerController, fields: dict[str, str], kind: str = COMMIT) -> int:
    """END_TRANSACTION (answered); its code (SYSTEM_ERROR for a refusal, as the dispatcher)."""
    cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, {**fields, "commitOrRollback": kind})
    try:
        r = broker.end_transaction_processor.end_transaction(CONN, cmd)
    except RemoteSystemError as e:
        assert "already committed or rolled back" in str(e), e
        return ResponseCode.SYSTEM_ERROR
    assert isinstance(r, RemotingCommand)
    broker.store.do_reput()
    return r.code


def committed(broker: BrokerController) -> int:
    return broker.store.get_max_offset_in_queue("TxT", 0)


def run(broker: BrokerController) -> None:
    broker.transaction_check_service.check_once()
    broker.store.do_reput()


@pytest.mark.parametrize("read_back", [False, True])
def test_resolved_set_and_startup_read_stay_bounded(tmp_path: Any, read_back: bool) -> None:
    resolved: list[dict[str, str]] = []
    with services(tmp_path) as (broker, sent):
        svc = broker.transactional_message_service
        first = half(broker, 0)  # never answered: checked by every run, older than all the others
        n = 1
        for _ in range(ROUNDS):
            for _ in range(PER):
                fields = half(broker, n)
                if read_back:  # (END_TRANSACTION reads the half back, as after a restart)
                    svc.recent.clear()
                assert end(broker, fields, COMMIT if n % 2 else ROLLBACK) == ResponseCode.SUCCESS
                resolved.append(fields)
                n += 1
            run(broker)
            # every transaction of the round is resolved and passed: forgotten
            assert len(svc.done) < PER, len(svc.done)
        assert {h.msg_id for _, h, _ in sent} == {"U0"} and len(sent) == ROUNDS
        assert committed(broker) == ROUNDS * PER // 2
        # a late or repeated END_TRANSACTION of a forgotten transaction stores nothing
        for fields in (resolved[0], resolved[1], resolved[-1]):
            assert end(broker, fields) == ResponseCode.SYSTEM_ERROR
        assert committed(broker) == ROUNDS * PER // 2
        broker.consumer_offset_manager.persist()
    with services(tmp_path) as (broker, sent):
        svc = broker.transactional_message_service
        # the restart read the op records from the op progress on, not the whole op queue
        assert svc.counters.loaded_ops < PER, svc.counters.loaded_ops
        for fields in (resolved[0], resolved[-1]):
            assert end(broker, fields) == ResponseCode.SYSTEM_ERROR
        # the unresolved transaction older than all of them is still checked
        run(broker)
        assert [h.msg_id for _, h, _ in sent] == ["U0"]
        header = sent[0][1]
        copy = fields_of(0, header.tran_state_table_offset, header.commit_log_offset)
        assert end(broker, copy) == ResponseCode.SUCCESS
        assert committed(broker) == ROUNDS * PER // 2 + 1
        # resolved once: its copy and its first half are refused, before and after a run
        assert end(broker, copy) == ResponseCode.SYSTEM_ERROR
        assert end(broker, first) == ResponseCode.SYSTEM_ERROR
        run(broker)
        assert end(broker, copy) == ResponseCode.SYSTEM_ERROR
        assert end(broker, first, ROLLBACK) == ResponseCode.SYSTEM_ERROR
        assert committed(broker) == ROUNDS * PER // 2 + 1
        assert len(svc.done) < PER


def test_a_recent_half_resolved_through_its_copy_is_refused_once_forgotten(tmp_path: Any) -> None:
    """The recent table (END_TRANSACTION without a read back) still holds a half whose
    transaction was resolved through a check copy: once the resolved set forgot it, the table
    must not take a second commit of it either."""
    with services(tmp_path) as (broker, sent):
        svc = broker.transactional_message_service
        original = half(broker, 0)
        run(broker)  # checked: a copy
        header = sent[0][1]
        copy = fields_of(0, header.tran_state_table_offset, header.commit_log_offset)
        assert end(broker, copy) == ResponseCode.SUCCESS
        for _ in range(2):
            run(broker)  # the copy passed as resolved; the transaction forgotten
        assert len(svc.done) == 0
        assert end(broker, original) == ResponseCode.SYSTEM_ERROR
        oneway = RemotingCommand.request(
            RequestCode.END_TRANSACTION, {**original, "commitOrRollback": COMMIT}, oneway=True
        )
        with pytest.raises(RemoteSystemError, match="already committed"):
            broker.end_transaction_processor.end_transaction(CONN, oneway)
        svc.ends.flush_ends()
        broker.store.do_reput()
        assert committed(broker) == 1


def test_an_unresolved_checked_transaction_stays_committable_by_any_of_its_offsets(tmp_path: Any) -> None:
    """A transaction checked several times (copies past the progress) and answered late naming
    its first half: committed once, never checked again, also after a restart."""
    with services(tmp_path) as (broker, sent):
        svc = broker.transactional_message_service
        original = half(broker, 0)
        svc.recent.clear()
        for _ in range(3):
            run(broker)
        assert len(sent) == 3
        for i in range(1, 20):  # others resolved around it
            assert end(broker, half(broker, i), ROLLBACK) == ResponseCode.SUCCESS
        run(broker)
        sent.clear()
        assert end(broker, original) == ResponseCode.SUCCESS
        assert end(broker, original) == ResponseCode.SYSTEM_ERROR
        broker.consumer_offset_manager.persist()
    with services(tmp_path) as (broker, sent):
        assert end(broker, original) == ResponseCode.SYSTEM_ERROR
        run(broker)
        run(broker)
        assert sent == []
        assert committed(broker) == 1


def test_an_op_record_of_an_open_transaction_holds_the_op_progress(tmp_path: Any) -> None:
    """A transaction resolved by its first half's offset while a copy of it waits past the
    progress (the run stops at a younger half before it): its op record names only an offset
    below the progress, yet a restart must read it, or the copy would be committed again."""
    with services(tmp_path, transactionTimeOut=30_000) as (broker, sent):
        svc = broker.transactional_message_service
        original = half(broker, 0)  # due
        half(broker, 1, age_ms=0)  # not due for 30 s: every run stops there
        run(broker)  # the original copied past the young half
        assert len(sent) == 1 and svc.half_progress == 1
        copy = fields_of(0, sent[0][1].tran_state_table_offset, sent[0][1].commit_log_offset)
        svc.recent.clear()
        assert end(broker, original) == ResponseCode.SUCCESS  # a late answer to the first half
        run(broker)
        assert svc.op_progress == 0  # its op record names 0, below the progress, but 0 is open
        broker.consumer_offset_manager.persist()
    with services(tmp_path, transactionTimeOut=30_000) as (broker, sent):
        assert end(broker, copy) == ResponseCode.SYSTEM_ERROR
        assert end(broker, original) == ResponseCode.SYSTEM_ERROR
        assert committed(broker) == 1


def test_an_open_transaction_outlives_the_sealed_sets_dropped(tmp_path: Any) -> None:
    """The resolved set drops each sealed set of offsets once the progress passed its range; a
    transaction resolved there while still open (a copy of it waits past the progress) moves to
    ``far``: still refused by either offset, forgotten once the progress passes the copy."""
    # (each slice reads the test's clock, a second later each time: an hour keeps the young half
    # young through the runs' slices)
    with services(tmp_path, transactionTimeOut=3_600_000) as (broker, sent):
        svc = broker.transactional_message_service
        checker = broker.transaction_check_service
        original = half(broker, 0, age_ms=7_200_000)  # due
        n = 2 * SEAL + 5
        for i in range(1, n + 1):  # resolved, beyond the first chunk
            q = int(half(broker, i)["tranStateTableOffset"])
            svc.write_op(q, q)
        young = half(broker, n + 1, age_ms=0)  # not due: the runs stop there
        svc.recent.clear()
        svc.read_ops()  # (the op records first: the slice below decides one half, the original)
        checker.budget = 1
        checker.check_slice(checker.now_ms())  # the original checked: a copy past the young half
        assert len(sent) == 1 and svc.half_progress == 1 and 0 in svc.open_txs
        copy = fields_of(0, sent[0][1].tran_state_table_offset, sent[0][1].commit_log_offset)
        assert end(broker, original) == ResponseCode.SUCCESS  # resolved while open
        for i in range(n + 3, n + 3 + SEAL):  # more resolved after the copy: 0 sealed in the first set
            q = int(half(broker, i)["tranStateTableOffset"])
            svc.write_op(q, q)
        assert 0 in svc.done.sealed[0] and svc.done.bounds[0] == 0
        checker.budget = 512
        run(broker)
        assert svc.half_progress == n + 1 and svc.done.bounds[0] > 0 and svc.done.far == {0}
        assert set(svc.done) == {0} | set(range(n + 3, n + 3 + SEAL))
        for fields in (original, copy):
            assert end(broker, fields) == ResponseCode.SYSTEM_ERROR
        assert end(broker, young, ROLLBACK) == ResponseCode.SUCCESS
        run(broker)  # the progress passes the copy: the transaction is over, 0 forgotten
        assert 0 not in svc.open_txs and len(svc.done) == 0
        for fields in (original, copy):
            assert end(broker, fields) == ResponseCode.SYSTEM_ERROR
        assert committed(broker) == 1


def test_a_recent_half_resolved_before_a_seal_is_refused_below_cur_lo(tmp_path: Any) -> None:
    """A recent half resolved another way (a check's discard writes its op) and then sealed out
    of ``cur``: the oneway END path's test of ``cur`` misses it, the test below ``cur_lo`` finds
    it, and the END is refused (never a second copy)."""
    with services(tmp_path) as (broker, _):
        svc = broker.transactional_message_service
        fields = half(broker, 0)
        q, offset = int(fields["tranStateTableOffset"]), int(fields["commitLogOffset"])
        svc.write_op(q, q)  # (resolved; the recent table still holds it)
        svc.done.update(range(q + 1, q + 1 + SEAL))  # (more resolved: cur sealed, q with it)
        assert q < svc.done.cur_lo and q not in svc.done.cur and q in svc.done
        assert offset in svc.recent.entries
        assert not svc.ends.end_oneway_read(offset, q, "PG", True)
        oneway = RemotingCommand.request(
            RequestCode.END_TRANSACTION, {**fields, "commitOrRollback": COMMIT}, oneway=True
        )
        with pytest.raises(RemoteSystemError, match="already committed"):
            broker.end_transaction_processor.end_transaction(CONN, oneway)
        assert committed(broker) == 0


def test_the_op_records_this_process_stores_are_not_read_back(tmp_path: Any) -> None:
    """Op records stored by END_TRANSACTION (a oneway one's turn, an answered one read back)
    are known to the check run as they are stored: ``op_read`` passes them, ``op_named`` holds
    what each names, and the run reads none back; one stored another way is read as before."""
    with services(tmp_path) as (broker, _):
        svc = broker.transactional_message_service
        halves = [half(broker, i) for i in range(6)]
        start = svc.op_read
        for i, fields in enumerate(halves[:3]):  # oneway: stored at the turn's end (flush_ends)
            kind = COMMIT if i % 2 == 0 else ROLLBACK
            oneway = RemotingCommand.request(
                RequestCode.END_TRANSACTION, {**fields, "commitOrRollback": kind}, oneway=True
            )
            broker.end_transaction_processor.end_transaction(CONN, oneway)
        svc.recent.clear()
        for i, fields in enumerate(halves[3:]):  # answered, read back: put_commit / write_op
            assert end(broker, fields, COMMIT if i % 2 == 0 else ROLLBACK) == ResponseCode.SUCCESS
        broker.store.do_reput()
        op_end = broker.store.get_max_offset_in_queue(OP, 0)
        assert op_end == start + 6 and svc.op_read == op_end
        assert [svc.op_named.get(o) for o in range(start, op_end)] == [
            int(h["tranStateTableOffset"]) for h in halves
        ]
        assert svc.read_ops() == 0
        # a record stored another way (not through the service): read, and the next ones with it
        broker.store.put_message(MessageInner(OP, b"77", 0, 0, OP_PROPS, 0, 1, HOST, HOST))
        assert end(broker, half(broker, 6), ROLLBACK) == ResponseCode.SUCCESS
        broker.store.do_reput()
        assert svc.op_read == op_end and svc.read_ops() == 2 and 77 in svc.done
        assert svc.op_named.get(op_end) == 77 and svc.op_read == op_end + 2
