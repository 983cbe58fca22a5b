"""Admin requests that reach clients, end to end with the pocketmq SDK (name server + broker + consumer)."""

from __future__ import annotations

import contextlib
import json

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer
from pocketmq.remoting.protocol.bodies import ConsumerConnection, ConsumerRunningInfo, ResetOffsetBody
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.testing import cluster
from tests.broker.helpers import Wire
from tests.waiting import wait_until


async def test_reset_running_info_and_consume_directly_with_a_real_consumer(tmp_path):
    async with cluster(tmp_path / "c") as c:
        await c.create_topic("E2E", queues=2)
        async with Producer("PG", namesrv=c.namesrv_addr) as producer:
            sent = [await producer.send(Message("E2E", f"m{i}".encode(), keys=f"k{i}")) for i in range(6)]
        got: list[bytes] = []

        async def listener(msgs, ctx):
            got.extend(m.body for m in msgs)
            return CONSUME_SUCCESS

        consumer = PushConsumer(
            "E2EG",
            namesrv=c.namesrv_addr,
            listener=listener,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("E2E", "*")
        admin = Wire(c.brokers[0].broker_addr)
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(admin.close)
            await stack.enter_async_context(consumer)
            await wait_until(lambda: len(got) >= 6)
            await consumer.persist_consumer_offset()
            await wait_until(
                lambda: c.brokers[0].consumer_offset_manager.query_offsets("E2EG", "E2E") == {0: 3, 1: 3}
            )

            r = await admin.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "E2EG"})
            (conn,) = ConsumerConnection.decode(r.body).connection_set
            client_id = conn.client_id

            # the consumer answers the forwarded GET_CONSUMER_RUNNING_INFO itself
            ext = {"consumerGroup": "E2EG", "clientId": client_id, "jstackEnable": "false"}
            r = await admin.call(RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
            assert r.code == ResponseCode.SUCCESS, r.remark
            info = ConsumerRunningInfo.decode(r.body)
            assert {s.topic for s in info.subscription_set} >= {"E2E"}

            # ... and consumes one stored message on request
            ext = {"consumerGroup": "E2EG", "clientId": client_id, "msgId": sent[0].offset_msg_id}
            r = await admin.call(RequestCode.CONSUME_MESSAGE_DIRECTLY, ext)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert json.loads(r.body)["consumeResult"] == "CR_SUCCESS"

            # reset to the beginning: the consumer takes the pushed offsets and consumes again
            before = len(got)
            ext = {"topic": "E2E", "group": "E2EG", "timestamp": "0", "isForce": "true"}
            r = await admin.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert set(ResetOffsetBody.decode(r.body).offset_table.values()) == {0}
            await wait_until(lambda: len(got) >= before + 6)
            assert sorted(got[before:])[:6] == sorted(f"m{i}".encode() for i in range(6))
