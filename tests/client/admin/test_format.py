"""mqadmin output formatting and result JSON: pure functions, no network, no clock."""

from __future__ import annotations

import datetime as dt

import orjson
import pytest

from pocketmq.client.admin import format as fmt
from pocketmq.client.admin import format_msg
from pocketmq.client.admin.model import (
    BrokerConsumeRow,
    BrokerRuntime,
    ConnectionRow,
    ConsumerConnectionInfo,
    GroupProgress,
    GroupSummary,
    MessageTrack,
    ProgressRow,
    QueueRange,
    QueueStatus,
    ResetResult,
    ResetRow,
    StatsRow,
    TopicStatus,
    message_json,
    version_desc,
)
from pocketmq.remoting.protocol.message import decode_message, encode_message
from pocketmq.remoting.protocol.route import BrokerData, QueueData, TopicConfig, TopicRouteData

UTC = dt.UTC
T0 = 1_700_000_000_123  # 2023-11-14 22:13:20.123 UTC


def make_msg(body: bytes = b"hello", **props: str) -> object:
    raw = encode_message(
        topic="Orders",
        body=body,
        properties={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "AC11000100002A9F0000000000000001", **props},
        queue_id=3,
        queue_offset=17,
        commit_log_offset=4096,
        born_timestamp=T0,
        born_host=(bytes([10, 0, 0, 5]), 40001),
        store_timestamp=T0 + 1,
        store_host=(bytes([127, 0, 0, 1]), 10911),
        reconsume_times=2,
    )
    return decode_message(raw)


def lines(text: str) -> list[str]:
    return text.rstrip("\n").split("\n")


# ----------------------------------------------------------------------------------- basics
def test_table_aligns_columns_and_keeps_hash_headers() -> None:
    out = fmt.table(["#Topic", "#QID", "#Diff"], [["Orders", 0, 12], ["A-much-longer-topic", 10, 3]])
    head, first, second = lines(out)
    assert head.split() == ["#Topic", "#QID", "#Diff"]
    # every column starts at the same character position on every line
    for word in ("#QID", "#Diff"):
        col = head.index(word)
        assert first[col - 2 : col] == "  " and second[col - 2 : col] == "  "
    assert first.split() == ["Orders", "0", "12"]
    assert not any(line.endswith(" ") for line in lines(out))


def test_table_with_no_rows_is_just_the_header() -> None:
    assert fmt.table(["#A", "#B"], []) == "#A  #B\n"


def test_human_time_is_javas_format_and_zero_is_na() -> None:
    assert fmt.human_time(T0, UTC) == "2023-11-14 22:13:20,123"
    assert fmt.human_time(0) == "N/A"
    assert fmt.human_time(-5) == "N/A"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("now", 42),
        ("NOW", 42),
        ("1700000000123", T0),
        ("2023-11-14#22:13:20:123", T0),
        ("2023-11-14#22:13:20", T0 - 123),
        ("2023-11-14 22:13:20,123", T0),
    ],
)
def test_parse_time_forms(text: str, expected: int) -> None:
    assert fmt.parse_time(text, now_ms=42, tz=UTC) == expected


def test_parse_time_rejects_garbage_naming_the_forms() -> None:
    with pytest.raises(ValueError, match="yyyy-MM-dd#HH:mm:ss:SSS"):
        fmt.parse_time("yesterday", now_ms=0)


def test_dumps_json_quotes_integer_keys() -> None:
    doc = orjson.loads(fmt.dumps_json({"brokerAddrs": {0: "a:1", 1: "b:2"}}))
    assert doc == {"brokerAddrs": {"0": "a:1", "1": "b:2"}}


@pytest.mark.parametrize(
    ("ordinal", "desc"),
    [
        (409, "V4_9_8"),
        (401, "V4_9_4"),
        (333, "V4_6_0"),
        (232, "V4_1_0_SNAPSHOT"),
        (233, "V4_1_0"),
        (-1, "UNKNOWN"),
    ],
)
def test_version_desc(ordinal: int, desc: str) -> None:
    assert version_desc(ordinal) == desc


