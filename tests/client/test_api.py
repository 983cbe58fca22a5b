from __future__ import annotations

import zlib

import orjson
import pytest

from pocketmq.client.api import MQClientAPI, decode_pull_result
from pocketmq.client.consumer.subscription import new_subscription
from pocketmq.client.errors import RemotingConnectError, TopicRouteNotFoundError
from pocketmq.client.message import MessageQueue, PullStatus, SendStatus
from pocketmq.remoting.protocol.codes import (
    FLAG_COMMIT_OFFSET,
    FLAG_LITE_PULL,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    LanguageCode,
    RequestCode,
    ResponseCode,
    pull_sys_flag,
)
from pocketmq.remoting.protocol.errors import NoPermissionError, SystemBusyError
from pocketmq.remoting.protocol.headers import PullMessageRequestHeader
from pocketmq.remoting.protocol.heartbeat import HeartbeatData
from pocketmq.remoting.protocol.message import COMPRESSED_FLAG, encode_message

from .fakes import FakeRemoting, as_any, reply

ROUTE = b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"b","cluster":"C"}],"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,"writeQueueNums":4}]}'
MQ = MessageQueue("T", "b", 1)


def api_with(handler) -> tuple[MQClientAPI, FakeRemoting]:
    fake = FakeRemoting(handler)
    return MQClientAPI(as_any(fake), ["127.0.0.1:1", "127.0.0.1:2"]), fake


async def test_route_request_fails_over_to_next_namesrv() -> None:
    def handler(addr, req):
        assert req.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
        assert req.ext_fields == {"topic": "T", "acceptStandardJsonOnly": "true"}
        assert req.language == LanguageCode.PYTHON
        if addr.endswith(":1"):
            return RemotingConnectError("refused")
        return reply(body=ROUTE)

    api, fake = api_with(handler)
    route = await api.get_topic_route("T")
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
    assert [a for a, _ in fake.requests] == ["127.0.0.1:1", "127.0.0.1:2"]
    await api.get_topic_route("T")  # sticks to the working one
    assert fake.requests[-1][0] == "127.0.0.1:2"


async def test_route_not_found() -> None:
    api, _ = api_with(
        lambda a, r: reply(
            ResponseCode.TOPIC_NOT_EXIST, remark="No topic route info in name server for the topic: T"
        )
    )
    with pytest.raises(TopicRouteNotFoundError, match="T"):
        await api.get_topic_route("T")


def test_send_response_parsing() -> None:
    ok = reply(
        0,
        {
            "msgId": "7F00000100002A9F0000000000000F3C",
            "queueId": "2",
            "queueOffset": "7",
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        },
    )
    res = MQClientAPI.process_send_response(MQ, ok, "UNIQ", "addr")
    assert res.send_status is SendStatus.SEND_OK
    assert (res.msg_id, res.offset_msg_id, res.message_queue, res.queue_offset) == (
        "UNIQ",
        "7F00000100002A9F0000000000000F3C",
        MessageQueue("T", "b", 2),
        7,
    )
    for code, status in [
        (10, SendStatus.FLUSH_DISK_TIMEOUT),
        (12, SendStatus.FLUSH_SLAVE_TIMEOUT),
        (11, SendStatus.SLAVE_NOT_AVAILABLE),
    ]:
        assert (
            MQClientAPI.process_send_response(
                MQ, reply(code, {"msgId": "x", "queueId": "1", "queueOffset": "1"}), "U", "a"
            ).send_status
            is status
        )
    with pytest.raises(SystemBusyError) as info:
        MQClientAPI.process_send_response(MQ, reply(2, remark="[REJECTREQUEST]system busy"), "U", "1.2.3.4:5")
    assert info.value.retriable and "1.2.3.4:5" in str(info.value)
    with pytest.raises(NoPermissionError):
        MQClientAPI.process_send_response(MQ, reply(16, remark="no"), "U", "a")


