"""Oneway END_TRANSACTIONs of one loop turn are stored together (``end_later`` /
``flush_ends``, ``MessageStore.put_run``): the same records, ConsumeQueue units and index
entries as one put at a time; refusals and duplicates as the synchronous path."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from pocketmq.broker.controller import BrokerController
from pocketmq.remoting.protocol.codes import RPC_ONEWAY, RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemoteSystemError
from pocketmq.remoting.protocol.headers import EndTransactionRequestHeader
from pocketmq.remoting.protocol.message import decode_message
from pocketmq.remoting.protocol.route import RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC
from pocketmq.store import MessageInner, MessageStore, MessageStoreConfig
from tests.broker.transaction.test_recent import HOST, V6, last_record, offline_broker, prepare

TX_PROPS = "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01AC1\x02TRAN_MSG\x01true\x02PGROUP\x01PG"


def oneway(fields: dict[str, str], kind: str = "8") -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.END_TRANSACTION, {**fields, "commitOrRollback": kind})
    request.flag |= RPC_ONEWAY
    return request


def records(rnd: random.Random) -> tuple[list[MessageInner], list[MessageInner]]:
    """Committed copies of several topics and queues, then op records (what flush_ends puts)."""
    copies = [
        MessageInner(
            rnd.choice(["TxA", "TxB"]),
            rnd.randbytes(rnd.randrange(0, 3000)),
            rnd.randrange(4),
            rnd.randrange(9),
            f"TAGS\x01t{rnd.randrange(3)}\x02KEYS\x01k{i} x{i}\x02UNIQ_KEY\x01U{i}",
            8,
            1_700_000_000_000 + i,
            HOST,
            HOST,
            rnd.randrange(3),
            rnd.randrange(1 << 40),
        )  # fmt: skip
        for i in range(rnd.randrange(1, 12))
    ]
    ops = [
        MessageInner(
            RMQ_SYS_TRANS_OP_HALF_TOPIC,
            str(rnd.randrange(10**6)).encode(),
            0,
            0,
            rnd.choice(OP_PROPS)(),
            0,
            5,
            HOST,
            HOST,
        )
        for _ in range(rnd.randrange(1, 12))
    ]
    return copies, ops


#: a properties string with index keys, one object shared by several records
SHARED_KEYED = "TAGS\x01d\x02KEYS\x01k1 x3\x02UNIQ_KEY\x01U5"
#: op records' properties: the one string of flush_ends (reput skips a repeat's parse when it
#: gave no index entry), an equal one built anew, or one with index keys shared (not skipped)
OP_PROPS = (lambda: "TAGS\x01d", lambda: "".join(["TAGS\x01", "d"]), lambda: SHARED_KEYED)


def store_at(path: Any) -> MessageStore:
    config = MessageStoreConfig(store_path_root_dir=str(path), mapped_file_size_commit_log=1 << 20)
    store = MessageStore(config, clock=lambda: 1_700_000_000_123)
    store.load()
    return store


def contents(store: MessageStore, topics: list[str]) -> tuple[Any, ...]:
    """CommitLog bytes, every ConsumeQueue unit, and the index's answers for the copies' keys."""
    store.do_reput()
    end = store.get_max_phy_offset()
    units = {}
    for topic in topics:
        for qid in range(4):
            read = store.read_consume_queue(topic, qid, 0, 1000)
            units[topic, qid] = None if read is None else read.units
    found = {
        (topic, key): sorted(store.query_message(topic, key, 64, 0, 2**62).messages)
        for topic in topics
        for key in ("k1", "x3", "U0", "U5", "7F0000010A6B18B4AAC2000000010001", "Z")
    }
    return store.get_commit_log_data(0, end), units, found


@pytest.mark.parametrize("seed", range(4))
def test_put_run_stores_what_puts_one_at_a_time_store(tmp_path, seed: int) -> None:
    one, run = store_at(tmp_path / "one"), store_at(tmp_path / "run")
    try:
        runs = 0
        for store in (one, run):  # the same records into each
            rnd = random.Random(seed)
            for _ in range(40):
                copies, ops = records(rnd)
                items = [(m.flag, m.body, m.properties_string()) for m in ops]
                if store is run and store.put_run(copies, ops[0], items):
                    runs += 1
                    continue
                # (one, or a run put_run refuses: the first, which creates the segment, and
                # one that does not fit in the rest of a segment)
                for m in copies + ops:
                    assert store.put_message(m).append is not None
        assert runs >= 30
        topics = ["TxA", "TxB", RMQ_SYS_TRANS_OP_HALF_TOPIC]
        assert contents(one, topics) == contents(run, topics)
    finally:
        one.close()
        run.close()


def test_put_run_refuses_what_it_does_not_handle(tmp_path) -> None:
    store = store_at(tmp_path)
    try:
        op = MessageInner(RMQ_SYS_TRANS_OP_HALF_TOPIC, b"1", 0, 0, "TAGS\x01d", 0, 5, HOST, HOST)
        assert not store.put_run([op])  # no segment yet: the first put creates it
        assert store.put_message(op).append is not None
        before = store.get_max_phy_offset()
        v6 = MessageInner("TxA", b"b", 0, 0, "", 8, 5, V6, HOST)
        other = MessageInner("TxA", b"b", 0, 0, "", 0, 5, HOST, HOST)
        assert not store.put_run([op, v6])  # IPv6 hosts
        assert not store.put_run([MessageInner("TxA", b"x" * (2 << 20), 0, 0, "", 0, 5, HOST, HOST)])
        assert not store.put_run([other], op, [(0, b"x" * (2 << 20), "TAGS\x01d")])  # an item too large
        assert store.get_max_phy_offset() == before
        assert (
            store.put_run([other], op, [(0, b"1", "TAGS\x01d")] * 2) and store.get_max_phy_offset() > before
        )
    finally:
        store.close()


async def _one_turn(broker: BrokerController, born: Any) -> None:
    svc, proc = broker.transactional_message_service, broker.end_transaction_processor
    store = broker.store
    halves = [prepare(broker, TX_PROPS, None, born) for _ in range(4)]
    ops_before = store.get_max_phy_offset()
    for h, kind in zip(halves, ["8", "12", "8", "8"], strict=True):
        assert proc.end_transaction(None, oneway(h, kind)) is None  # type: ignore[arg-type]
    # a second END_TRANSACTION for a transaction of this turn is refused, oneway or not
    with pytest.raises(RemoteSystemError, match="already committed or rolled back"):
        proc.end_transaction(None, oneway(halves[0], "12"))  # type: ignore[arg-type]
    with pytest.raises(RemoteSystemError, match="already committed or rolled back"):
        proc.end_transaction(None, RemotingCommand.request(RequestCode.END_TRANSACTION, {**halves[1], "commitOrRollback": "8"}))  # type: ignore[arg-type]  # fmt: skip
    # refused as the header path refuses them (the oneway read takes the same checks)
    with pytest.raises(RemoteSystemError, match="The producer group wrong"):
        proc.end_transaction(None, oneway({**halves[2], "producerGroup": "PG2"}))  # type: ignore[arg-type]
    with pytest.raises(RemoteSystemError, match="The transaction state table offset wrong"):
        proc.end_transaction(None, oneway({**halves[2], "tranStateTableOffset": "99"}))  # type: ignore[arg-type]
    assert store.get_max_phy_offset() == ops_before  # nothing stored before the turn ends
    assert svc.counters.already_resolved == 2
    await asyncio.sleep(0)
    assert (svc.counters.committed, svc.counters.rolled_back) == (3, 1)
    assert not svc.ends.ending and len(svc.recent) == 0
    assert {int(h["tranStateTableOffset"]) for h in halves} <= set(svc.done)
    store.do_reput()
    ops = [
        decode_message(
            store.get_message_bytes_by_offset(
                store.get_commit_log_offset_in_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0, q)
            )
            or b""
        )  # fmt: skip
        for q in range(store.get_max_offset_in_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0))
    ]
    assert [(op.body, op.tags) for op in ops][-4:] == [
        (h["tranStateTableOffset"].encode(), "d") for h in halves
    ]
    # the batched copy is the record the synchronous path stores for the same half
    batched = last_record(broker, "TxT", 3)
    reply = broker.end_transaction_processor.end_transaction(
        None,  # type: ignore[arg-type]
        RemotingCommand.request(
            RequestCode.END_TRANSACTION, {**prepare(broker, TX_PROPS, None, born), "commitOrRollback": "8"}
        ),
    )
    assert reply is not None and reply.code == 0
    assert last_record(broker, "TxT", 3) == batched


@pytest.mark.parametrize("born", [HOST, V6], ids=["v4", "v6: put one by one"])
def test_oneway_end_transactions_of_one_turn(tmp_path, born: Any) -> None:
    with offline_broker(tmp_path) as broker:
        asyncio.run(_one_turn(broker, born))


def test_the_oneway_fast_read_agrees_with_the_header_parser(tmp_path) -> None:
    """``end_oneway`` takes a request only when ``from_ext_fields`` reads its header too, to the
    values of the recent half it queues (a commit or rollback of that half, its group and queue
    offset); what it refuses goes to the general path."""
    rnd = random.Random(7)
    values = [
        "8",
        "12",
        "0",
        "4",
        " 8",
        "08",
        "+8",
        "-1",
        "1_0",
        "١٢",
        "²",
        "",
        "x",
        "9" * 18,
        "9" * 19,
        " 1024",
        "01024",
        "1_024",
        "١٠٢٤",
        "3",
        "+3",
        "3 ",
        "PG",
        None,
    ]
    base = {"producerGroup": "PG", "tranStateTableOffset": "3", "commitLogOffset": "1024", "commitOrRollback": "8", "msgId": "U"}  # fmt: skip

    async def check(broker: BrokerController) -> int:
        svc = broker.transactional_message_service
        half = MessageInner("T", b"x", 0, 0, "", 0, 0, HOST, HOST)
        recent = (half, "", 3, 3, "T", 0, "PG")
        svc.recent.entries[1024] = recent
        read = 0
        for _ in range(20000):
            ext: dict[str, Any] = dict(base)
            for key in rnd.sample(sorted(base), rnd.randrange(0, 3)):
                if rnd.random() < 0.2:
                    del ext[key]
                else:
                    ext[key] = rnd.choice(values)
            if not svc.ends.end_oneway(ext):
                assert not svc.ends.ending
                continue
            read += 1
            assert svc.ends._ending == [(1024, recent, ext["commitOrRollback"] == "8")]
            svc.ends._ending.clear()  # (not stored: the loop's flush finds nothing queued)
            svc.ends.ending.clear()
            header = EndTransactionRequestHeader.from_ext_fields(ext)
            assert header.commit_or_rollback in (8, 12), ext
            assert (header.commit_or_rollback == 8) == (ext["commitOrRollback"] == "8"), ext
            assert (header.commit_log_offset, header.producer_group, header.tran_state_table_offset) == (1024, "PG", 3), ext  # fmt: skip
        # a half stored without PGROUP and a null producerGroup: the header parser refuses it
        svc.recent.entries[1024] = (half, "", 3, 3, "T", 0, None)
        assert not svc.ends.end_oneway({**base, "producerGroup": None})
        del svc.recent.entries[1024]
        return read

    with offline_broker(tmp_path) as broker:
        assert asyncio.run(check(broker)) > 1000


@pytest.mark.parametrize("uniq", ["U5", "7F0000010A6B18B4AAC2000000010001", "Z"])
@pytest.mark.parametrize("index_enable", [True, False])
def test_a_copy_dispatched_with_its_halfs_parse_matches_a_parsed_one(tmp_path, index_enable: bool, uniq: str) -> None:
    """A committed copy carrying its half's properties object takes the half's parse (the
    dispatcher's ``carried``, ``dispatch.appended``, with its UNIQ_KEY's head and tail): the
    same ConsumeQueue units and index answers as a copy whose equal properties are parsed (the
    half's index keys under the copy's own topic; UNIQ_KEYs of 2, 32 and 1 characters)."""
    got = []
    for carried in (True, False):
        store = store_at(tmp_path / str(carried))
        store.dispatcher.index_enable = index_enable
        try:
            props = "".join(["TAGS\x01t1\x02KEYS\x01k1 x3\x02UNIQ_KEY\x01", uniq])
            half = MessageInner(RMQ_SYS_TRANS_HALF_TOPIC, b"h", 0, 0, props, 0, 5, HOST, HOST)
            # (not at offset 0: a preparedTransactionOffset of 0 names no half)
            assert store.put_message(MessageInner("TxA", b"f", 0, 0, "", 0, 5, HOST, HOST)).append
            at = store.put_message(half).append
            assert at is not None
            store.do_reput()  # the half dispatched (parsed) first, as END_TRANSACTION comes later
            assert (store.dispatcher.carried.get(at.wrote_offset, ("",))[0] is props) == index_enable
            copy_props = props if carried else "".join(["TAGS\x01t1\x02KEYS\x01k1 x3\x02", "UNIQ_KEY\x01", uniq])
            copy = MessageInner("TxA", b"h", 1, 0, copy_props, 8, 5, HOST, HOST, 0, at.wrote_offset)
            assert store.put_run([copy])
            data, units, found = contents(store, ["TxA", RMQ_SYS_TRANS_HALF_TOPIC])
            assert at.wrote_offset not in store.dispatcher.carried
            got.append((units, found))
        finally:
            store.close()
    assert got[0] == got[1]
    units, found = got[0]
    assert units["TxA", 1] is not None and len(units["TxA", 1]) == 1
    assert bool(found["TxA", uniq]) == index_enable and bool(found["TxA", "x3"]) == index_enable
