"""The check service's scan without sockets: a broker's services over a store in a temp dir,
CHECK_TRANSACTION_STATE handed to a recorder. The scan reads halves in place (no decoded
message), so these tests pin what it hands on: the copy, the check's header and body."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.controller import BrokerController
from pocketmq.broker.transaction.check import copy_properties
from pocketmq.broker.transaction.records import record_properties
from pocketmq.remoting.protocol.message import (
    RECORD_PREFIX_STRUCTS,
    MessageDecodeError,
    body_crc,
    decode_message,
    encode_message,
    properties_to_string,
    string_to_properties,
)
from pocketmq.remoting.protocol.route import RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC
from pocketmq.store import MessageInner, PutMessageStatus, PutResult

HOST = (b"\x7f\x00\x00\x01", 10911)
V6 = (bytes(range(16)), 4242)


@contextmanager
def services(tmp_path: Any, **keys: Any) -> Iterator[tuple[BrokerController, list[tuple[str, Any, bytes]]]]:
    config = BrokerConfig.model_validate(
        {
            "brokerIP1": "127.0.0.1",
            "listenPort": 0,
            "namesrvAddr": None,
            "transactionTimeOut": 0,
            **keys,
            "store": {"storePathRootDir": str(tmp_path), "mappedFileSizeCommitLog": 1 << 20},
        }
    )
    broker = BrokerController(config, fsync=False)
    broker.load()
    sent: list[tuple[str, Any, bytes]] = []

    def send_check(group: str, header: Any, body: bytes) -> bool:
        sent.append((group, header, body))
        return True

    checker = broker.transaction_check_service
    checker.send_check = send_check
    # a run stops at copies stored since it began: each call of the checker's clock is a second
    # later, so the copies of one run are older than the next run (no sleeping between runs)
    ticks = iter(range(1, 1 << 30))
    checker.now_ms = lambda: int(time.time() * 1000) + 1000 * next(ticks)
    try:
        yield broker, sent
    finally:
        broker.store.close()


def prepare(broker: BrokerController, i: int, *, born: Any = HOST, **extra: str) -> int:
    props = properties_to_string(
        {"TAGS": "T", "KEYS": f"k{i}", "UNIQ_KEY": f"U{i}", "TRAN_MSG": "true", "PGROUP": "PG", **extra}
    )
    born_ms = int(time.time() * 1000) - 60_000
    inner = MessageInner("TxT", f"body-{i}".encode(), i % 4, 7, props, 4, born_ms, born, HOST, 2, 0)
    result = broker.transactional_message_service.prepare_message(inner)
    assert not isinstance(result, type(None)) and result.append is not None  # type: ignore[union-attr]
    broker.store.do_reput()
    return int(result.append.logics_offset)  # type: ignore[union-attr]


def half_at(broker: BrokerController, offset: int, topic: str = RMQ_SYS_TRANS_HALF_TOPIC) -> Any:
    r = broker.store.get_message("G", topic, 0, offset, 1)
    return decode_message(r.body)


def test_due_halves_are_copied_and_checked_resolved_ones_passed(tmp_path: Any) -> None:
    with services(tmp_path) as (broker, sent):
        svc, checker = broker.transactional_message_service, broker.transaction_check_service
        offsets = [prepare(broker, i, born=V6 if i == 3 else HOST) for i in range(6)]
        svc.write_op(offsets[0], offsets[0])  # committed
        svc.write_op(offsets[4], offsets[4])  # rolled back
        broker.store.do_reput()
        checker.check_once()
        broker.store.do_reput()
        assert sorted(h.msg_id for _, h, _ in sent) == ["U1", "U2", "U3", "U5"]
        for group, header, body in sent:
            assert group == "PG"
            copy = half_at(broker, header.tran_state_table_offset)
            i = int(header.msg_id[1:])
            # the copy: same body, flag, hosts and born time, one check counted, the transaction named
            assert copy.commit_log_offset == header.commit_log_offset
            assert copy.body == f"body-{i}".encode() and copy.flag == 7 and copy.reconsume_times == 2
            assert copy.properties["TRANSACTION_CHECK_TIMES"] == "1"
            assert copy.properties["TRAN_PREPARED_QUEUE_OFFSET"] == str(offsets[i])
            assert copy.born_host[0] == (str(ipaddress.IPv6Address(V6[0])) if i == 3 else "127.0.0.1")
            # the check's body: the copy with its real topic and queue, a valid record
            checked = decode_message(body)
            assert (checked.topic, checked.queue_id) == ("TxT", i % 4)
            assert checked.body == copy.body and checked.body_crc == body_crc(copy.body)
            assert checked.properties_str == copy.properties_str
            assert checked.born_host == copy.born_host and checked.born_timestamp == copy.born_timestamp
            assert (checked.queue_offset, checked.commit_log_offset) == (
                copy.queue_offset,
                copy.commit_log_offset,
            )
            assert header.offset_msg_id == copy.msg_id
        assert svc.counters.checks == 4
        # the next run: resolving the first copy's transaction (by its original offset) passes
        # every copy of it; the others are checked a second time
        svc.write_op(offsets[1], offsets[1])
        broker.store.do_reput()
        sent.clear()
        checker.check_once()
        broker.store.do_reput()
        assert sorted(h.msg_id for _, h, _ in sent) == ["U2", "U3", "U5"]
        assert {
            half_at(broker, h.tran_state_table_offset).properties["TRANSACTION_CHECK_TIMES"]
            for _, h, _ in sent
        } == {"2"}


def test_due_halves_go_in_runs_and_a_refused_copy_stops_the_run_at_its_half(tmp_path: Any) -> None:
    """The copies of due halves go to the store a run at a time (``_check_run``: one append for
    up to 64); each check still names its own copy. When the store takes no run and refuses a
    single copy, the scan stops at that half: the next run starts there, nothing skipped."""
    n = 600  # more than two runs' worth
    with services(tmp_path) as (broker, sent):
        checker, store = broker.transaction_check_service, broker.store
        for i in range(n):
            prepare(broker, i)
        checker.check_once()
        store.do_reput()
        assert [h.msg_id for _, h, _ in sent] == [f"U{i}" for i in range(n)]
        for _, header, body in sent:
            copy = half_at(broker, header.tran_state_table_offset)
            assert copy.properties["UNIQ_KEY"] == header.msg_id
            assert copy.commit_log_offset == header.commit_log_offset and header.offset_msg_id == copy.msg_id
            assert decode_message(body).store_timestamp == copy.store_timestamp
        real_run, real_put = store.put_run, store.put_message
        puts: list[MessageInner] = []

        def refusing(msg: MessageInner) -> PutResult:
            puts.append(msg)
            return PutResult(PutMessageStatus.OS_PAGECACHE_BUSY) if len(puts) > 100 else real_put(msg)

        store.put_run = lambda *args: None  # type: ignore[method-assign]
        store.put_message = refusing  # type: ignore[method-assign]
        sent.clear()
        checker.check_once()
        assert [h.msg_id for _, h, _ in sent] == [f"U{i}" for i in range(100)]
        assert broker.transactional_message_service.half_progress == n + 100  # the refused copy's half
        store.put_run, store.put_message = real_run, real_put  # type: ignore[method-assign]
        store.do_reput()
        sent.clear()
        checker.check_once()
        # the first run's copies from the refused one on, then the second run's
        assert [h.msg_id for _, h, _ in sent] == [f"U{i}" for i in range(100, n)] + [f"U{i}" for i in range(100)]


def test_immunity_defers_and_check_max_discards(tmp_path: Any) -> None:
    with services(tmp_path, transactionCheckMax=2, transactionTimeOut=1000) as (broker, sent):
        svc, checker = broker.transactional_message_service, broker.transaction_check_service
        far = prepare(broker, 0, CHECK_IMMUNITY_TIME_IN_SECONDS="3600")  # asks for an hour
        prepare(broker, 1)
        checker.check_once()
        broker.store.do_reput()
        assert [h.msg_id for _, h, _ in sent] == ["U1"]  # the immune one does not hold it back
        deferred = half_at(broker, 2)
        assert (
            deferred.properties["UNIQ_KEY"] == "U0" and deferred.properties["TRANSACTION_CHECK_TIMES"] == "0"
        )
        assert deferred.properties["TRAN_PREPARED_QUEUE_OFFSET"] == str(far)
        for _ in range(3):
            checker.check_once()
            broker.store.do_reput()
        assert [h.msg_id for _, h, _ in sent] == ["U1", "U1"]  # checked transactionCheckMax times
        moved = half_at(broker, 0, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC)
        assert moved.properties["UNIQ_KEY"] == "U1" and moved.body == b"body-1"
        assert svc.counters.discarded == 1


def test_record_properties_refuses_what_decode_message_refuses() -> None:
    props = properties_to_string({"UNIQ_KEY": "U1", "PGROUP": "PG"})
    raw = encode_message(topic="RMQ_SYS_TRANS_HALF_TOPIC", body=b"payload", properties=props)
    prefix = RECORD_PREFIX_STRUCTS[0]

    def read(buf: bytes) -> str | None:
        return record_properties(buf, 0, prefix.size, prefix.unpack_from(buf, 0))

    assert read(raw) == props
    assert read(b"\x00" * 8 + raw[8:]) is None  # wrong total size and magic
    assert read(raw[:4] + b"\x00\x00\x00\x00" + raw[8:]) is None  # magic
    assert read(raw[:-1] + b"\xff") is None  # properties not UTF-8
    at = len(raw) - len(props) - 2  # PROPERTIESLENGTH
    assert read(raw[:at] + b"\x00\x05" + raw[at + 2 :]) is None  # properties length inconsistent
    assert read(raw[:84] + (10_000).to_bytes(4, "big") + raw[88:]) is None  # body longer than the record
    assert read(raw[:84] + (-1).to_bytes(4, "big", signed=True) + raw[88:]) is None
    with pytest.raises(MessageDecodeError):
        decode_message(raw[:-1] + b"\xff")


@pytest.mark.parametrize(
    ("props", "want"),
    [
        (
            "UNIQ_KEY\x01U1",
            "UNIQ_KEY\x01U1\x02TRANSACTION_CHECK_TIMES\x013\x02TRAN_PREPARED_QUEUE_OFFSET\x017",
        ),
        ("A\x01x\x02", "A\x01x\x02TRANSACTION_CHECK_TIMES\x013\x02TRAN_PREPARED_QUEUE_OFFSET\x017"),
        (
            "TRANSACTION_CHECK_TIMES\x012\x02A\x01x\x02TRAN_PREPARED_QUEUE_OFFSET\x017",
            "A\x01x\x02TRANSACTION_CHECK_TIMES\x013\x02TRAN_PREPARED_QUEUE_OFFSET\x017",
        ),
        ("", "TRANSACTION_CHECK_TIMES\x013\x02TRAN_PREPARED_QUEUE_OFFSET\x017"),
    ],
)
def test_copy_properties_replace_the_check_count_and_transaction(props: str, want: str) -> None:
    assert copy_properties(props, 3, 7) == want
    assert string_to_properties(copy_properties(props, 3, 7)) == string_to_properties(want)