# ----------------------------------------------------------------------------------- topics
def test_topic_config_text_is_javas_to_string() -> None:
    cfg = TopicConfig("Orders", 8, 4, 6, order=True)
    assert fmt.topic_config_text(cfg) == (
        "TopicConfig [topicName=Orders, readQueueNums=8, writeQueueNums=4, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=true]"
    )


def test_topic_route_table_has_totals() -> None:
    route = TopicRouteData(
        [QueueData("broker-b", 4, 4, 6), QueueData("broker-a", 8, 8, 4)],
        [
            BrokerData("C1", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}),
            BrokerData("C1", "broker-b", {0: "x:1"}),
        ],
    )
    out = lines(fmt.topic_route_table(route))
    assert out[0].split() == [
        "#ClusterName",
        "#BrokerName",
        "#BrokerAddrs",
        "#ReadQueue",
        "#WriteQueue",
        "#Perm",
    ]
    assert out[1].split()[:2] == ["C1", "broker-a"]  # sorted by broker name
    assert "{0=10.0.0.1:10911, 1=10.0.0.2:10911}" in out[1]
    assert out[1].split()[-1] == "R--"
    assert out[3].split() == ["Total:", "2", "12", "12"]


def test_topic_status_table_and_json() -> None:
    status = TopicStatus(
        "Orders", [QueueStatus("broker-a", 0, 0, 10, T0), QueueStatus("broker-a", 1, 5, 5, 0)]
    )
    out = lines(fmt.topic_status_table(status))
    assert out[0] == "#Broker Name  #QID  #Min Offset  #Max Offset  #Last Updated"
    assert out[1].split()[:4] == ["broker-a", "0", "0", "10"]
    assert out[2].split()[-1] == "N/A"
    doc = status.to_json()
    assert doc["totalMessages"] == 10
    assert set(doc) == {"topic", "queues", "totalMessages"}
    assert set(doc["queues"][0]) == {"brokerName", "queueId", "minOffset", "maxOffset", "lastUpdateTimestamp"}


# ----------------------------------------------------------------------------------- brokers
RUNTIME = {
    "brokerVersionDesc": "V4_9_8",
    "putTps": "12.50 10.00 9.00",
    "getTransferedTps": "3.25 1.00 1.00",
    "sendThreadPoolQueueSize": "2",
    "sendThreadPoolQueueHeadWaitTimeMills": "7",
    "pullThreadPoolQueueSize": "0",
    "pullThreadPoolQueueHeadWaitTimeMills": "0",
    "pageCacheLockTimeMills": "1",
    "earliestMessageTimeStamp": str(T0 - 7_200_000),
    "commitLogDiskRatio": "0.25",
    "msgPutTotalYesterdayMorning": "100",
    "msgPutTotalTodayMorning": "150",
    "msgPutTotalTodayNow": "175",
    "msgGetTotalYesterdayMorning": "10",
    "msgGetTotalTodayMorning": "40",
    "msgGetTotalTodayNow": "41",
}


def test_broker_runtime_derived_values() -> None:
    b = BrokerRuntime("C1", "broker-a", 0, "127.0.0.1:10911", dict(RUNTIME))
    assert b.in_tps == 12.5 and b.out_tps == 3.25
    assert b.hours(T0) == pytest.approx(2.0)
    assert (b.in_total_yest, b.out_total_yest, b.in_total_today, b.out_total_today) == (50, 30, 25, 1)
    doc = b.to_json()
    assert set(doc) == {
        "cluster", "brokerName", "brokerId", "addr", "version", "inTps", "outTps", "sendQueueSize",
        "sendQueueHeadWaitMs", "pullQueueSize", "pullQueueHeadWaitMs", "pageCacheLockTimeMills",
        "earliestMessageTimeStamp", "commitLogDiskRatio", "inTotalYest", "outTotalYest", "inTotalToday",
        "outTotalToday", "stats", "error",
    }  # fmt: skip
    assert doc["stats"]["putTps"] == "12.50 10.00 9.00"
    # the corrected spelling of the out-TPS key is understood too; garbage reads as 0
    assert BrokerRuntime("C", "b", 0, "a", {"getTransferredTps": "2 1 1"}).out_tps == 2.0
    assert BrokerRuntime("C", "b", 0, "a", {"putTps": "x"}).in_tps == 0.0


