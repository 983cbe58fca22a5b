"""Producer logic against a fake instance (real MQClientAPI over a fake remoting layer)."""

from __future__ import annotations

import asyncio
import zlib

import pytest

from pocketmq.client import Message, MessageQueue, Producer, SendStatus
from pocketmq.client.api import MQClientAPI
from pocketmq.client.errors import (
    ClientClosedError,
    MessageValidationError,
    RemotingConnectError,
    SendFailedError,
)
from pocketmq.client.lifecycle import RUNNING
from pocketmq.client.route import TopicPublishInfo
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.errors import MessageIllegalError
from pocketmq.remoting.protocol.message import decode_batch, string_to_properties
from pocketmq.remoting.protocol.route import QueueData, TopicRouteData

from .fakes import FakeRemoting, as_any, as_decoded, reply

QUEUES = [MessageQueue("T", b, i) for b in ("broker-a", "broker-b") for i in range(2)]


class _Addrs(dict):
    """broker name -> {MASTER_ID: its address}, for any name."""

    def get(self, name, default=None):  # type: ignore[override]
        return {0: f"{name}:10911"}


class FakeInstance:
    def __init__(self, handler) -> None:
        self.remoting = FakeRemoting(handler)
        self.api = MQClientAPI(as_any(self.remoting), ["ns:1"])
        self.route_refreshes = 0
        self.broker_addrs = _Addrs()

    def find_broker_addr_in_publish(self, name: str) -> str:
        return f"{name}:10911"

    async def update_topic_route(self, topic: str, **kw) -> bool:
        self.route_refreshes += 1
        return False


def make_producer(handler, **options) -> tuple[Producer, FakeInstance]:
    producer = Producer("PG", namesrv="127.0.0.1:9876", **options)
    inst = FakeInstance(handler)
    producer._sender.instance = as_any(inst)
    producer._life.state = RUNNING
    route = TopicRouteData([QueueData("broker-a", 2, 2, 6), QueueData("broker-b", 2, 2, 6)], [])
    producer._sender.publish["T"] = TopicPublishInfo(list(QUEUES), route=route, have_route=True, index=0)
    return producer, inst


def ok(addr, req=None, queue_offset: int = 1):
    if req is None:
        req = addr
    return reply(
        0,
        {
            "msgId": "7F0000010000277F0000000000000000",
            "queueId": req.ext_fields["e"],
            "queueOffset": str(queue_offset),
        },
    )


async def test_connection_failure_retries_on_another_broker() -> None:
    def handler(addr, req):
        if addr.startswith("broker-a"):
            return RemotingConnectError(f"connect to {addr} refused")
        return ok(req)

    producer, inst = make_producer(handler)
    for _ in range(10):
        res = await producer.send(Message("T", b"hello"))
        assert res.message_queue.broker_name == "broker-b"
        assert res.send_status is SendStatus.SEND_OK


async def test_retriable_reply_is_retried_and_refresh_route_flag_refreshes() -> None:
    codes = iter([ResponseCode.SYSTEM_BUSY, ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUCCESS])

    def handler(addr, req):
        code = next(codes)
        return ok(addr, req) if code == 0 else reply(code, remark=f"code {code}")

    producer, inst = make_producer(handler)
    res = await producer.send(Message("T", b"x"))
    assert res.send_status is SendStatus.SEND_OK
    assert len(inst.remoting.requests) == 3
    assert inst.route_refreshes == 1  # only TOPIC_NOT_EXIST asks for a route refresh


async def test_non_retriable_reply_raises_at_once() -> None:
    producer, inst = make_producer(lambda a, r: reply(ResponseCode.MESSAGE_ILLEGAL, remark="bad props"))
    with pytest.raises(MessageIllegalError, match="bad props"):
        await producer.send(Message("T", b"x"))
    assert len(inst.remoting.requests) == 1


async def test_all_attempts_failing_lists_every_error() -> None:
    producer, inst = make_producer(
        lambda a, r: reply(ResponseCode.SYSTEM_ERROR, remark="boom"), retry_times_when_send_failed=3
    )
    with pytest.raises(SendFailedError) as info:
        await producer.send(Message("T", b"x"))
    assert len(info.value.errors) == 4 and len(inst.remoting.requests) == 4


