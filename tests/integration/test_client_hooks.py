"""Send and consume hooks (RocketMQ's SendMessageHook / ConsumeMessageHook) against a real broker."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from pocketmq.client import (
    CONSUME_SUCCESS,
    RECONSUME_LATER,
    ConsumeFromWhere,
    ConsumeMessageContext,
    Message,
    MessageValidationError,
    Producer,
    PushConsumer,
    SendMessageContext,
)
from pocketmq.testing import Cluster
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - fixtures
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


class Recorder:
    def __init__(self) -> None:
        self.before: list[SendMessageContext] = []
        self.after: list[SendMessageContext] = []

    def hook_name(self) -> str:
        return "recorder"

    def send_message_before(self, ctx: SendMessageContext) -> None:
        ctx.props["seen"] = True
        self.before.append(ctx)

    def send_message_after(self, ctx: SendMessageContext) -> None:
        assert ctx.props["seen"]  # the same context travels from before to after
        self.after.append(ctx)


class Broken:
    def hook_name(self) -> str:
        return "broken"

    def send_message_before(self, ctx: Any) -> None:
        raise RuntimeError("hook bug")

    send_message_after = send_message_before
    consume_message_before = send_message_before
    consume_message_after = send_message_before


async def test_send_hooks_see_every_kind_of_send_and_a_raising_hook_fails_nothing(
    pmq: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    await pmq.create_topic("HookT", queues=2)
    rec = Recorder()
    async with Producer("HookPG", namesrv=pmq.namesrv_addr) as producer:
        producer.register_send_message_hook(Broken())
        producer.register_send_message_hook(rec)
        with caplog.at_level(logging.WARNING, logger="pocketmq.client.hooks"):
            sync = await producer.send(Message("HookT", b"sync"))
            asynchronous = await producer.send_async(Message("HookT", b"async"))
            await producer.send_oneway(Message("HookT", b"oneway"))
            batch = await producer.send_batch([Message("HookT", b"b1"), Message("HookT", b"b2")])
            with pytest.raises(MessageValidationError):  # over maxMessageSize: refused by the client
                await producer.send(Message("HookT", b"x" * (4 * 1024 * 1024 + 1)))
        await wait_until(lambda: len(rec.after) == 5)
    assert [c.communication_mode for c in rec.before] == ["SYNC", "ASYNC", "ONEWAY", "SYNC", "SYNC"]
    assert [c.send_result for c in rec.after[:2]] == [sync, asynchronous]
    assert rec.after[0].mq == sync.message_queue and rec.after[0].producer_group == "HookPG"
    assert rec.after[2].send_result is None and rec.after[2].exception is None  # oneway: no reply
    assert rec.after[3].send_result is batch and len(list(rec.after[3].message)) == 2  # type: ignore[arg-type]
    assert rec.after[4].exception is not None and rec.after[4].send_result is None
    assert all(c.begin_timestamp > 0 for c in rec.before)
    assert any("broken" in r.getMessage() for r in caplog.records), "a raising hook is logged"


async def test_consume_hooks_wrap_every_listener_call(pmq: Cluster) -> None:
    await pmq.create_topic("HookC", queues=1)
    calls: list[tuple[str, ConsumeMessageContext]] = []
    failed_once: set[bytes] = set()

    class Timing:
        def hook_name(self) -> str:
            return "timing"

        def consume_message_before(self, ctx: ConsumeMessageContext) -> None:
            calls.append(("before", ctx))

        def consume_message_after(self, ctx: ConsumeMessageContext) -> None:
            calls.append(("after", ctx))

    async def listener(msgs: list[Any], ctx: Any) -> Any:
        if msgs[0].body == b"retry-me" and msgs[0].body not in failed_once:
            failed_once.add(msgs[0].body)
            return RECONSUME_LATER
        return CONSUME_SUCCESS

    consumer = PushConsumer("HookCG", namesrv=pmq.namesrv_addr, listener=listener,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe("HookC")
    consumer.register_consume_message_hook(Broken())
    consumer.register_consume_message_hook(Timing())
    async with Producer("HookCP", namesrv=pmq.namesrv_addr) as producer:
        await producer.send(Message("HookC", b"ok"))
        await producer.send(Message("HookC", b"retry-me"))
    await consumer.start()
    try:
        # "ok", the failed "retry-me", then "retry-me" again from the retry topic
        await wait_until(lambda: sum(1 for k, _ in calls if k == "after") >= 3, timeout=60)
    finally:
        await consumer.shutdown()
    afters = [c for k, c in calls if k == "after"]
    by_body = {(c.msg_list[0].body, c.success) for c in afters}
    assert (b"ok", True) in by_body and (b"retry-me", False) in by_body and (b"retry-me", True) in by_body
    assert all(c.consumer_group == "HookCG" and c.mq is not None for c in afters)
    assert [k for k, _ in calls][:2] == ["before", "after"]
    await asyncio.sleep(0)
