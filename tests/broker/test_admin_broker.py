"""GET_BROKER_RUNTIME_INFO, GET/UPDATE_BROKER_CONFIG and VIEW_BROKER_STATS_DATA on a real broker."""

from __future__ import annotations

import json

import pytest

from pocketmq.broker.processor.admin_broker import PutLatencyWindow
from pocketmq.broker.stats import BrokerStatsManager
from pocketmq.remoting.common import properties
from pocketmq.remoting.common.clock import FakeClock
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.route import DataVersion, KVTable, TopicRouteData
from pocketmq.testing import cluster
from tests.broker.helpers import Wire

#: Keys rocketmq-exporter's BrokerRuntimeStats parses with Long.parseLong / Double.parseDouble
#: (a missing one is a NullPointerException there).
NUMERIC_KEYS = [
    "msgPutTotalTodayNow", "msgGetTotalTodayNow", "msgPutTotalTodayMorning", "msgGetTotalTodayMorning",
    "msgPutTotalYesterdayMorning", "msgGetTotalYesterdayMorning", "sendThreadPoolQueueHeadWaitTimeMills",
    "queryThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueSize",
    "pullThreadPoolQueueSize", "sendThreadPoolQueueSize", "sendThreadPoolQueueCapacity",
    "pullThreadPoolQueueCapacity", "queryThreadPoolQueueCapacity", "bootTimestamp", "commitLogMinOffset",
    "commitLogMaxOffset", "dispatchMaxBuffer", "brokerVersion", "consumeQueueDiskRatio", "commitLogDiskRatio",
    "pageCacheLockTimeMills", "getMessageEntireTimeMax", "putMessageTimesTotal", "startAcceptSendRequestTimeStamp",
    "putMessageEntireTimeMax", "earliestMessageTimeStamp", "remainTransientStoreBufferNumbs",
    "putMessageAverageSize", "dispatchBehindBytes", "putMessageSizeTotal", "EndTransactionQueueSize",
    "EndTransactionThreadPoolQueueCapacity", "putLatency99", "putLatency999",
]  # fmt: skip


def parse_like_the_exporter(table: dict[str, str]) -> dict[str, float]:
    out = {k: float(table[k]) for k in NUMERIC_KEYS}
    for key in ("putTps", "getMissTps", "getTransferedTps", "getTotalTps", "getFoundTps"):
        parts = table[key].split(" ")
        assert len(parts) == 3 and all(len(p.split(".")[1]) == 2 for p in parts), table[key]
        out[key] = float(parts[0])
    amount, unit = table["remainHowManyDataToFlush"].split(" ")
    out["remainHowManyDataToFlush"] = float(amount) * 1024 ** ("BKMGTPE".index(unit[0]))
    arr = table["commitLogDirCapacity"].split(" ")
    assert arr[0] == "Total" and arr[4] == "Free" and arr[3].endswith(",") and arr[7].endswith(".")
    for part in table["putMessageDistributeTime"].split():
        label, count = part.split(":")
        assert label.startswith("[") and int(count) >= 0
    return out


async def runtime(wire: Wire) -> dict[str, str]:
    r = await wire.call(RequestCode.GET_BROKER_RUNTIME_INFO)
    assert r.code == ResponseCode.SUCCESS
    return KVTable.decode(r.body).table


async def test_runtime_info_has_rocketmq_keys_and_formats(broker, wire):
    table = await runtime(wire)
    parsed = parse_like_the_exporter(table)
    assert table["brokerVersionDesc"] == "V4_9_8" and table["brokerVersion"] == "409"
    assert parsed["msgPutTotalTodayNow"] == 0
    assert table["remainHowManyDataToFlush"] == "0 B"
    assert table["runtime"].startswith("[ 0 days, 0 hours")

    for i in range(3):
        assert (await wire.send("Rt", f"m{i}".encode())).code == ResponseCode.SUCCESS
    broker.store.do_reput()
    r = await wire.pull("Rt", 0, 0, suspend_ms=0)
    assert r.code == ResponseCode.SUCCESS
    table = await runtime(wire)
    parsed = parse_like_the_exporter(table)
    assert parsed["msgPutTotalTodayNow"] == 3 == parsed["putMessageTimesTotal"]
    assert parsed["msgGetTotalTodayNow"] == 3
    assert parsed["commitLogMaxOffset"] > 0
    assert parsed["earliestMessageTimeStamp"] == broker.store.get_message_store_timestamp("Rt", 0, 0)


async def test_runtime_info_put_latency_over_the_last_minute(broker, wire):
    """putLatency99 / putLatency999 (ms, two decimals: rocketmq-exporter's Double.parseDouble) cover
    the previous minute of puts, as RocketMQ's StoreStatsService: 0.00 until one has passed."""
    clock = FakeClock()
    admin = broker.admin_processors["BrokerAdmin"]
    admin.put_latency = PutLatencyWindow(broker.put_latency, clock.monotonic)
    for i in range(5):
        assert (await wire.send("Lat", f"m{i}".encode())).code == ResponseCode.SUCCESS
    assert broker.put_latency.count == 5  # every put is timed, metrics exporter off
    table = await runtime(wire)
    assert table["putLatency99"] == "0.00" == table["putLatency999"]
    assert int(table["putMessageEntireTimeMax"]) == broker.put_latency.max_ns // 1_000_000
    clock.advance(60)
    table = await runtime(wire)
    p99, p999 = float(table["putLatency99"]), float(table["putLatency999"])
    assert 0 < p99 <= p999 and len(table["putLatency99"].split(".")[1]) == 2
    assert p999 <= broker.put_latency.max_ns * 2 / 1e6  # inside the slowest put's power-of-two bucket
    clock.advance(60)  # a minute without puts
    table = await runtime(wire)
    assert table["putLatency99"] == "0.00" == table["putLatency999"]


