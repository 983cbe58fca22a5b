"""Request-reply (issue 22): Producer.request, SEND_REPLY_MESSAGE_V2 and PUSH_REPLY_MESSAGE_TO_CLIENT."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from pocketmq.client import (
    CONSUME_SUCCESS,
    ConsumeFromWhere,
    Message,
    Producer,
    PushConsumer,
    SendFailedError,
)
from pocketmq.client.producer.request_reply import RequestTimeoutError, create_reply_message
from pocketmq.remoting.protocol.errors import ResponseError
from pocketmq.remoting.protocol.message import MessageConst
from pocketmq.testing import Cluster
from tests.integration.support import loop_clean_at_exit  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


async def test_round_trip_in_one_process(pmq: Cluster) -> None:
    await pmq.create_topic("ReqT", queues=2)
    async with (
        Producer("RespPG", namesrv=pmq.namesrv_addr) as responder,
        Producer("ReqPG", namesrv=pmq.namesrv_addr) as requester,
    ):

        async def listener(msgs, ctx):
            for m in msgs:
                await responder.send_reply(create_reply_message(m, b"pong:" + m.body))
            return CONSUME_SUCCESS

        consumer = PushConsumer(
            "RespCG", namesrv=pmq.namesrv_addr, listener=listener,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )  # fmt: skip
        consumer.subscribe("ReqT")
        async with consumer:
            replies = await asyncio.gather(
                *(requester.request(Message("ReqT", b"ping%d" % i), timeout=15) for i in range(5))
            )
        assert sorted(r.body for r in replies) == [b"pong:ping%d" % i for i in range(5)]
        reply = replies[0]
        assert reply.topic == "DefaultCluster_REPLY_TOPIC"
        assert reply.get_property(MessageConst.MSG_TYPE) == "reply"
        assert reply.get_property(MessageConst.CORRELATION_ID)
        assert reply.get_property(MessageConst.REPLY_TO_CLIENT) == requester.instance.client_id


async def test_round_trip_with_a_responder_process(pmq: Cluster) -> None:
    await pmq.create_topic("ReqProc", queues=2)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.integration.request_responder", pmq.namesrv_addr, "ReqProc",
        cwd=ROOT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdin is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.strip() == b"ready"
        async with Producer("ReqPG2", namesrv=pmq.namesrv_addr) as requester:
            for i in range(3):
                reply = await requester.request(Message("ReqProc", b"hello%d" % i), timeout=20)
                assert reply.body == b"pong:hello%d" % i
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def test_no_responder_times_out_and_unknown_requester_is_refused(pmq: Cluster) -> None:
    await pmq.create_topic("ReqNobody", queues=1)
    async with Producer("ReqPG3", namesrv=pmq.namesrv_addr) as producer:
        with pytest.raises(RequestTimeoutError, match="wait reply message timeout"):
            await producer.request(Message("ReqNobody", b"x"), timeout=1.0)
        assert not producer.instance.replies.waiting
        orphan = Message(
            "DefaultCluster_REPLY_TOPIC", b"late",
            properties={"MSG_TYPE": "reply", "CORRELATION_ID": "c1", "REPLY_TO_CLIENT": "127.0.0.1@nobody"},
        )  # fmt: skip
        # SYSTEM_ERROR is retriable for sends (as in the Java producer): every attempt is refused
        with pytest.raises(SendFailedError, match=r"channel of <127.0.0.1@nobody> not found") as info:
            await producer.send_reply(orphan)
        assert all(isinstance(e, ResponseError) and e.code == 1 for e in info.value.errors)