async def test_request_header_compression_and_uniq_key() -> None:
    producer, inst = make_producer(ok)
    body = b"a" * 5000
    res = await producer.send(
        Message("T", body, tags="TagA", keys=["k1", "k2"], properties={"p": "v"}, delay_level=3)
    )
    addr, req = inst.remoting.requests[-1]
    ext = req.ext_fields
    assert req.code == RequestCode.SEND_MESSAGE_V2
    assert (
        ext["a"] == "PG"
        and ext["b"] == "T"
        and ext["c"] == "TBW102"
        and ext["f"] == "1"
        and ext["n"] == addr.split(":")[0]
    )
    assert zlib.decompress(req.body) == body
    props = string_to_properties(ext["i"])
    assert (
        props["TAGS"] == "TagA" and props["KEYS"] == "k1 k2" and props["DELAY"] == "3" and props["p"] == "v"
    )
    assert props["UNIQ_KEY"] == res.msg_id and len(res.msg_id) == 32
    await producer.send(Message("T", b"small"))
    assert inst.remoting.requests[-1][1].ext_fields["f"] == "0"


async def test_sharding_key_and_explicit_queue() -> None:
    producer, inst = make_producer(ok)
    queues = {
        (await producer.send(Message("T", b"x"), sharding_key="order-7")).message_queue for _ in range(5)
    }
    assert len(queues) == 1
    res = await producer.send(Message("T", b"x"), queue=QUEUES[3])
    assert res.message_queue == QUEUES[3]


async def test_batch_is_one_request() -> None:
    producer, inst = make_producer(
        lambda a, r: reply(0, {"msgId": "A,B,C", "queueId": "0", "queueOffset": "10"})
    )
    res = await producer.send_batch([Message("T", f"m{i}".encode(), tags="t") for i in range(3)])
    req = inst.remoting.requests[-1][1]
    assert req.code == RequestCode.SEND_BATCH_MESSAGE and req.ext_fields["m"] == "true"
    items = decode_batch(req.body)
    assert [i.body for i in items] == [b"m0", b"m1", b"m2"]
    uniq = [string_to_properties(i.properties_str)["UNIQ_KEY"] for i in items]
    assert res.msg_id == ",".join(uniq) and res.offset_msg_id == "A,B,C"
    with pytest.raises(MessageValidationError, match="same topic"):
        await producer.send_batch([Message("T", b"x"), Message("U", b"y")])
    with pytest.raises(MessageValidationError, match="batch size"):
        await producer.send_batch([Message("T", b"x" * 3_000_000), Message("T", b"y" * 3_000_000)])


async def test_bad_input_is_rejected_before_sending() -> None:
    producer, inst = make_producer(ok, max_message_size=1024)
    for bad, match in [
        (Message("T", b""), "length is zero"),
        (Message("T", b"x" * 1025), "over the max"),
        (Message("bad topic", b"x"), "illegal characters"),
        (Message("TBW102", b"x"), "default topic"),
        (Message("T", b"x", properties={"k": "a\x01b"}), "separator"),
    ]:
        with pytest.raises(MessageValidationError, match=match):
            await producer.send(bad)
        sending = producer.send(bad)  # a coroutine still (send hands back the sender's): raises when awaited
        with pytest.raises(MessageValidationError, match=match):
            await sending
    assert inst.remoting.requests == []


async def test_send_async_future_and_callback() -> None:
    producer, inst = make_producer(ok)
    got = []
    futs = [producer.send_async(Message("T", b"x"), lambda r, e: got.append((r, e))) for _ in range(5)]
    results = await asyncio.gather(*futs)
    await asyncio.sleep(0)
    assert all(r.send_status is SendStatus.SEND_OK for r in results)
    assert len(got) == 5 and all(e is None for _, e in got)
    assert not producer._inflight
    # this fake answers through a coroutine, as remoting does while a connection is not open:
    # send_async drops it unstarted and takes the general path, so each message goes out once
    assert len(inst.remoting.requests) == 5


