from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from pocketmq.client import Message, MessageQueue, unpack_body
from pocketmq.client.acl import AclClientRPCHook
from pocketmq.client.config import ClientConfig, PushConsumerConfig
from pocketmq.client.consumer.offset_store import (
    LocalFileOffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from pocketmq.client.consumer.subscription import new_subscription
from pocketmq.client.errors import MessageValidationError
from pocketmq.client.producer.selector import java_hash, select_by_hash
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import RemotingConnectError
from pocketmq.remoting.protocol.message import decode_message, encode_message, properties_to_string

MQ0 = MessageQueue("T", "b", 0)
MQ1 = MessageQueue("T", "b", 1)


class FakeOffsetBroker:
    def __init__(self) -> None:
        self.stored: dict[MessageQueue, int] = {MQ1: 77}
        self.calls: list[tuple[MessageQueue, int, bool]] = []
        self.down = False

    async def find_broker_addr_for_offsets(self, broker_name: str) -> str:
        return "127.0.0.1:10911"

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue) -> int:
        if self.down:
            raise RemotingConnectError("down")
        return self.stored.get(mq, -1)

    async def update_consumer_offset(self, addr, group, mq, offset, *, oneway=False) -> None:
        self.calls.append((mq, offset, oneway))
        self.stored[mq] = offset


async def test_remote_offset_store() -> None:
    broker = FakeOffsetBroker()
    store = RemoteBrokerOffsetStore(broker, "G")
    assert await store.read_offset(MQ0, ReadOffsetType.READ_FROM_STORE) == -1
    assert await store.read_offset(MQ1, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 77
    assert await store.read_offset(MQ1, ReadOffsetType.READ_FROM_MEMORY) == 77
    store.update_offset(MQ1, 80)
    store.update_offset(MQ1, 79, increase_only=True)
    assert store.table[MQ1] == 80
    store.update_offset(MQ0, 5)
    await store.persist_all([MQ1], oneway=True)
    assert broker.calls == [(MQ1, 80, True)]
    assert MQ0 not in store.table  # no longer assigned: forgotten
    broker.down = True
    assert await store.read_offset(MQ0, ReadOffsetType.READ_FROM_STORE) == -2


async def test_local_offset_store_round_trip(tmp_path) -> None:
    store = LocalFileOffsetStore(str(tmp_path), "127.0.0.1@1", "G", fsync=False)
    await store.load()
    assert await store.read_offset(MQ0, ReadOffsetType.READ_FROM_STORE) == -1
    store.update_offset(MQ0, 3)
    store.update_offset(MQ1, 9)
    await store.persist_all([MQ0, MQ1])
    text = (tmp_path / "127.0.0.1@1" / "G" / "offsets.json").read_text()
    assert '{"brokerName":"b","queueId":0,"topic":"T"}' in text.replace(" ", "").replace("\n", "").replace(
        "\t", ""
    )
    again = LocalFileOffsetStore(str(tmp_path), "127.0.0.1@1", "G", fsync=False)
    await again.load()
    assert again.table == {MQ0: 3, MQ1: 9}
    assert await again.read_offset(MQ1, ReadOffsetType.READ_FROM_STORE) == 9


def test_message_properties_and_msgpack() -> None:
    msg = Message.from_object("T", {"a": [1, 2], "b": "x"}, tags="TagA", keys=["k1"])
    props = msg.wire_properties()
    assert (
        props["CONTENT_TYPE"] == "application/msgpack" and props["TAGS"] == "TagA" and props["KEYS"] == "k1"
    )
    assert "WAIT" not in props
    msg.wait_store_msg_ok = False
    assert msg.wire_properties()["WAIT"] == "false"
    record = encode_message(topic="T", body=msg.body, properties=properties_to_string(props))
    assert unpack_body(decode_message(record)) == {"a": [1, 2], "b": "x"}
    with pytest.raises(ValueError, match="content type"):
        unpack_body(decode_message(encode_message(topic="T", body=b"raw")))


def test_subscription_expressions() -> None:
    sub = new_subscription("T", "TagA || TagB ||  ")
    assert set(sub.tags_set) == {"TagA", "TagB"} and len(sub.code_set) == 2
    assert new_subscription("T", "*").is_all and new_subscription("T", "").is_all
    assert sub.sub_version > 1_600_000_000_000  # creation time in ms, as Java's constructor sets it
    sql = new_subscription("T", "  a > 1 ", "SQL92")
    assert (sql.sub_string, sql.expression_type, sql.tags_set) == ("a > 1", "SQL92", ())
    for bad in (("", "SQL92"), ("x", "NOPE")):
        with pytest.raises(MessageValidationError):
            new_subscription("T", *bad)
    with pytest.raises(MessageValidationError):
        new_subscription("T", "||")
    j = sub.to_json()
    assert j["expressionType"] == "TAG" and j["subString"] == "TagA || TagB ||"
    assert sorted(j["codeSet"]) == sorted(sub.code_set)


def test_java_hash_and_selector() -> None:
    assert java_hash("hello") == 99162322
    assert java_hash(2**40) == (2**40 >> 32) ^ 0  # Long.hashCode
    mqs = [MessageQueue("T", "b", i) for i in range(4)]
    assert select_by_hash(mqs, Message("T", b"x"), "hello") == mqs[99162322 % 4]


def test_acl_signature() -> None:
    hook = AclClientRPCHook("ak", "sk")
    req = RemotingCommand.request(10, {"b": "T", "a": "G"}, b"body")
    hook.before_request("x", req)
    signed = b"ak" + b"G" + b"T" + b"body"  # values by sorted key: AccessKey < a < b
    expected = base64.b64encode(hmac.new(b"sk", signed, hashlib.sha1).digest()).decode()
    assert req.ext_fields["Signature"] == expected and req.ext_fields["AccessKey"] == "ak"


def test_config_aliases_and_client_id() -> None:
    cfg = ClientConfig.model_validate(
        {
            "namesrvAddr": "127.0.0.1:9876;127.0.0.2:9876",
            "instanceName": "i1",
            "clientIp": "10.0.0.1",
            "unitName": "u",
        }
    )
    assert cfg.client_id == "10.0.0.1@i1@u" and cfg.namesrv_list == ["127.0.0.1:9876", "127.0.0.2:9876"]
    default = ClientConfig(namesrv_addr="127.0.0.1:9876", client_ip="10.0.0.1")
    assert default.client_id.startswith("10.0.0.1@") and "DEFAULT" not in default.client_id
    with pytest.raises(ValueError, match="namesrvAddr"):
        ClientConfig(namesrv_addr="nohost")
    with pytest.raises(ValueError):
        ClientConfig(namesrv_addr="127.0.0.1:9876", pollNameServerInterval_typo=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError):
        PushConsumerConfig(consumer_group="bad group")
    assert PushConsumerConfig(consumer_group="G").effective_max_reconsume_times == 16
    assert (
        json.loads(PushConsumerConfig(consumer_group="G").model_dump_json(by_alias=True))["consumeThreadMax"]
        == 20
    )