async def test_send_uses_v2_or_batch_code() -> None:
    seen = []

    def handler(addr, req):
        seen.append(req.code)
        return reply(0, {"msgId": "M", "queueId": "1", "queueOffset": "3"})

    api, _ = api_with(handler)
    await api.send_message("a", MQ, {"b": "T"}, b"x", "U", 1.0)
    await api.send_message("a", MQ, {"b": "T"}, b"x", "U", 1.0, batch=True)
    assert seen == [RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE]


def test_pull_flags() -> None:
    assert pull_sys_flag(True, True, False) == FLAG_COMMIT_OFFSET | FLAG_SUSPEND
    assert pull_sys_flag(False, False, True, lite=True) == FLAG_SUBSCRIPTION | FLAG_LITE_PULL


async def test_pull_statuses_and_decoding() -> None:
    raw = encode_message(
        topic="T",
        body=zlib.compress(b"hello" * 1000),
        sys_flag=COMPRESSED_FLAG,
        properties={"TAGS": "A"},
        queue_offset=5,
    )
    raw += encode_message(topic="T", body=b"b", properties={"TAGS": "B"}, queue_offset=6)
    codes = iter([(0, raw), (19, None), (20, None), (21, None)])

    def handler(addr, req):
        code, body = next(codes)
        return reply(
            code,
            {"nextBeginOffset": "7", "minOffset": "0", "maxOffset": "7", "suggestWhichBrokerId": "0"},
            body,
        )

    api, _ = api_with(handler)
    header = PullMessageRequestHeader(consumer_group="G", topic="T", queue_id=1, queue_offset=5, max_msg_nums=32,
                  sys_flag=2, commit_offset=0, suspend_timeout_millis=15000, subscription="A", sub_version=1)  # fmt: skip
    res = await api.pull_message("a", header, 1.0)
    assert res.status is PullStatus.FOUND and res.next_begin_offset == 7
    msgs = decode_pull_result(res, new_subscription("T", "A"))
    assert [m.body for m in msgs] == [b"hello" * 1000]  # inflated, B filtered out
    assert res.body is None
    assert [(await api.pull_message("a", header, 1.0)).status for _ in range(3)] == [
        PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG, PullStatus.OFFSET_ILLEGAL,
    ]  # fmt: skip


async def test_offsets_heartbeat_locks() -> None:
    def handler(addr, req):
        if req.code == RequestCode.QUERY_CONSUMER_OFFSET:
            return reply(22) if req.ext_fields["queueId"] == "0" else reply(0, {"offset": "42"})
        if req.code == RequestCode.LOCK_BATCH_MQ:
            body = orjson.loads(req.body)
            assert body["consumerGroup"] == "G" and body["clientId"] == "cid"
            return reply(0, body=b'{"lockOKMQSet":[{"brokerName":"b","queueId":1,"topic":"T"}]}')
        if req.code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
            return reply(0, body=b'{"consumerIdList":["a@1","b@2"]}')
        if req.code == RequestCode.HEART_BEAT:
            assert orjson.loads(req.body)["clientID"] == "cid"
            r = reply(0)
            r.version = 409
            return r
        return reply(0, {"offset": "9"})

    api, fake = api_with(handler)
    assert await api.query_consumer_offset("a", "G", MessageQueue("T", "b", 0)) == -1
    assert await api.query_consumer_offset("a", "G", MQ) == 42
    assert await api.get_max_offset("a", MQ) == 9
    assert await api.lock_batch_mq("a", "G", "cid", [MQ, MessageQueue("T", "b", 2)]) == {MQ}
    assert await api.get_consumer_id_list("a", "G") == ["a@1", "b@2"]
    assert await api.send_heartbeat("a", HeartbeatData("cid")) == 409
    await api.update_consumer_offset("a", "G", MQ, 11, oneway=True)
    addr, req = fake.oneway[-1]
    assert (
        req.code == RequestCode.UPDATE_CONSUMER_OFFSET
        and req.ext_fields["commitOffset"] == "11"
        and req.is_oneway
    )
