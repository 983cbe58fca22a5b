"""END_TRANSACTION from the halves this process stored lately (``transaction.recent``) stores
the bytes the CommitLog way (the half read back and decoded) stores: same committed copy, same op
record, for any properties a producer sends. Without sockets: a broker's services over a store
in a temp dir, requests handed to the processor."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import pocketmq.broker.transaction.recent as recent_module
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.controller import BrokerController
from pocketmq.broker.processor.message_props import java_reput_properties, new_shape_cache
from pocketmq.broker.transaction.service import half_properties
from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemoteSystemError
from pocketmq.remoting.protocol.message import RECORD_PREFIX_STRUCTS, decode_message
from pocketmq.remoting.protocol.route import RMQ_SYS_TRANS_OP_HALF_TOPIC
from pocketmq.store import MessageInner
from tests.broker.transaction.test_half_properties import random_props

HOST = (b"\x7f\x00\x00\x01", 10911)
V6 = (bytes(range(16)), 4242)
#: record prefix fields a second copy of the same message differs in: queue offset, physical
#: offset, store timestamp, prepared transaction offset (RECORD_PREFIX_STRUCTS order)
VARYING = (5, 6, 11, 15)


@contextmanager
def offline_broker(tmp_path: Any) -> Iterator[BrokerController]:
    config = BrokerConfig.model_validate(
        {
            "brokerIP1": "127.0.0.1",
            "listenPort": 0,
            "namesrvAddr": None,
            "store": {"storePathRootDir": str(tmp_path), "mappedFileSizeCommitLog": 4 << 20},
        }
    )
    broker = BrokerController(config, fsync=False)
    broker.load()
    try:
        yield broker
    finally:
        broker.store.close()


def prepare(broker: BrokerController, props: str, wait: str | None, born: Any = HOST) -> dict[str, str]:
    """Store a half as the send processor does; the END_TRANSACTION fields naming it."""
    inner = MessageInner("TxT", b"body \xff", 3, 7, props, 4 | 0x1, 1_700_000_000_000, born, HOST, 2)
    result = broker.transactional_message_service.prepare_message(inner, sent_wait=wait)
    append = result.append  # type: ignore[union-attr]
    assert append is not None
    return {
        "producerGroup": "PG",
        "tranStateTableOffset": str(append.logics_offset),
        "commitLogOffset": str(append.wrote_offset),
        "msgId": "U",
        "fromTransactionCheck": "false",
    }


def end(broker: BrokerController, fields: dict[str, str], kind: str = "8") -> RemotingCommand | None:
    request = RemotingCommand.request(RequestCode.END_TRANSACTION, {**fields, "commitOrRollback": kind})
    return broker.end_transaction_processor.end_transaction(None, request)  # type: ignore[arg-type]


def last_record(broker: BrokerController, topic: str, queue_id: int) -> bytes:
    """The newest record of a queue, with the fields a second copy differs in zeroed."""
    store = broker.store
    store.do_reput()
    offset = store.get_max_offset_in_queue(topic, queue_id) - 1
    raw = store.get_message_bytes_by_offset(store.get_commit_log_offset_in_queue(topic, queue_id, offset))
    assert raw is not None
    prefix = RECORD_PREFIX_STRUCTS[RECORD_PREFIX_STRUCTS[0].unpack_from(raw)[7] & 0x30]
    fields = list(prefix.unpack_from(raw))
    for i in VARYING:
        fields[i] = 0
    return prefix.pack(*fields) + raw[prefix.size :]


def commit_both_ways(broker: BrokerController, props: str, wait: str | None, born: Any = HOST) -> None:
    svc = broker.transactional_message_service
    copies, ops = [], []
    for read_back in (False, True):
        fields = prepare(broker, props, wait, born)
        offset = int(fields["commitLogOffset"])
        if read_back:
            svc.recent.clear()
        else:
            assert (svc.recent.get(offset) is not None) == (wait != "")
        reply = end(broker, fields)
        assert reply is not None and reply.code == 0, reply.remark
        assert svc.recent.get(offset) is None
        copies.append(last_record(broker, "TxT", 3))
        op = decode_message(last_record(broker, RMQ_SYS_TRANS_OP_HALF_TOPIC, 0))
        assert op.body == fields["tranStateTableOffset"].encode()  # names its own half
        ops.append((op.topic, op.properties, op.sys_flag, op.flag, op.born_host, op.store_host))
    assert copies[0] == copies[1], props
    assert ops[0] == ops[1]


def test_committed_properties_are_the_stored_ones() -> None:
    """Why the recent path stores the half's properties as they are: ``java_reput_properties``
    of what prepare stored changes nothing, unless the producer sent an empty WAIT (then the
    half is not kept: ``sent_wait != ""`` in ``prepare_message``)."""
    for seed in range(4):
        rnd = random.Random(seed)
        for _ in range(5000):
            props, wait = random_props(rnd), rnd.choice([None, "true", "false", "x"])
            half = half_properties(props, wait, rnd.choice(["T", "a%b"]), rnd.randrange(0, 20))
            assert java_reput_properties(half, new_shape_cache()) == half, (props, wait)


@pytest.mark.parametrize("seed", range(3))
def test_same_bytes_as_read_back(tmp_path, seed: int) -> None:
    rnd = random.Random(seed)
    with offline_broker(tmp_path) as broker:
        for _ in range(60):
            # a producer's properties: whatever random_props makes, plus what a transaction carries
            extra = random_props(rnd)
            props = "\x02".join(p for p in (extra.rstrip("\x02"), "TRAN_MSG\x01true\x02PGROUP\x01PG") if p)
            wait = rnd.choice([None, "", "true", "false"])
            commit_both_ways(broker, props, wait, rnd.choice([HOST, V6]))


def test_a_typical_producer(tmp_path) -> None:
    with offline_broker(tmp_path) as broker:
        props = "TAGS\x01TagA\x02KEYS\x01order-1 order-2\x02UNIQ_KEY\x01AC1\x02TRAN_MSG\x01true\x02PGROUP\x01PG\x02CLUSTER\x01C"
        commit_both_ways(broker, props, None)
        commit_both_ways(broker, props + "\x02WAIT\x01false", "false")


def test_bounded_and_the_evicted_are_read_back(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(recent_module, "MAX_ENTRIES", 3)
    with offline_broker(tmp_path) as broker:
        svc = broker.transactional_message_service
        halves = [prepare(broker, "TRAN_MSG\x01true\x02PGROUP\x01PG", None) for _ in range(5)]
        assert len(svc.recent) == 3
        assert [svc.recent.get(int(h["commitLogOffset"])) is not None for h in halves] == [
            False,
            False,
            True,
            True,
            True,
        ]
        for h, kind in zip(halves, ["8", "12", "8", "12", "8"], strict=True):
            reply = end(broker, h, kind)
            assert reply is not None and reply.code == 0
        assert len(svc.recent) == 0
        assert (svc.counters.committed, svc.counters.rolled_back) == (3, 2)
        broker.store.do_reput()
        assert broker.store.get_max_offset_in_queue("TxT", 3) == 3
        # resolved: a second END_TRANSACTION of any of them is refused
        for h in halves:
            with pytest.raises(RemoteSystemError, match="already committed or rolled back"):
                end(broker, h)



def test_bounded_by_the_bytes_of_the_bodies_held(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(recent_module, "MAX_BYTES", 3000)
    with offline_broker(tmp_path) as broker:
        svc = broker.transactional_message_service
        offsets = []
        for _ in range(4):
            inner = MessageInner("TxT", b"x" * 1000, 0, 0, "TRAN_MSG\x01true\x02PGROUP\x01PG", 4)
            result = svc.prepare_message(inner)
            offsets.append(result.append.wrote_offset)  # type: ignore[union-attr]
        # 4 x 1000 bytes against a 3000-byte budget: the oldest went, the others are held
        assert [svc.recent.get(o) is not None for o in offsets] == [False, True, True, True]
        assert svc.recent.bytes == 3000
        svc.recent.discard(offsets[2])
        assert svc.recent.bytes == 2000 and len(svc.recent) == 2
        svc.recent.clear()
        assert svc.recent.bytes == 0

def test_large_bodies_are_read_back(tmp_path) -> None:
    with offline_broker(tmp_path) as broker:
        svc = broker.transactional_message_service
        inner = MessageInner(
            "TxT", b"x" * (recent_module.MAX_BODY + 1), 0, 0, "TRAN_MSG\x01true\x02PGROUP\x01PG", 4
        )
        result = svc.prepare_message(inner)
        assert result.append is not None and len(svc.recent) == 0  # type: ignore[union-attr]
        fields = {
            "producerGroup": "PG",
            "tranStateTableOffset": str(result.append.logics_offset),  # type: ignore[union-attr]
            "commitLogOffset": str(result.append.wrote_offset),  # type: ignore[union-attr]
            "msgId": "U",
        }
        reply = end(broker, fields)
        assert reply is not None and reply.code == 0 and svc.counters.committed == 1