async def test_closed_producer_raises() -> None:
    producer = Producer("PG", namesrv="127.0.0.1:9876")
    with pytest.raises(ClientClosedError):
        await producer.send(Message("T", b"x"))
    with pytest.raises(ClientClosedError):
        producer.send_async(Message("T", b"x"))
    await producer.shutdown()
    with pytest.raises(ClientClosedError):
        await producer.send_oneway(Message("T", b"x"))


async def test_batch_properties_are_the_same_on_both_paths() -> None:
    # Plain messages take a fast path (no properties dict); the string must be the one
    # properties_to_string builds, as for messages with keys or user properties.
    from pocketmq.remoting.protocol.message import properties_to_string

    producer, inst = make_producer(
        lambda a, r: reply(0, {"msgId": "A,B,C,D", "queueId": "0", "queueOffset": "1"})
    )
    msgs = [
        Message("T", b"0", tags="t"),
        Message("T", b"1"),
        Message("T", b"2", tags="t", keys="k"),
        Message("T", b"3", properties={"p": "v"}),
    ]
    await producer.send_batch(msgs)
    items = decode_batch(inst.remoting.requests[-1][1].body)
    for m, item in zip(msgs, items, strict=True):
        props = m.wire_properties()
        props["UNIQ_KEY"] = string_to_properties(item.properties_str)["UNIQ_KEY"]
        assert item.properties_str == properties_to_string(props)


async def test_send_oneway_writes_one_v2_request() -> None:
    producer, inst = make_producer(ok)
    await producer.send_oneway(Message("T", b"x", tags="A"))
    ((addr, req),) = inst.remoting.oneway
    assert req.code == RequestCode.SEND_MESSAGE_V2 and req.body == b"x"
    assert req.ext_fields["b"] == "T" and req.ext_fields["n"] == addr.split(":")[0]
    assert string_to_properties(req.ext_fields["i"])["TAGS"] == "A"
    assert inst.remoting.requests == []


class FutureRemoting(FakeRemoting):
    """The real client's fast path: the request is written at call time and the reply is a
    future (``invoke``) or handed to the waiter (``invoke_into``) on a later loop turn."""

    def __init__(self, handler) -> None:
        super().__init__(handler)
        #: invoke_into's ``alone`` flag per request written (invoke's: False)
        self.alone: list[bool] = []

    def invoke(self, addr, request, timeout=None):  # type: ignore[override]
        fut = asyncio.get_running_loop().create_future()
        self.invoke_into(addr, request, timeout, fut)
        return fut

    def invoke_into(self, addr, request, timeout, waiter, alone=False):  # type: ignore[override]
        self.alone.append(alone)
        request = as_decoded(request)
        self.requests.append((addr, request))
        answer = self.handler(addr, request)

        def resolve() -> None:
            if waiter.done():  # as the connection: a cancelled waiter gets nothing
                return
            if isinstance(answer, Exception):
                waiter.set_exception(answer)
            else:
                answer.opaque = request.opaque
                waiter.set_result(answer)

        asyncio.get_running_loop().call_soon(resolve)
        return True


def make_future_producer(handler, **options) -> tuple[Producer, FakeInstance]:
    producer, inst = make_producer(handler, **options)
    inst.remoting = FutureRemoting(handler)
    inst.api = MQClientAPI(as_any(inst.remoting), ["ns:1"])
    return producer, inst


async def test_send_async_writes_before_returning_and_completes_without_a_task() -> None:
    producer, inst = make_future_producer(ok)
    tasks_before = len(asyncio.all_tasks())
    fut = producer.send_async(Message("T", b"x"))
    assert len(inst.remoting.requests) == 1  # on the wire already: no loop turn in between
    assert len(asyncio.all_tasks()) == tasks_before
    res = await fut
    assert res.send_status is SendStatus.SEND_OK and res.message_queue == QUEUES[1]
    assert res.msg_id == string_to_properties(inst.remoting.requests[0][1].ext_fields["i"])["UNIQ_KEY"]
    # round robin goes on from there, on both paths
    assert (await producer.send(Message("T", b"y"))).message_queue == QUEUES[2]
    assert (await producer.send_async(Message("T", b"z"))).message_queue == QUEUES[3]


