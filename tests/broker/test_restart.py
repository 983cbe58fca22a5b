"""Metadata and messages survive a clean shutdown and restart of an in-process broker."""

from __future__ import annotations

import asyncio
import json

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.message import decode_messages
from tests.broker.helpers import Wire, running_broker


async def test_clean_restart_keeps_topics_groups_offsets_and_messages(tmp_path):
    root = str(tmp_path / "store")
    async with running_broker(root) as b:
        w = Wire(b.broker_addr)
        for i in range(5):
            assert (await w.send("Durable", f"m{i}".encode(), keys=f"k{i}")).code == 0
        r = await w.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "Durable", "queueId": "0", "commitOffset": "3"},
        )
        assert r.code == ResponseCode.SUCCESS
        await w.heartbeat("c", consumer_group="G", topics={"Durable": "*"})
        await w.close()
    cfg = tmp_path / "store" / "config"
    assert json.loads((cfg / "topics.json").read_text())["topicConfigTable"]["Durable"]["writeQueueNums"] == 4
    assert "G" in json.loads((cfg / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
    assert "3" in (cfg / "consumerOffset.json").read_text()
    assert not (tmp_path / "store" / "abort").exists()

    async with running_broker(root) as b:
        assert b.topic_config_manager.select_topic_config("Durable") is not None
        assert b.topic_config_manager.select_topic_config("%RETRY%G") is not None
        w = Wire(b.broker_addr)
        r = await w.call(
            RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "Durable", "queueId": "0"}
        )
        assert r.ext_fields["offset"] == "3"
        r = await w.pull("Durable", 0, 3, sys_flag=0x4)
        assert [m.body for m in decode_messages(r.body)] == [b"m3", b"m4"]
        r = await w.send("Durable", b"m5")
        assert r.ext_fields["queueOffset"] == "5"
        await w.close()


async def test_offsets_are_flushed_periodically(tmp_path):
    async with running_broker(str(tmp_path), flushConsumerOffsetInterval=50) as b:
        w = Wire(b.broker_addr)
        await w.call(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "G", "topic": "T", "queueId": "1", "commitOffset": "9"},
        )
        path = tmp_path / "config" / "consumerOffset.json"
        for _ in range(100):
            if path.exists() and "9" in path.read_text():
                break
            await asyncio.sleep(0.02)
        assert "T@G" in path.read_text()
        await w.close()