def test_cluster_list_table_default_and_more() -> None:
    ok = BrokerRuntime("C1", "broker-a", 0, "127.0.0.1:10911", dict(RUNTIME))
    dead = BrokerRuntime("C1", "broker-b", 0, "127.0.0.1:20911", error="connect refused")
    out = lines(fmt.cluster_list_table([ok, dead], now_ms=T0))
    assert out[0].split("  ")[0] == "#Cluster Name"
    for col in (
        "#BID",
        "#Addr",
        "#Version",
        "#InTPS(LOAD)",
        "#OutTPS(LOAD)",
        "#PCWait(ms)",
        "#Hour",
        "#SPACE",
    ):
        assert col in out[0]
    assert out[1].split() == ["C1", "broker-a", "0", "127.0.0.1:10911", "V4_9_8", "12.50(2,7ms)", "3.25(0,0ms)",
                              "1", "2.00", "0.2500"]  # fmt: skip
    assert "ERROR" in out[2] and "connect refused" in out[2]
    more = lines(fmt.cluster_list_table([ok], now_ms=T0, more=True))
    assert more[0].split()[-4:] == ["#InTotalYest", "#OutTotalYest", "#InTotalToday", "#OutTotalToday"]
    assert more[1].split()[-4:] == ["50", "30", "25", "1"]


def test_broker_status_dump_sorted_key_value_lines() -> None:
    one = fmt.broker_status_dump(
        [BrokerRuntime("C", "b", 0, "a:1", {"putTps": "1 1 1", "bootTimestamp": "5"})]
    )
    assert lines(one) == ["bootTimestamp: 5", "putTps       : 1 1 1"]
    two = fmt.broker_status_dump(
        [BrokerRuntime("C", "b", 0, "a:1", {"k": "1"}), BrokerRuntime("C", "c", 0, "b:2", error="down")]
    )
    assert lines(two) == ["a:1  k: 1", "b:2  ERROR: down"]


def test_broker_config_dump() -> None:
    out = fmt.broker_config_dump("a:1", {"brokerName": "broker-a", "listenPort": "10911"})
    assert lines(out) == ["============a:1============", "brokerName  =  broker-a", "listenPort  =  10911"]


# ----------------------------------------------------------------------------------- groups
def test_group_progress_text_lag_and_totals() -> None:
    progress = GroupProgress(
        "CG",
        [
            ProgressRow("Orders", "broker-a", 0, 10, 4, T0, "10.0.0.5"),
            ProgressRow("Orders", "broker-b", 1, 3, 3),
        ],
        consume_tps=1.5,
    )
    out = lines(fmt.group_progress_text(progress))
    assert out[0].split("  ")[:2] == ["#Topic", "#Broker Name"]
    assert "#Client IP" not in out[0]
    assert out[1].split()[:6] == ["Orders", "broker-a", "0", "10", "4", "6"]
    assert out[2].split()[-1] == "N/A"
    assert out[-2:] == ["Consume TPS: 1.50", "Consume Diff Total: 6"]
    with_ip = lines(fmt.group_progress_text(progress, show_client_ip=True))
    assert "#Client IP" in with_ip[0] and "10.0.0.5" in with_ip[1] and "N/A" in with_ip[2]
    doc = progress.to_json()
    assert doc["diffTotal"] == 6 and doc["queues"][0]["diff"] == 6
    assert set(doc["queues"][0]) == {"topic", "brokerName", "queueId", "brokerOffset", "consumerOffset", "diff",
                                     "lastTimestamp", "clientIp"}  # fmt: skip


def test_group_summary_table_marks_offline_groups() -> None:
    out = lines(
        fmt.group_summary_table(
            [GroupSummary("CG", 2, "V4_9_8", "PUSH", "CLUSTERING", 3.0, 7), GroupSummary("Old")]
        )
    )
    assert out[0].split() == ["#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff", "Total"]
    assert out[1].split() == ["CG", "2", "V4_9_8", "PUSH", "CLUSTERING", "3.00", "7"]
    assert out[2].split() == ["Old", "0", "OFFLINE", "0.00", "0"]