async def test_await_send_is_written_alone_when_it_is_the_producers_only_one_in_flight() -> None:
    # one awaited send in flight: written alone (no batch opened, no flush turn after it);
    # sends made while it is in flight go through invoke (they join or open the turn's batch)
    producer, inst = make_future_producer(
        lambda a, r: RemotingConnectError("refused") if a.startswith("broker-a") else ok(r)
    )
    producer._sender.loop = asyncio.get_running_loop()
    producer._sender.publish["T"] = TopicPublishInfo(message_queues=[QUEUES[2]])  # broker-b only
    await producer.send(Message("T", b"w"))  # the topic checked: the fast path from now on
    remoting = inst.remoting
    remoting.alone.clear()
    assert (await producer.send(Message("T", b"x"))).send_status is SendStatus.SEND_OK
    assert remoting.alone == [True]
    remoting.alone.clear()
    results = await asyncio.gather(*(producer.send(Message("T", b"%d" % i)) for i in range(3)))
    assert [r.send_status for r in results] == [SendStatus.SEND_OK] * 3
    assert remoting.alone == [True, False, False]
    assert producer._sender.awaiting == 0
    # a failed first attempt (broker-a refuses) is retried by the loop and counted out as well
    producer._sender.publish["T"] = TopicPublishInfo(message_queues=QUEUES)
    producer._sender.publish["T"].index = -1  # first pick: broker-a
    assert (await producer.send(Message("T", b"y"))).message_queue.broker_name == "broker-b"
    assert producer._sender.awaiting == 0


async def test_send_async_first_attempt_failures_follow_the_retry_rules() -> None:
    # transport failure on broker-a: the retry goes to broker-b
    producer, inst = make_future_producer(
        lambda a, r: RemotingConnectError("refused") if a.startswith("broker-a") else ok(r)
    )
    producer._sender.publish["T"].index = -1  # first pick: broker-a
    got = []
    res = await producer.send_async(Message("T", b"x"), lambda r, e: got.append((r, e)))
    await asyncio.sleep(0)
    assert res.message_queue.broker_name == "broker-b" and len(inst.remoting.requests) == 2
    assert got == [(res, None)] and not producer._inflight

    # retriable reply with the refresh flag: route refreshed, then retried
    codes = iter([ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUCCESS])
    producer, inst = make_future_producer(
        lambda a, r: ok(a, r) if next(codes) == 0 else reply(ResponseCode.TOPIC_NOT_EXIST, remark="gone")
    )
    assert (await producer.send_async(Message("T", b"x"))).send_status is SendStatus.SEND_OK
    assert len(inst.remoting.requests) == 2 and inst.route_refreshes == 1

    # non-retriable reply: raised as is, no second attempt
    producer, inst = make_future_producer(lambda a, r: reply(ResponseCode.MESSAGE_ILLEGAL, remark="bad"))
    with pytest.raises(MessageIllegalError, match="bad"):
        await producer.send_async(Message("T", b"x"))
    assert len(inst.remoting.requests) == 1

    # every attempt failing: SendFailedError listing each one
    producer, inst = make_future_producer(
        lambda a, r: reply(ResponseCode.SYSTEM_ERROR, remark="boom"), retry_times_when_send_async_failed=2
    )
    with pytest.raises(SendFailedError) as info:
        await producer.send_async(Message("T", b"x"))
    assert len(info.value.errors) == 3 and len(inst.remoting.requests) == 3

    # no retries configured: the one failure, wrapped as the general path does
    producer, inst = make_future_producer(
        lambda a, r: RemotingConnectError("refused"), retry_times_when_send_async_failed=0
    )
    with pytest.raises(SendFailedError) as info:
        await producer.send_async(Message("T", b"x"))
    assert len(info.value.errors) == 1 and isinstance(info.value.__cause__, RemotingConnectError)


