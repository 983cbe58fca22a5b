"""END_TRANSACTION and the check service over the wire, against a real in-process broker.

Half messages are sent by hand (the bytes a Java TransactionMQProducer sends); a second
connection heartbeats as the producer group and records the broker's CHECK_TRANSACTION_STATE.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.headers import CheckTransactionStateRequestHeader
from pocketmq.remoting.protocol.message import decode_message, decode_offset_msg_id
from pocketmq.remoting.protocol.registration import KVTable
from pocketmq.remoting.protocol.route import (
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from tests.broker.helpers import Wire, broker_and_wire, pull_until, running_broker
from tests.waiting import wait_until

COMMIT, ROLLBACK, UNKNOW = "8", "12", "0"


async def prepare(wire: Wire, key: str, *, topic: str = "TxT", group: str = "PG") -> dict[str, Any]:
    """Send one half message as a Java producer does; its END_TRANSACTION header fields."""
    r = await wire.send(
        topic, key.encode(), keys=key, props={"TRAN_MSG": "true", "PGROUP": group, "UNIQ_KEY": f"U{key}"},
        f="4", g=str(int(time.time() * 1000)),
    )  # fmt: skip
    assert r.code == ResponseCode.SUCCESS, r.remark
    _, _, phy = decode_offset_msg_id(r.ext("msgId") or "")
    return {
        "producerGroup": group,
        "tranStateTableOffset": r.ext("queueOffset") or "",
        "commitLogOffset": str(phy),
        "msgId": f"U{key}",
        "transactionId": f"U{key}",
        "fromTransactionCheck": "false",
    }


async def end(wire: Wire, fields: dict[str, str], kind: str) -> RemotingCommand:
    return await wire.call(RequestCode.END_TRANSACTION, {**fields, "commitOrRollback": kind})


def real_max(b: BrokerController, topic: str = "TxT") -> int:
    return b.store.get_max_offset_in_queue(topic, 0)


def forget_recent(b: BrokerController, read_back: bool) -> None:
    """``read_back``: END_TRANSACTION reads the half from the CommitLog (as after a restart)
    instead of taking it from the halves this process stored lately (``transaction.recent``)."""
    if read_back:
        b.transactional_message_service.recent.clear()


@pytest.mark.parametrize("read_back", [False, True])
async def test_prepare_is_invisible_then_commit_once(tmp_path, read_back: bool) -> None:
    async with broker_and_wire(str(tmp_path)) as (b, w):
        half = await prepare(w, "k1")
        forget_recent(b, read_back)
        assert real_max(b) == 0 and b.store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0) == 1
        stored = b.store.look_message_by_offset(int(half["commitLogOffset"]))
        assert stored is not None and stored.topic == RMQ_SYS_TRANS_HALF_TOPIC and stored.queue_id == 0
        assert stored.get_property("REAL_TOPIC") == "TxT" and stored.get_property("REAL_QID") == "0"
        assert stored.sys_flag & 0xC == 0
        r = await end(w, half, COMMIT)
        assert r.code == ResponseCode.SUCCESS
        [msg] = await pull_until(w, "TxT")
        assert msg.body == b"k1" and msg.uniq_key == "Uk1" and msg.sys_flag & 0xC == 0x8
        assert msg.prepared_transaction_offset == int(half["commitLogOffset"])
        # as Apache's committed copy: the half's whole map stays in the string, only the
        # sysFlag says committed
        assert (
            msg.get_property("TRAN_MSG"),
            msg.get_property("REAL_TOPIC"),
            msg.get_property("REAL_QID"),
        ) == ("true", "TxT", "0")
        op = b.store.get_message("G", RMQ_SYS_TRANS_OP_HALF_TOPIC, 0, 0, 1)
        [op_msg] = [decode_message(op.body)]
        assert op_msg.body == half["tranStateTableOffset"].encode() and op_msg.tags == "d"
        # a second commit or a rollback now: refused, nothing stored
        phy = b.store.get_max_phy_offset()
        for kind in (COMMIT, ROLLBACK):
            r = await end(w, half, kind)
            assert r.code == ResponseCode.SYSTEM_ERROR and "already committed or rolled back" in (
                r.remark or ""
            )
        assert b.store.get_max_phy_offset() == phy and real_max(b) == 1


@pytest.mark.parametrize("read_back", [False, True])
async def test_rollback_and_unknown(tmp_path, read_back: bool) -> None:
    async with broker_and_wire(str(tmp_path)) as (b, w):
        a, u = await prepare(w, "a"), await prepare(w, "u")
        forget_recent(b, read_back)
        assert (await end(w, a, ROLLBACK)).code == ResponseCode.SUCCESS
        phy = b.store.get_max_phy_offset()
        # UNKNOW: nothing done, nothing answered (as RocketMQ); sent oneway as clients do
        request = RemotingCommand.request(
            RequestCode.END_TRANSACTION, {**u, "commitOrRollback": UNKNOW}, oneway=True
        )
        await w.client.invoke_oneway(w.addr, request)
        # a request after it on the same connection: the UNKNOW was served before its reply
        assert (await end(w, a, COMMIT)).code == ResponseCode.SYSTEM_ERROR
        assert b.store.get_max_phy_offset() == phy and real_max(b) == 0
        assert (await end(w, u, COMMIT)).code == ResponseCode.SUCCESS
        assert real_max(b) == 1


@pytest.mark.parametrize(
    ("change", "remark"),
    [
        ({"producerGroup": "OtherPG"}, "The producer group wrong"),
        ({"tranStateTableOffset": "5"}, "The transaction state table offset wrong"),
        ({"commitLogOffset": "7"}, "Find prepared transaction message failed"),
        ({"commitLogOffset": "-1"}, "Find prepared transaction message failed"),
        ({"commitLogOffset": "999999999"}, "Find prepared transaction message failed"),
        ({"commitOrRollback": "5"}, "commitOrRollback 5 is not 0"),
        ({"commitLogOffset": "abc"}, "commitLogOffset"),
        ({"commitLogOffset": None}, "commitLogOffset"),
        ({"producerGroup": None}, "producerGroup"),
    ],
)
@pytest.mark.parametrize("read_back", [False, True])
async def test_bad_end_transaction_changes_nothing(
    tmp_path, change: dict[str, str | None], remark: str, read_back: bool
) -> None:
    async with broker_and_wire(str(tmp_path)) as (b, w):
        half = await prepare(w, "k")
        forget_recent(b, read_back)
        fields = {**half, "commitOrRollback": COMMIT, **change}
        phy = b.store.get_max_phy_offset()
        r = await w.call(RequestCode.END_TRANSACTION, {k: v for k, v in fields.items() if v is not None})
        assert r.code == ResponseCode.SYSTEM_ERROR and remark in (r.remark or ""), r.remark
        assert b.store.get_max_phy_offset() == phy and real_max(b) == 0
        assert (await end(w, half, COMMIT)).code == ResponseCode.SUCCESS  # still resolvable


async def test_end_transaction_naming_a_normal_message(tmp_path) -> None:
    async with broker_and_wire(str(tmp_path)) as (b, w):
        r = await w.send("TxT", b"plain", props={"PGROUP": "PG"})
        _, _, phy = decode_offset_msg_id(r.ext("msgId") or "")
        fields = {
            "producerGroup": "PG",
            "tranStateTableOffset": "0",
            "commitLogOffset": str(phy),
            "msgId": "x",
        }
        r = await end(w, fields, COMMIT)
        assert r.code == ResponseCode.SYSTEM_ERROR and "not a half message" in (r.remark or "")
        assert real_max(b) == 1


async def test_slave_refuses_end_transaction(tmp_path) -> None:
    async with broker_and_wire(str(tmp_path), brokerId=1, store={"brokerRole": "SLAVE"}) as (b, w):
        fields = {"producerGroup": "PG", "tranStateTableOffset": "0", "commitLogOffset": "0", "msgId": "x"}
        r = await end(w, fields, COMMIT)
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE and "slave" in (r.remark or "")
        assert not b.transaction_check_service.is_running


@asynccontextmanager
async def checked_producer(
    b: BrokerController, group: str = "PG"
) -> AsyncIterator[list[CheckTransactionStateRequestHeader]]:
    """A connection registered as a producer of ``group``; yields the checks it receives."""
    checks: list[CheckTransactionStateRequestHeader] = []
    w = Wire(b.broker_addr)

    def on_check(conn: Any, req: RemotingCommand) -> None:
        header = CheckTransactionStateRequestHeader.from_ext_fields(req.ext_fields)
        msg = decode_message(req.body or b"")
        assert msg.topic == "TxT" and msg.get_property("PGROUP") == group
        assert msg.queue_offset == header.tran_state_table_offset
        checks.append(header)

    w.client.register(RequestCode.CHECK_TRANSACTION_STATE, on_check)
    assert (await w.heartbeat("checked-client", producer_group=group)).code == ResponseCode.SUCCESS
    try:
        yield checks
    finally:
        await w.close()


FAST = {"transactionCheckInterval": 50, "transactionTimeOut": 0}


async def test_check_back_persists_progress_across_restart(tmp_path) -> None:
    root = str(tmp_path)
    async with running_broker(root, **FAST) as b:
        w = Wire(b.broker_addr)
        halves = [await prepare(w, k) for k in ("c", "u1", "u2")]
        assert (await end(w, halves[0], COMMIT)).code == ResponseCode.SUCCESS
        async with checked_producer(b) as checks:
            await wait_until(lambda: {h.msg_id for h in checks} == {"Uu1", "Uu2"})
            # a check's answer names the copy it was sent for; the first copy is resolved with it
            first = next(h for h in checks if h.msg_id == "Uu1")
            fields = {**halves[1], "tranStateTableOffset": str(first.tran_state_table_offset),
                      "commitLogOffset": str(first.commit_log_offset), "fromTransactionCheck": "true"}  # fmt: skip
            assert (await end(w, fields, ROLLBACK)).code == ResponseCode.SUCCESS
            assert (await end(w, halves[1], COMMIT)).code == ResponseCode.SYSTEM_ERROR  # same transaction
        svc = b.transactional_message_service
        await w.close()
    # read once the broker stopped: the 50 ms check pass may still advance it until then, and
    # the final value is what shutdown persists
    progress = svc.half_progress
    assert progress >= 3
    async with running_broker(root, **FAST) as b:
        svc = b.transactional_message_service
        assert svc.half_progress == progress
        w = Wire(b.broker_addr)
        for fields in halves[:2]:  # resolved before the restart: still refused
            assert (await end(w, fields, COMMIT)).code == ResponseCode.SYSTEM_ERROR
        async with checked_producer(b) as checks:
            await wait_until(lambda: len(checks) >= 2)
            assert {h.msg_id for h in checks} == {"Uu2"}  # only the unresolved one is asked about
            assert (await end(w, halves[2], COMMIT)).code == ResponseCode.SUCCESS
        assert real_max(b) == 2
        r = await w.call(RequestCode.GET_BROKER_RUNTIME_INFO)
        table = KVTable.decode(r.body or b"").table
        assert int(table["transactionCheckCount"]) >= 2 and table["transactionCommitCount"] == "1"
        assert table["transactionHalfOffset"].split(",")[1] == str(
            svc.store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)
        )
        await w.close()


@pytest.mark.parametrize("read_back", [False, True])
async def test_oneway_commit_and_rollback(tmp_path, read_back: bool) -> None:
    """As clients send END_TRANSACTION: oneway, nothing answered, the transaction resolved."""
    async with broker_and_wire(str(tmp_path)) as (b, w):
        c, r = await prepare(w, "c"), await prepare(w, "r")
        forget_recent(b, read_back)
        for fields, kind in ((c, COMMIT), (r, ROLLBACK)):
            request = RemotingCommand.request(
                RequestCode.END_TRANSACTION, {**fields, "commitOrRollback": kind}, oneway=True
            )
            await w.client.invoke_oneway(w.addr, request)
        svc = b.transactional_message_service
        await wait_until(lambda: (svc.counters.committed, svc.counters.rolled_back) == (1, 1))
        [msg] = await pull_until(w, "TxT")
        assert msg.body == b"c"