def test_consumer_connection_text() -> None:
    info = ConsumerConnectionInfo(
        "CG", [ConnectionRow("10.0.0.5@1", "10.0.0.5:5000", "PYTHON", 409)], [("Orders", "TagA || TagB")],
        "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
    )  # fmt: skip
    out = fmt.consumer_connection_text(info)
    assert "#ClientId" in out and "10.0.0.5@1" in out and "V4_9_8" in out
    assert "Orders" in out and "TagA || TagB" in out
    assert "ConsumeType: CONSUME_PASSIVELY" in out and "MessageModel: CLUSTERING" in out
    assert info.to_json()["connections"][0]["versionDesc"] == "V4_9_8"
    assert info.to_json()["subscriptions"] == [
        {"topic": "Orders", "subExpression": "TagA || TagB", "expressionType": "TAG"}
    ]
    info.subscriptions.append(("Pay", "amount > 100"))
    info.expression_types["Pay"] = "SQL92"
    out = fmt.consumer_connection_text(info)
    assert "#ExpressionType" in out and "amount > 100" in out and "SQL92" in out
    assert info.to_json()["subscriptions"][1]["expressionType"] == "SQL92"


def test_reset_table_real_and_dry_run() -> None:
    rows = [ResetRow("broker-a", 0, 9, 2), ResetRow("broker-a", 1, -1, 0)]
    real = lines(fmt.reset_table(ResetResult("CG", "T", T0, True, False, rows)))
    assert real[0].split() == ["#brokerName", "#queueId", "#offset"]
    assert real[1].split() == ["broker-a", "0", "2"]
    dry = lines(fmt.reset_table(ResetResult("CG", "T", T0, True, True, rows)))
    assert dry[0].split() == ["#brokerName", "#queueId", "#consumerOffset", "#newOffset"]
    assert dry[1].split() == ["broker-a", "0", "9", "2"]
    assert dry[-1] == "dry run: no offset was changed"
    doc = ResetResult("CG", "T", T0, True, True, rows).to_json()
    assert doc["dryRun"] is True and doc["queues"][0] == {"brokerName": "broker-a", "queueId": 0,
                                                          "consumerOffset": 9, "offset": 2}  # fmt: skip


def test_broker_consume_stats_and_stats_all_tables() -> None:
    rows = [
        BrokerConsumeRow("T", "CG", "broker-a", 0, 10, 7, T0),
        BrokerConsumeRow("T", "CG", "broker-a", 1, 5, 5),
    ]
    out = lines(fmt.broker_consume_stats_table(rows))
    assert out[0].split()[:3] == ["#Topic", "#Group", "#Broker"]
    assert out[-1] == "Diff Total: 3"
    stats = lines(
        fmt.stats_all_table(
            [StatsRow("T", "CG", 3, 1.0, 0.5, 100, 90), StatsRow("U", None, 0, 0.0, 0.0, 5, 0)]
        )
    )
    assert stats[1].split() == ["T", "CG", "3", "1.00", "0.50", "100", "90"]
    assert stats[2].split() == ["U", "0", "0.00", "5", "NO_CONSUMER"]
    assert set(StatsRow("T", None).to_json()) == {"topic", "consumerGroup", "accumulation", "inTps", "outTps",
                                                  "inMsg24Hour", "outMsg24Hour"}  # fmt: skip


# ---------------------------------------------------------------------------------- messages
def test_message_json_keys_and_body_encodings() -> None:
    msg = make_msg()
    doc = message_json(msg)  # type: ignore[arg-type]
    assert doc["msgId"] == "AC11000100002A9F0000000000000001"
    assert doc["offsetMsgId"] == msg.msg_id  # type: ignore[attr-defined]
    assert (doc["topic"], doc["tags"], doc["keys"], doc["queueId"], doc["queueOffset"]) == (
        "Orders",
        "TagA",
        "k1 k2",
        3,
        17,
    )
    assert (doc["storeHost"], doc["bornHost"]) == ("127.0.0.1:10911", "10.0.0.5:40001")
    assert (doc["body"], doc["bodyEncoding"], doc["bodySize"]) == ("hello", "utf-8", 5)
    binary = message_json(make_msg(b"\xff\xfe\x00"))  # type: ignore[arg-type]
    assert (binary["body"], binary["bodyEncoding"]) == ("//4A", "base64")
    hidden = message_json(make_msg(), with_body=False)  # type: ignore[arg-type]
    assert hidden["body"] is None and hidden["bodyEncoding"] is None
    assert orjson.loads(fmt.dumps_json(doc)) == doc


