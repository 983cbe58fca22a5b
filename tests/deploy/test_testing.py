"""pocketmq.testing helpers: requests recorded at the broker, a cluster served from a thread."""

from __future__ import annotations

from pathlib import Path

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.testing import cluster, cluster_in_thread
from pocketmq.testing.wire import Wire
from tests.wire_calls import route_code


async def test_record_requests_sees_what_the_brokers_receive(tmp_path: Path) -> None:
    async with cluster(tmp_path / "c") as c:
        await c.create_topic("Rec", queues=2)
        requests = c.record_requests()
        wire = Wire(c.broker_addrs[0])
        try:
            reply = await wire.send("Rec", b"hello", queue_id=1)
            assert reply.code == ResponseCode.SUCCESS
            await wire.call(RequestCode.GET_BROKER_RUNTIME_INFO)
        finally:
            await wire.close()
    assert [r.code for r in requests] == [RequestCode.SEND_MESSAGE_V2, RequestCode.GET_BROKER_RUNTIME_INFO]
    assert requests[0].body == b"hello"


def test_cluster_in_thread_serves_blocking_callers(tmp_path: Path) -> None:
    with cluster_in_thread(tmp_path / "c") as t:
        t.run(t.cluster.create_topic("Th", queues=3))
        assert t.run(route_code(t.namesrv_addr, "Th")) == ResponseCode.SUCCESS
        assert t.run(route_code(t.namesrv_addr, "Nope")) == ResponseCode.TOPIC_NOT_EXIST
        loop = t.loop
    assert loop.is_closed()