async def test_send_async_not_stored_status_retries_on_another_broker_when_asked() -> None:
    def handler(addr, req):
        if addr.startswith("broker-a"):
            return reply(ResponseCode.FLUSH_DISK_TIMEOUT, {"msgId": "X", "queueId": "0", "queueOffset": "1"})
        return ok(req)

    producer, inst = make_future_producer(handler, retry_another_broker_when_not_store_ok=True)
    producer._sender.publish["T"].index = -1
    res = await producer.send_async(Message("T", b"x"))
    assert res.send_status is SendStatus.SEND_OK and res.message_queue.broker_name == "broker-b"
    producer, inst = make_future_producer(handler)
    producer._sender.publish["T"].index = -1
    res = await producer.send_async(Message("T", b"x"))
    assert res.send_status is SendStatus.FLUSH_DISK_TIMEOUT and len(inst.remoting.requests) == 1


async def test_send_async_cancelled_by_the_caller() -> None:
    producer, inst = make_future_producer(ok)
    fut = producer.send_async(Message("T", b"x"))
    fut.cancel()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert fut.cancelled() and not producer._inflight


async def test_send_async_callback_runs_once_on_every_outcome() -> None:
    """The first attempt's reply callback runs the send's done work itself (SendFuture): once,
    and on a cancel before the reply, a retry and a failure as well."""
    outcomes: list[tuple[object, object]] = []
    cb = lambda r, e: outcomes.append((r, e))  # noqa: E731
    # success
    producer, inst = make_future_producer(ok)
    res = await producer.send_async(Message("T", b"x"), cb)
    assert outcomes == [(res, None)] and producer._window.busy == 0 and not producer._inflight
    # cancelled before the reply: the callback at once, not again when the reply comes
    outcomes.clear()
    fut = producer.send_async(Message("T", b"x"), cb)
    fut.cancel()
    for _ in range(3):
        await asyncio.sleep(0)
    assert len(outcomes) == 1 and isinstance(outcomes[0][1], asyncio.CancelledError)
    assert producer._window.busy == 0 and not producer._inflight
    # a retry (broker-a refuses), then a failure without retries
    outcomes.clear()
    producer, inst = make_future_producer(
        lambda a, r: RemotingConnectError("refused") if a.startswith("broker-a") else ok(r)
    )
    producer._sender.publish["T"].index = -1
    res = await producer.send_async(Message("T", b"x"), cb)
    await asyncio.sleep(0)
    assert outcomes == [(res, None)] and producer._window.busy == 0 and not producer._inflight
    outcomes.clear()
    producer, inst = make_future_producer(
        lambda a, r: RemotingConnectError("refused"), retry_times_when_send_async_failed=0
    )
    with pytest.raises(SendFailedError):
        await producer.send_async(Message("T", b"x"), cb)
    assert len(outcomes) == 1 and isinstance(outcomes[0][1], SendFailedError)
    assert producer._window.busy == 0 and not producer._inflight


async def test_send_async_fast_path_futures_carry_their_own_callback() -> None:
    """send_first's done work is one per producer; each future carries its send's callback."""
    producer, inst = make_future_producer(ok)
    got: dict[str, list[object]] = {"a": [], "b": []}
    futs = [
        producer.send_async(Message("T", k.encode()), lambda r, e, k=k: got[k].append((r, e)))
        for k in "ab"
    ] + [producer.send_async(Message("T", b"c"))]  # no callback
    assert all(f.on_done is producer._first_done for f in futs)  # type: ignore[attr-defined]
    results = [await f for f in futs]
    assert got["a"] == [(results[0], None)] and got["b"] == [(results[1], None)]
    assert producer._window.busy == 0 and not producer._inflight


def test_retry_classification_is_one_rule() -> None:
    from pocketmq.client.producer.sender import is_retriable
    from pocketmq.remoting.protocol.errors import SystemBusyError

    assert is_retriable(RemotingConnectError("x"))
    assert is_retriable(SystemBusyError("busy"))
    assert not is_retriable(MessageIllegalError("bad"))
    assert not is_retriable(ValueError("x"))


