"""PULL_MESSAGE: statuses, offsets, tag filtering, commit offset and long polling, over the wire."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import _EXT_SLOT, RemotingCommand
from pocketmq.remoting.protocol.message import decode_messages, encode_batch
from pocketmq.remoting.protocol.route import TopicConfig
from pocketmq.store import BrokerRole
from tests.broker.helpers import Wire, broker_and_wire, running_broker

NO_SUSPEND = 0x4  # FLAG_SUBSCRIPTION only
SUSPEND = 0x6


async def fill(broker, wire: Wire, topic: str, n: int, tags: str | None = None) -> None:
    if broker.topic_config_manager.select_topic_config(topic) is None:
        broker.topic_config_manager.update_topic_config(TopicConfig(topic, 4, 4))
    for i in range(n):
        r = await wire.send(topic, f"m{i}".encode(), tags=tags)
        assert r.code == ResponseCode.SUCCESS
    await wait_dispatched(broker, topic, n)


async def wait_dispatched(broker, topic: str, n: int, queue_id: int = 0) -> None:
    for _ in range(200):
        if broker.store.get_max_offset_in_queue(topic, queue_id) >= n:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("reput did not dispatch")


async def wait_held(broker, n: int = 1) -> None:
    for _ in range(400):
        if len(broker.pull_hold_service.table) >= n:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("pull was not held")


def offsets(r) -> tuple[int, int, int, int]:
    e = r.ext_fields
    return int(e["suggestWhichBrokerId"]), int(e["nextBeginOffset"]), int(e["minOffset"]), int(e["maxOffset"])


async def test_found_and_all_four_offsets(broker, wire):
    await fill(broker, wire, "P1", 5)
    r = await wire.pull("P1", 0, 1, max_nums=2, sys_flag=NO_SUSPEND)
    assert r.code == ResponseCode.SUCCESS and r.remark == "FOUND"
    assert offsets(r) == (0, 3, 0, 5)
    assert [m.body for m in decode_messages(r.body)] == [b"m1", b"m2"]


async def test_status_table(broker, wire):
    await fill(broker, wire, "P2", 3)
    cases = [
        (3, ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", 3),
        (9, ResponseCode.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY", 0),  # min==0: Java corrects to min
    ]
    for offset, code, remark, nxt in cases:
        r = await wire.pull("P2", 0, offset, sys_flag=NO_SUSPEND)
        assert (r.code, r.remark, offsets(r)[1]) == (code, remark, nxt)
        assert set(r.ext_fields) >= {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}
    # empty queue of a known topic: 19 at offset 0, 21 elsewhere
    r = await wire.pull("P2", 1, 0, sys_flag=NO_SUSPEND)
    assert (r.code, r.remark) == (ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE")
    r = await wire.pull("P2", 1, 5, sys_flag=NO_SUSPEND)
    assert (r.code, offsets(r)[1]) == (ResponseCode.PULL_OFFSET_MOVED, 0)


async def test_tag_filter_skips_and_advances(broker, wire):
    broker.topic_config_manager.update_topic_config(TopicConfig("P3", 1, 1))
    for tag in ("A", "B", "A", "C"):
        await wire.send("P3", tag.encode(), tags=tag)
    await wait_dispatched(broker, "P3", 4)
    r = await wire.pull("P3", 0, 0, subscription="A || C", sys_flag=NO_SUSPEND)
    assert [m.body for m in decode_messages(r.body)] == [b"A", b"A", b"C"]
    assert offsets(r)[1] == 4
    r = await wire.pull("P3", 0, 1, subscription="Z", sys_flag=NO_SUSPEND)
    assert (r.code, r.remark, offsets(r)[1]) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE", 4)


async def test_subscription_from_heartbeat_when_flag_clear(broker, wire):
    await fill(broker, wire, "P4", 2, tags="T1")
    r = await wire.pull("P4", 0, 0, group="HB", sys_flag=0)
    assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert (await wire.heartbeat("c1", consumer_group="HB", topics={"P4": "T2"}, sub_version=5)).code == 0
    r = await wire.pull("P4", 0, 0, group="HB", sys_flag=0, sub_version=9)
    assert r.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    r = await wire.pull("P4", 0, 0, group="HB", sys_flag=0, sub_version=5)
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY  # heartbeat says T2, messages are T1


async def test_commit_offset_flag_stores_offset_once(broker, wire):
    await fill(broker, wire, "P5", 2)
    r = await wire.pull("P5", 0, 2, group="CG5", sys_flag=NO_SUSPEND | 0x1, commit_offset=2)
    assert r.code == ResponseCode.PULL_NOT_FOUND
    assert broker.consumer_offset_manager.query_offset("CG5", "P5", 0) == 2


async def test_pull_errors(broker, wire):
    await fill(broker, wire, "P6", 1)
    r = await wire.pull("NoSuchTopic", 0, 0)
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    r = await wire.pull("P6", 4, 0)
    assert r.code == ResponseCode.SYSTEM_ERROR and "queueId[4] is illegal" in r.remark
    broker.topic_config_manager.update_topic_config(TopicConfig("WO", 1, 1, perm=2))
    r = await wire.pull("WO", 0, 0)
    assert r.code == ResponseCode.NO_PERMISSION


async def test_pull_group_missing_without_auto_create(tmp_path):
    async with broker_and_wire(str(tmp_path), autoCreateSubscriptionGroup=False) as (b, w):
        await w.send("T", b"x")
        r = await w.pull("T", 0, 0, group="NoGroup", sys_flag=NO_SUSPEND)
        assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


# ------------------------------------------------------------------------------ long polling


async def test_held_pull_is_answered_by_the_next_send(broker, wire):
    await fill(broker, wire, "LP", 1)
    events: list[str] = []
    pull = asyncio.create_task(wire.pull("LP", 0, 1, sys_flag=SUSPEND, suspend_ms=15000))
    await wait_held(broker)
    assert len(broker.pull_hold_service.table) == 1
    assert not pull.done()
    events.append("send")
    producer = Wire(broker.broker_addr)
    try:
        r = await producer.send("LP", b"wake")
        assert r.code == ResponseCode.SUCCESS
        events.append("sent")
        r = await pull
        events.append("pulled")
    finally:
        await producer.close()
    assert r.code == ResponseCode.SUCCESS and [m.body for m in decode_messages(r.body)] == [b"wake"]
    assert events == ["send", "sent", "pulled"]
    assert not broker.pull_hold_service.table


@pytest.mark.parametrize("batch", [False, True])
async def test_sync_flush_send_answers_a_held_pull_before_waiting_for_its_fsync(tmp_path, batch):
    """Under SYNC_FLUSH the send's own handler dispatches for a pull held on its queue, as under
    ASYNC_FLUSH: the pull's reply is not left for the reput slice after the turn (behind the
    group commit's registration and the fsync helper's wake-up)."""
    async with broker_and_wire(str(tmp_path), store={"flushDiskType": "SYNC_FLUSH"}) as (b, w):
        await fill(b, w, "LPS", 1)
        pull = asyncio.create_task(w.pull("LPS", 0, 1, sys_flag=SUSPEND, suspend_ms=15000))
        await wait_held(b)
        sp = b.send_processor
        held_at_flush_wait: list[int] = []
        wait_flush = sp.flush_replies.add  # (where a stored send starts waiting for its round)

        def spy(*args, **kwargs):
            held_at_flush_wait.append(len(b.pull_hold_service.table))
            return wait_flush(*args, **kwargs)

        sp.flush_replies.add = spy
        producer = Wire(b.broker_addr)
        try:
            if batch:  # SEND_MESSAGE_V2 with batch=true (the C++ client's form)
                r = await producer.send("LPS", encode_batch([(0, b"wake", "")]), batch="true")
            else:
                r = await producer.send("LPS", b"wake")
            assert r.code == ResponseCode.SUCCESS
            r = await pull
        finally:
            await producer.close()
        assert held_at_flush_wait == [0]
        assert r.code == ResponseCode.SUCCESS and [m.body for m in decode_messages(r.body)] == [b"wake"]


async def test_held_pull_times_out_with_no_new_msg(broker, wire):
    await fill(broker, wire, "LP2", 1)
    r = await wire.pull("LP2", 0, 1, sys_flag=SUSPEND, suspend_ms=300)
    assert (r.code, r.remark, offsets(r)[1]) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", 1)
    assert not broker.pull_hold_service.table


async def test_held_pull_ignores_other_tags_until_a_match(broker, wire):
    await fill(broker, wire, "LP3", 1, tags="X")
    pull = asyncio.create_task(
        wire.pull("LP3", 0, 1, subscription="Want", sys_flag=SUSPEND, suspend_ms=10000)
    )
    await wait_held(broker)
    other = Wire(broker.broker_addr)
    try:
        await other.send("LP3", b"no", tags="Other")
        await wait_dispatched(broker, "LP3", 3 - 1)
        await asyncio.sleep(0.05)
        assert not pull.done()
        await other.send("LP3", b"yes", tags="Want")
        r = await pull
    finally:
        await other.close()
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(r.body)] == [b"yes"]


async def test_held_pulls_are_bounded_per_queue(tmp_path):
    async with broker_and_wire(str(tmp_path), maxHeldPullsPerQueue=2) as (b, w):
        await w.send("B", b"x")
        await wait_dispatched(b, "B", 1)
        held = [asyncio.create_task(w.pull("B", 0, 1, suspend_ms=10000)) for _ in range(2)]
        await wait_held(b, 2)
        r = await w.pull("B", 0, 1, suspend_ms=10000)  # third: answered at once
        assert r.code == ResponseCode.PULL_NOT_FOUND
        await w.send("B", b"y")
        assert [x.code for x in await asyncio.gather(*held)] == [0, 0]


async def test_shutdown_answers_held_pulls(tmp_path):
    async with running_broker(str(tmp_path)) as b:
        w = Wire(b.broker_addr)
        await w.send("S", b"x")
        await wait_dispatched(b, "S", 1)
        pull = asyncio.create_task(w.pull("S", 0, 1, suspend_ms=20000))
        await wait_held(b)
        await b.shutdown()
        r = await pull
        assert r.code == ResponseCode.PULL_NOT_FOUND
        await w.close()


async def test_short_polling_when_long_polling_disabled(tmp_path):
    async with broker_and_wire(str(tmp_path), longPollingEnable=False, shortPollingTimeMills=100) as (b, w):
        await w.send("SP", b"x")
        await wait_dispatched(b, "SP", 1)
        r = await w.pull("SP", 0, 1, suspend_ms=60000, timeout=5)
        assert r.code == ResponseCode.PULL_NOT_FOUND


async def test_pull_settings_follow_a_config_update(broker, wire):
    """The pull processor reads its settings once per config object: UPDATE_BROKER_CONFIG (a
    new config) applies to the next pull, long polling and the committed offset alike."""
    await fill(broker, wire, "CU", 1)
    r = await wire.pull("CU", 0, 1, group="CGU", sys_flag=NO_SUSPEND | 0x1, commit_offset=1)
    assert r.code == ResponseCode.PULL_NOT_FOUND
    assert broker.consumer_offset_manager.query_offset("CGU", "CU", 0) == 1
    body = b"longPollingEnable=false\nshortPollingTimeMills=50\n"
    assert (await wire.call(RequestCode.UPDATE_BROKER_CONFIG, None, body)).code == ResponseCode.SUCCESS
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    r = await wire.pull("CU", 0, 1, sys_flag=SUSPEND, suspend_ms=60000, timeout=5)
    assert r.code == ResponseCode.PULL_NOT_FOUND and loop.time() - t0 < 3
    slave = broker.config.store.model_copy(update={"broker_role": BrokerRole.SLAVE})
    broker.update_config(broker.config.model_copy(update={"store": slave}))
    r = await wire.pull("CU", 0, 1, group="CGU", sys_flag=NO_SUSPEND | 0x1, commit_offset=0)
    assert broker.consumer_offset_manager.query_offset("CGU", "CU", 0) == 1  # a slave commits nothing


@pytest.mark.parametrize(
    ("code", "remark", "body"),
    [
        (0, "FOUND", b"m" * 1188),
        (19, "OFFSET_OVERFLOW_ONE", None),
        (20, "NO_MATCHED_MESSAGE", None),
        (21, "NO_MESSAGE_IN_QUEUE", None),
        (21, "OFFSET_TOO_SMALL", None),
    ],
)
def test_pull_reply_head_is_the_encoders_byte_for_byte(code: int, remark: str, body: bytes | None) -> None:
    """A JSON pull reply's head rendered from its (code, remark) template (PullReply) is what
    the general encoder writes for the same command; a changed opaque is encoded the general way;
    a ROCKETMQ (binary) request gets a plain reply."""
    from types import SimpleNamespace

    from pocketmq.broker.processor.pull import PullMessageProcessor, PullReply

    request = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "T"})
    request.opaque = 987654
    for suggest, next_begin, lo, hi in [(0, 5, 0, 6), (1, 123456789012, 7, 99999999999999), (0, -1, 0, 0)]:
        result = SimpleNamespace(min_offset=lo, max_offset=hi, body=body)
        reply = PullMessageProcessor._response(request, code, remark, suggest, next_begin, result)
        assert type(reply) is PullReply
        with pytest.raises(AttributeError):  # the extFields dict is built only when asked for
            _EXT_SLOT.__get__(reply, RemotingCommand)
        assert (reply.code, reply.remark, reply.opaque, reply.flag) == (code, remark, 987654, 1)
        plain = RemotingCommand.response_to(request, code, remark, dict(reply.ext_fields or {}), reply.body)
        assert reply.ext_fields == {
            "suggestWhichBrokerId": str(suggest),
            "nextBeginOffset": str(next_begin),
            "minOffset": str(lo),
            "maxOffset": str(hi),
        }
        assert reply.encode_header() == plain.encode_header()
        assert reply.encode() == plain.encode()
        reply.opaque = plain.opaque = 5
        assert reply.encode_header() == plain.encode_header()
    request.serialize_type = 1
    reply = PullMessageProcessor._response(
        request, code, remark, 0, 1, SimpleNamespace(min_offset=0, max_offset=1, body=body)
    )
    assert type(reply) is RemotingCommand and reply.serialize_type == 1


def test_tag_filter_made_once_per_heartbeat_subscription() -> None:
    """A heartbeat subscription's TAG filter is made once and reused by its pulls; a new
    subscription object (a heartbeat that changed the tags) gets its own filter."""
    from types import SimpleNamespace
    from typing import Any

    from pocketmq.broker.processor.pull import PullMessageProcessor
    from pocketmq.remoting.protocol.bodies import SubscriptionData

    hold: Any = SimpleNamespace(execute=None)
    pp = PullMessageProcessor(
        store=None, topics=None, groups=None, offsets=None, consumers=None, hold=hold, state=None, stats=None
    )  # type: ignore[arg-type]
    a = SubscriptionData.build("T", "TagA || TagB")
    first = pp._tag_filter(a)
    assert pp._tag_filter(a) is first
    assert first.is_matched_by_consume_queue(a.code_set[0]) and not first.accepts_all
    b = SubscriptionData.build("T", "TagC")
    second = pp._tag_filter(b)
    assert second is not first and second.subscription is b
    assert not second.is_matched_by_consume_queue(a.code_set[0])
    assert pp._tag_filter(SubscriptionData.build("T", "*")).accepts_all


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
async def test_a_failed_put_on_a_held_queue_neither_dispatches_nor_waits_for_a_flush(tmp_path, flush):
    """A send whose put fails (a PutResult without an append) on a queue a pull is held on is
    answered with its failure at once: no dispatch for the pull, no wait for a flush round; the
    next stored send answers the pull (process tells a stored put by its class first)."""
    from pocketmq.store import PutMessageStatus, PutResult

    async with broker_and_wire(str(tmp_path), store={"flushDiskType": flush}) as (b, w):
        await fill(b, w, "LPF", 1)
        pull = asyncio.create_task(w.pull("LPF", 0, 1, sys_flag=SUSPEND, suspend_ms=15000))
        await wait_held(b)
        sp, store = b.send_processor, b.store
        calls: list[str] = []
        dispatch, wait_flush = sp._dispatch_now, sp.flush_replies.add
        sp._dispatch_now = lambda: calls.append("dispatch") or dispatch()
        sp.flush_replies.add = lambda *a: calls.append("flush") or wait_flush(*a)
        name = "put_message" if flush == "SYNC_FLUSH" else "put_now"
        put = getattr(store, name)
        setattr(store, name, lambda inner: PutResult(PutMessageStatus.OS_PAGECACHE_BUSY, None))
        r = await w.send("LPF", b"lost")
        assert r.code == ResponseCode.SYSTEM_ERROR and calls == [] and not pull.done()
        setattr(store, name, put)
        r = await w.send("LPF", b"wake")
        assert r.code == ResponseCode.SUCCESS
        r = await pull
        assert [m.body for m in decode_messages(r.body)] == [b"wake"]
        assert calls == (["dispatch", "flush"] if flush == "SYNC_FLUSH" else ["dispatch"])
