"""A pull read before its connection closed is served without reading the store (issue 23, T16:
100 clients closing with ~1,000 pulls of 512 KiB each read ~50 GB that nobody could receive)."""

from __future__ import annotations

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.transport.connection import RemotingConnection
from tests.broker.test_pull import NO_SUSPEND, fill

COMMIT = 0x1


def _pull(group: str, topic: str, offset: int, commit: int) -> RemotingCommand:
    ext = {
        "consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": str(NO_SUSPEND | COMMIT), "commitOffset": str(commit),
        "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
    }  # fmt: skip
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)


async def test_a_closed_connections_pull_commits_its_offset_and_reads_nothing(broker, wire):
    await fill(broker, wire, "LP", 4)
    stats = broker.broker_stats_manager
    gone = RemotingConnection(broker.remoting_server.dispatcher)  # never connected: no transport
    assert not gone.is_active
    assert broker.pull_processor.process_request(gone, _pull("LG", "LP", 0, 3), allow_suspend=True) is None
    assert broker.consumer_offset_manager.query_offset("LG", "LP", 0) == 3  # its side effect stays
    assert stats.get_stats_item("GROUP_GET_NUMS", "LP@LG") is None  # the store was not read
    r = await wire.pull("LP", 0, 0, group="LG", sys_flag=NO_SUSPEND | COMMIT, commit_offset=3)
    assert r.code == ResponseCode.SUCCESS  # a live connection's pull reads as before
    assert stats.get_stats_item("GROUP_GET_NUMS", "LP@LG") is not None


async def test_a_closed_connections_pull_without_commit_only_creates_its_group(broker, wire):
    await fill(broker, wire, "LQ", 4)
    gone = RemotingConnection(broker.remoting_server.dispatcher)
    request = _pull("LQG", "LQ", 0, 0)
    request.ext_fields["sysFlag"] = str(NO_SUSPEND)  # type: ignore[index]
    groups = broker.subscription_group_manager.subscription_group_table
    assert "LQG" not in groups
    assert broker.pull_processor.process(gone, request) is None
    assert "LQG" in groups
    assert broker.broker_stats_manager.get_stats_item("GROUP_GET_NUMS", "LQ@LQG") is None