async def test_inline_round_robin_matches_select_one() -> None:
    # Sender.send and Sender.send_first inline TopicPublishInfo.select_one: same queue, same cursor
    for start in range(-1, 6):
        ref = TopicPublishInfo(list(QUEUES), index=start)
        expected = [ref.select_one() for _ in range(3)]
        producer, _ = make_producer(ok)
        producer._sender.publish["T"].index = start
        got = [(await producer.send(Message("T", b"x"))).message_queue for _ in range(2)]
        producer2, _ = make_future_producer(ok)
        producer2._sender.publish["T"].index = start + 2
        got.append((await producer2.send_async(Message("T", b"x"))).message_queue)
        assert got == expected
        assert producer._sender.publish["T"].index == ref.index - 1


async def test_single_message_properties_fast_path_matches_properties_to_string() -> None:
    from pocketmq.remoting.protocol.message import properties_to_string

    producer, inst = make_producer(ok)
    for m in (Message("T", b"0", tags="t"), Message("T", b"1")):
        await producer.send(m)
        props_str = inst.remoting.requests[-1][1].ext_fields["i"]
        props = m.wire_properties()
        props["UNIQ_KEY"] = string_to_properties(props_str)["UNIQ_KEY"]
        assert props_str == properties_to_string(props)


@pytest.mark.parametrize("how", ["send_async", "send"])
async def test_first_attempt_is_born_when_its_uniq_key_was_made(monkeypatch, how: str) -> None:
    # one clock read per send (send_async's and await send's): the first attempt's
    # bornTimestamp is the millisecond its UNIQ_KEY was made at (the generator's); a retry's is
    # read again
    import time as time_mod

    producer, inst = make_future_producer(
        lambda a, r: RemotingConnectError("refused") if a.startswith("broker-a") else ok(r)
    )
    send = getattr(producer, how)
    gen = producer._prep._uniq
    await send(Message("T", b"w"))  # the topic checked: the fast path from now on
    inst.remoting.requests.clear()
    producer._sender.publish["T"].index = -1  # first pick: broker-a, refused: retried on broker-b
    base = time_mod.time_ns()
    clock = iter(range(base, base + 10**12, 7 * 10**6))  # each read 7 ms after the last
    monkeypatch.setattr(time_mod, "time_ns", lambda: next(clock))
    res = await send(Message("T", b"x"))
    assert res.send_status is SendStatus.SEND_OK
    first, second = (int(r.ext_fields["g"]) for _, r in inst.remoting.requests)
    assert first == gen.last_ms  # the UNIQ_KEY's millisecond, not a second read
    assert second > first  # the retry is born again
    # the same UNIQ_KEY on both attempts
    keys = {string_to_properties(r.ext_fields["i"])["UNIQ_KEY"] for _, r in inst.remoting.requests}
    assert keys == {res.msg_id}


def test_budget_start_is_the_born_time_on_the_monotonic_clock() -> None:
    import time as time_mod

    from pocketmq.client.producer.sender import budget_start

    now_ms = time_mod.time_ns() // 1_000_000
    before = time_mod.monotonic()
    start = budget_start(now_ms - 1500, 3.0)  # born 1.5 s ago
    assert before - 1.6 < start < time_mod.monotonic() - 1.45
    # a wall clock stepped back: no time spent; stepped far forward: at most the whole budget
    assert budget_start(now_ms + 60_000, 3.0) >= before
    assert budget_start(now_ms - 600_000, 3.0) >= before - 3.01