def test_message_detail_text_labels_and_tracks() -> None:
    msg = make_msg()
    out = format_msg.message_detail_text(
        msg, [MessageTrack("CG", "CONSUMED"), MessageTrack("CG2", "NOT_ONLINE")]
    )  # type: ignore[arg-type]
    labels = [line.split(":")[0] for line in lines(out)[:16]]
    assert labels == ["Msg ID", "OffsetID", "Topic", "Tags", "Keys", "Queue ID", "Queue Offset", "CommitLog Offset",
                      "Reconsume Times", "Born Timestamp", "Store Timestamp", "Born Host", "Store Host",
                      "System Flag", "Properties", "Message Body"]  # fmt: skip
    assert "Tags:                [TagA]" in out
    assert "Reconsume Times:     2" in out
    assert "#ConsumerGroup" in out and "CONSUMED" in out and "NOT_ONLINE" in out
    assert "WARN: No Consumer" in format_msg.message_detail_text(msg, [])  # type: ignore[arg-type]
    assert "WARN" not in format_msg.message_detail_text(msg, None)  # type: ignore[arg-type]


def test_query_by_key_and_print_msg_text() -> None:
    msg = make_msg()
    assert lines(format_msg.query_by_key_table([msg]))[1].split() == [
        "AC11000100002A9F0000000000000001",
        "3",
        "17",
    ]  # type: ignore[list-item]
    out = lines(
        format_msg.print_msg_text(
            "Orders", [QueueRange("broker-a", 3, 17, 18, [msg]), QueueRange("broker-a", 4, 0, 0)], True
        )
    )  # type: ignore[list-item]
    assert out[0] == "minOffset=17, maxOffset=18, MessageQueue [topic=Orders, brokerName=broker-a, queueId=3]"
    assert out[1].startswith("MSGID: AC11000100002A9F0000000000000001 MessageExt [topic=Orders")
    assert out[1].endswith("BODY: hello")
    assert out[2].startswith("minOffset=0, maxOffset=0")
    no_body = format_msg.print_msg_text("Orders", [QueueRange("broker-a", 3, 17, 18, [msg])], False)  # type: ignore[list-item]
    assert "BODY: NOT PRINT BODY" in no_body


def test_send_result_table() -> None:
    out = lines(format_msg.send_result_table("broker-a", 2, "SEND_OK", "ID1"))
    assert out == ["#Broker Name  #QID  #Send Result  #MsgId", "broker-a      2     SEND_OK       ID1"]


def test_consumer_status_text_consistency_and_detail() -> None:
    def info(expr: str) -> dict[str, object]:
        return {
            "properties": {"PROP_CLIENT_VERSION": "V4_9_8"},
            "subscriptionSet": [{"topic": "T", "subString": expr}],
            "mqTable": [{"topic": "T", "brokerName": "b", "queueId": 0, "cachedMsgCount": 3, "locked": True}],
        }

    same = format_msg.consumer_status_text("CG", {"c1": info("*"), "c2": info("*")}, {}, None)
    assert "Same subscription in the same group of consumer" in same
    differ = format_msg.consumer_status_text(
        "CG", {"c1": info("*"), "c2": info("TagA")}, {"c3": "timeout"}, "c1"
    )
    assert "WARN: Different subscription" in differ
    assert "ERR" in differ and "timeout" in differ
    assert "#Consumer MQ Detail#" in differ and "true" in differ


def test_consumer_status_text_shows_sql92_subscriptions() -> None:
    def info(expr: str, kind: str) -> dict[str, object]:
        sub = {"topic": "T", "subString": expr, "expressionType": kind}
        return {"properties": {}, "subscriptionSet": [sub], "mqTable": []}

    out = format_msg.consumer_status_text("CG", {"c1": info("a > 5", "SQL92")}, {}, "c1")
    assert "T:SQL92(a > 5)" in out and "#ExpressionType" in out
    # same text, another type: not the same subscription
    differ = format_msg.consumer_status_text(
        "CG", {"c1": info("a", "SQL92"), "c2": info("a", "TAG")}, {}, None
    )
    assert "WARN: Different subscription" in differ
