"""Metadata a reply acknowledges survives ``kill -9`` of a real mqbroker process (issue 23).

A topic auto-created by a send (ASYNC_FLUSH and SYNC_FLUSH), a group and its ``%RETRY%`` topic
auto-created by a heartbeat, a pull or a send-back are in topics.json / subscriptionGroup.json before the reply, not only after the periodic
config persist (every second): the broker is killed right after the last reply and the files are
read before it restarts. And at load, a topic whose ConsumeQueues are on disk but whose config
is missing is restored, so its stored messages are never orphaned.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.message import decode_messages
from pocketmq.testing.procs import Servers, servers
from pocketmq.testing.wire import Wire

pytestmark = [pytest.mark.integration, pytest.mark.fault]

N = 200
QUEUES = 4  # the Wire's defaultTopicQueueNums


def table(s: Servers, name: str, key: str) -> dict[str, object]:
    path = s.store_dir / "config" / name
    if not path.exists():
        return {}
    table: dict[str, object] = json.loads(path.read_text())[key]
    return table


async def send_all(addr: str, topic: str) -> None:
    w = Wire(addr)
    try:
        replies = await asyncio.gather(
            *(w.send(topic, f"m{i}".encode(), queue_id=i % QUEUES) for i in range(N))
        )
        assert all(r.code == ResponseCode.SUCCESS for r in replies), [
            (r.code, r.remark) for r in replies if r.code != ResponseCode.SUCCESS
        ]
    finally:
        await w.close()


def pull_all(s: Servers, topic: str, group: str) -> list[bytes]:
    async def run() -> list[bytes]:
        w = Wire(s.broker.addr)
        bodies: list[bytes] = []
        try:
            for q in range(QUEUES):
                offset = 0
                while True:
                    r = await w.pull(topic, q, offset, group=group, sys_flag=0x4, suspend_ms=0)
                    if r.code != ResponseCode.SUCCESS:
                        assert r.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED), (
                            r.remark
                        )
                        break
                    msgs = decode_messages(r.body or b"")
                    bodies += [m.body for m in msgs]
                    offset = int(r.ext_fields["nextBeginOffset"])
        finally:
            await w.close()
        return bodies

    return asyncio.run(run())


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_topic_auto_created_by_sends_survives_kill9_right_after_send_ok(tmp_path: Path, flush: str) -> None:
    # (syncFlushTimeout: the point here is the topic's config, not the fsync's latency, which a
    # loaded CI machine once took past the default 5 s: FLUSH_DISK_TIMEOUT replies. A round left
    # unflushed would still fail, only later)
    keys = {"flushDiskType": flush, "syncFlushTimeout": "30000"}
    with servers(tmp_path, broker_keys=keys) as s:
        asyncio.run(send_all(s.broker.addr, "AutoTopic"))
        s.broker.kill9()  # within milliseconds of the last SEND_OK: before any periodic persist
        saved = table(s, "topics.json", "topicConfigTable")
        assert "AutoTopic" in saved, s.diagnostics()
        s.restart_broker()
        s.wait_route("AutoTopic")
        bodies = pull_all(s, "AutoTopic", "BrandNewGroup")
    assert sorted(bodies) == sorted(f"m{i}".encode() for i in range(N))


def test_group_and_retry_topic_auto_created_survive_kill9(tmp_path: Path) -> None:
    with servers(tmp_path, topics={"Known": 1}) as s:

        async def run() -> None:
            w = Wire(s.broker.addr)
            try:
                r = await w.heartbeat("c1", consumer_group="HeartbeatGroup", topics={"Known": "*"})
                assert r.code == ResponseCode.SUCCESS, r.remark
                r = await w.send("Known", b"to-retry")
                assert r.code == ResponseCode.SUCCESS, r.remark
                r = await w.pull("Known", 0, 0, group="PullGroup", sys_flag=0x4, suspend_ms=0)
                assert r.code == ResponseCode.SUCCESS, r.remark
                (msg,) = decode_messages(r.body or b"")
                back = {"offset": str(msg.commit_log_offset), "group": "BackGroup", "delayLevel": "0"}
                r = await w.call(RequestCode.CONSUMER_SEND_MSG_BACK, back)
                assert r.code == ResponseCode.SUCCESS, r.remark
            finally:
                await w.close()

        asyncio.run(run())
        s.broker.kill9()
        groups = table(s, "subscriptionGroup.json", "subscriptionGroupTable")
        topics = table(s, "topics.json", "topicConfigTable")
        assert {"HeartbeatGroup", "PullGroup", "BackGroup"} <= set(groups), s.diagnostics()
        assert {"%RETRY%HeartbeatGroup", "%RETRY%BackGroup"} <= set(topics), s.diagnostics()
        s.restart_broker()
        s.wait_route("%RETRY%HeartbeatGroup")


def test_topic_missing_from_topics_json_is_restored_from_its_consume_queues(tmp_path: Path) -> None:
    with servers(tmp_path) as s:
        asyncio.run(send_all(s.broker.addr, "Orphan"))
        s.broker.stop()
        for name in ("topics.json", "topics.json.bak"):
            path = s.store_dir / "config" / name
            if path.exists():
                data = json.loads(path.read_text())
                data["topicConfigTable"].pop("Orphan", None)
                path.write_text(json.dumps(data))
        s.restart_broker()
        s.wait_route("Orphan")
        restored = table(s, "topics.json", "topicConfigTable")["Orphan"]
        assert isinstance(restored, dict)
        assert (restored["readQueueNums"], restored["writeQueueNums"], restored["perm"]) == (
            QUEUES,
            QUEUES,
            6,
        )
        warnings = [
            line for line in s.broker.log_tail(400).splitlines() if "Orphan" in line and "restored" in line
        ]
        assert len(warnings) == 1, s.diagnostics()
        bodies = pull_all(s, "Orphan", "AfterRestore")
    assert sorted(bodies) == sorted(f"m{i}".encode() for i in range(N))