async def test_plain_send_async_request_is_its_own_waiter_with_the_same_bytes() -> None:
    # a plain message's first attempt: one object is the request (its header the queue's
    # template) and the waiter of its reply; its bytes are what plain_request makes of it
    from pocketmq.client.api import plain_request

    seen: list[tuple[object, object, bytes]] = []

    class Recording(FutureRemoting):
        def invoke_into(self, addr, request, timeout, waiter, alone=False):  # type: ignore[override]
            seen.append((request, waiter, request.encode()))
            return super().invoke_into(addr, request, timeout, waiter, alone)

    producer, inst = make_future_producer(ok)
    inst.remoting = Recording(ok)
    inst.api = MQClientAPI(as_any(inst.remoting), ["ns:1"])
    await producer.send_async(Message("T", b"w", tags="A"))  # the topic checked: the fast path
    res = await producer.send_async(Message("T", b"x", tags="A"))
    request, waiter, wire = seen[-1]
    assert request is waiter and res.msg_id == request.uniq  # type: ignore[attr-defined]
    twin = plain_request(request.tpl, request.born, request.uniq, b"x")  # type: ignore[attr-defined]
    twin.opaque = request.opaque  # type: ignore[attr-defined]
    assert wire == twin.encode()
    decoded = inst.remoting.requests[-1][1].ext_fields
    assert decoded["b"] == "T" and decoded["e"] == str(res.message_queue.queue_id)
    assert decoded["g"] == str(request.born) and "TAGS\x01A" in decoded["i"]  # type: ignore[attr-defined]


def test_plain_prepared_renders_its_properties_on_first_read() -> None:
    from pocketmq.client.producer.prepare import MessagePreparer
    from pocketmq.remoting.protocol.message import MessageConst, properties_to_string

    prep = MessagePreparer(Producer("PG", namesrv="127.0.0.1:9876").config)
    for tags in ("TagA", None):
        prep.prepare(Message("T", b"w"))  # the topic checked: the fast path from now on
        p = prep.prepare(Message("T", b"x", tags=tags))
        assert p._props is None  # the header template holds none: not rendered per send
        want = {MessageConst.UNIQ_KEY: p.msg_id} if tags is None else {"TAGS": tags, "UNIQ_KEY": p.msg_id}
        assert p.props == properties_to_string(want) and p._props == p.props
        p.props = "X\x01y"  # (a transactional half sets its own)
        assert p.props == "X\x01y"


def test_plain_prepared_and_first_send_are_made_without_an_init_and_fully_filled() -> None:
    """The plain fast path's Prepared and send_first's _FirstSend are made by a bare class call
    (object's __init__, no arguments): every slot is filled by their makers, and they are still
    a Prepared and a SendRequest."""
    from pocketmq.client.api import SendRequest
    from pocketmq.client.producer.prepare import MessagePreparer, Prepared
    from pocketmq.client.producer.sender import _FirstSend

    prep = MessagePreparer(Producer("PG", namesrv="127.0.0.1:9876").config)
    prep.prepare(Message("T", b"w"))  # the topic checked: the fast path from now on
    p = prep.prepare(Message("T", b"x", tags="A"))
    assert isinstance(p, Prepared) and type(p) is not Prepared
    assert {name: getattr(p, name) for name in Prepared.__slots__ if name != "born"} == {
        "_props": None, "batch": False, "body": b"x", "flag": 0, "max_reconsume": None,
        "msg_id": p.msg_id, "plain_tags": "A", "reconsume": None, "sys_flag": 0, "topic": "T",
    }  # fmt: skip
    assert p.born > 0
    with pytest.raises(TypeError):
        _FirstSend(0)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        SendRequest(0)  # type: ignore[call-arg]
    assert isinstance(_FirstSend(), SendRequest) and type(SendRequest()) is SendRequest


async def test_sender_command_is_plain_requests_request() -> None:
    # Sender.command builds plain_request's request inline: the same bytes on the wire
    from pocketmq.client.api import SendRequest, plain_request

    producer, inst = make_producer(ok)
    sender = producer._sender
    sender.prep.prepare(Message("T", b"w"))  # the topic checked: the fast path from now on
    p = sender.prep.prepare(Message("T", b"x", tags="A"))
    cmd = sender.command(inst.api, p, QUEUES[3], 1_700_000_000_123)
    assert type(cmd) is SendRequest and cmd.born == 1_700_000_000_123
    twin = plain_request(cmd.tpl, cmd.born, p.msg_id, b"x")
    cmd.opaque = twin.opaque = 77
    assert cmd.encode() == twin.encode()
    fresh = sender.command(inst.api, p, QUEUES[3])  # no born given: now
    assert isinstance(fresh, SendRequest) and abs(int(fresh.born) - p.born) < 60_000