async def test_get_and_update_broker_config(broker, wire):
    r = await wire.call(RequestCode.GET_BROKER_CONFIG)
    assert r.code == ResponseCode.SUCCESS
    conf = properties.loads(r.body)
    assert conf["brokerName"] == "broker-a" and conf["flushConsumerOffsetInterval"] == "5000"
    assert conf["brokerRole"] == "ASYNC_MASTER" and "storePathRootDir" in conf
    v0 = DataVersion.decode(r.ext_fields["version"])

    body = b"flushConsumerOffsetInterval=1234\nfileReservedTime=5\n"
    r = await wire.call(RequestCode.UPDATE_BROKER_CONFIG, None, body)
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
    assert broker.config.flush_consumer_offset_interval == 1234
    assert broker.config.store.file_reserved_time == 5
    r = await wire.call(RequestCode.GET_BROKER_CONFIG)
    assert properties.loads(r.body)["flushConsumerOffsetInterval"] == "1234"
    assert DataVersion.decode(r.ext_fields["version"]).counter == v0.counter + 1


@pytest.mark.parametrize(
    ("body", "code", "remark_part"),
    [
        (b"brokerName=x\\uZZZZ\n", ResponseCode.SYSTEM_ERROR, "string2Properties error"),
        (b"\xff\xfe=1", ResponseCode.SYSTEM_ERROR, "string2Properties error"),
        (
            b"brokerConfigPath=/tmp/evil.conf\n",
            ResponseCode.NO_PERMISSION,
            "Can not update config in black list.",
        ),
        (b"configBlackList=\n", ResponseCode.NO_PERMISSION, "Can not update config in black list."),
        (b"noSuchKey=1\n", ResponseCode.SYSTEM_ERROR, "noSuchKey"),
        (b"listenPort=many\n", ResponseCode.SYSTEM_ERROR, "listenPort"),
    ],
)
async def test_update_broker_config_refusals(broker, wire, body, code, remark_part):
    before = broker.config
    r = await wire.call(RequestCode.UPDATE_BROKER_CONFIG, None, body)
    assert r.code == code and remark_part in r.remark
    assert broker.config is before
    assert (await wire.call(RequestCode.UPDATE_BROKER_CONFIG)).code == ResponseCode.SUCCESS  # empty: no-op


async def test_broker_permission_change_reaches_the_name_server_before_the_reply(tmp_path):
    async with cluster(tmp_path / "c") as c:
        await c.create_topic("Perm", queues=2)
        broker = Wire(c.brokers[0].broker_addr)
        ns = Wire(c.namesrv_addr)
        try:
            r = await broker.call(RequestCode.UPDATE_BROKER_CONFIG, None, b"brokerPermission=4\n")
            assert r.code == ResponseCode.SUCCESS
            r = await ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Perm"})
            (qd,) = TopicRouteData.decode(r.body).queue_datas
            assert qd.perm == 4  # read-only: producers stop routing here
        finally:
            await broker.close()
            await ns.close()


async def test_view_broker_stats_data(broker, wire):
    ext = {"statsName": "TOPIC_PUT_NUMS", "statsKey": "T"}
    r = await wire.call(RequestCode.VIEW_BROKER_STATS_DATA, ext)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The stats <TOPIC_PUT_NUMS> <T> not exist")
    clock = FakeClock(wall_ms=1_700_000_000_000)
    # the send/pull paths feed the controller's stats manager; this one runs on a fake clock
    stats = BrokerStatsManager("DefaultCluster", clock.now_ms)
    broker.use_stats(stats)
    for _ in range(60):  # 4 messages a second for a minute, as the send path reports them
        stats.on_put("T", 4, 400)
        clock.advance(1)
    r = await wire.call(RequestCode.VIEW_BROKER_STATS_DATA, ext)
    assert r.code == ResponseCode.SUCCESS
    data = json.loads(r.body)
    assert set(data) == {"statsDay", "statsHour", "statsMinute"}
    # samples every 10 s from the item's first boundary: T0+10 s .. T0+60 s, 200 messages in 50 s
    assert data["statsMinute"]["sum"] == 200 and data["statsMinute"]["tps"] == pytest.approx(4.0)
    assert data["statsMinute"]["avgpt"] == pytest.approx(4.0)
    assert data["statsDay"] == {"avgpt": 0.0, "sum": 0, "tps": 0.0}  # not an hour of samples yet
    r = await wire.call(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "GROUP_GET_NUMS"})
    assert r.code == ResponseCode.SYSTEM_ERROR and "statsKey" in r.remark
