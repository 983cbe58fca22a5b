"""The same request sequences sent to pocketmq and to Apache RocketMQ 4.9.7, observed alike.

Each :class:`Case` is one request (after the shared setup: topic ``DiffTopic`` with 4 queues,
three messages in queue 0, consumer group ``DiffGroup`` heartbeated). :func:`observe` runs every
case against one name server + broker and keeps what a client can depend on: the response code,
the header's field names, the remark where the case says it matters, and the body's shape (JSON
keys, a message count, or its presence). :func:`compare` lists the cases whose observations
differ; tests/interop/test_apache_differential.py checks that list against the table in
docs/differences-apache.md.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.message import decode_messages
from pocketmq.testing.wire import Wire

TOPIC = "DiffTopic"
GROUP = "DiffGroup"
CLIENT = "127.0.0.1@diff"
FAR_FUTURE = str(int(time.time() * 1000) + 86_400_000)


@dataclass(frozen=True)
class Case:
    name: str
    code: int
    ext: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    target: str = "broker"  # or "namesrv"
    remark: bool = False  # compare the remark too
    body_kind: str = "json"  # json | messages | any
    json_path: tuple[str, ...] = ()  # compare the keys of this nested object instead of the top


def _send_ext(topic: str, queue_id: int, props: str, **extra: str) -> dict[str, str]:
    ext = {
        "a": "DiffProducer", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
        "g": "1700000000000", "h": "0", "i": props, "j": "0", "k": "false",
    }  # fmt: skip
    ext.update(extra)
    return ext


PROPS = "KEYS\x01diff-key\x02TAGS\x01TagA\x02WAIT\x01true\x02UNIQ_KEY\x01DIFF00000000000000000000000001\x02"


def _pull(
    queue_id: int, offset: int, sys_flag: int = 4, group: str = GROUP, topic: str = TOPIC
) -> dict[str, str]:
    return {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": "32", "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": "0",
        "subscription": "*", "subVersion": "0",
    }  # fmt: skip


def _topic_ext(topic: str) -> dict[str, str]:
    return {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
    }  # fmt: skip


def _offsets(code: int, name: str, **extra: str) -> Case:
    return Case(name, code, {"topic": TOPIC, "queueId": "0", **extra})


CASES: list[Case] = [
    # send
    Case("send_v2", RequestCode.SEND_MESSAGE_V2, _send_ext(TOPIC, 1, PROPS), b"diff body"),
    Case(
        "send_v1",
        RequestCode.SEND_MESSAGE,
        {
            "producerGroup": "DiffProducer",
            "topic": TOPIC,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4",
            "queueId": "1",
            "sysFlag": "0",
            "bornTimestamp": "1700000000000",
            "flag": "0",
            "properties": PROPS,
            "reconsumeTimes": "0",
            "unitMode": "false",
        },
        b"diff body v1",
    ),  # fmt: skip
    Case("send_auto_create", RequestCode.SEND_MESSAGE_V2, _send_ext("DiffAutoTopic", 0, PROPS), b"x"),
    Case("send_bad_queue", RequestCode.SEND_MESSAGE_V2, _send_ext(TOPIC, 99, PROPS), b"x"),
    Case("send_bad_topic_name", RequestCode.SEND_MESSAGE_V2, _send_ext("bad topic!", 0, PROPS), b"x"),
    Case("send_system_topic", RequestCode.SEND_MESSAGE_V2, _send_ext("SCHEDULE_TOPIC_XXXX", 0, PROPS), b"x"),
    Case(
        "send_too_large",
        RequestCode.SEND_MESSAGE_V2,
        _send_ext(TOPIC, 0, PROPS),
        b"x" * (4 * 1024 * 1024 + 1),
    ),
    Case("send_missing_header", RequestCode.SEND_MESSAGE_V2, {"a": "DiffProducer"}, b"x"),
    # pull
    Case("pull_found", RequestCode.PULL_MESSAGE, _pull(0, 0), body_kind="messages"),
    Case("pull_at_end", RequestCode.PULL_MESSAGE, _pull(0, 3), body_kind="any"),
    Case("pull_overflow", RequestCode.PULL_MESSAGE, _pull(0, 1000), body_kind="any"),
    Case(
        "pull_unknown_topic", RequestCode.PULL_MESSAGE, _pull(0, 0, topic="DiffNoSuchTopic"), body_kind="any"
    ),
    Case("pull_bad_queue", RequestCode.PULL_MESSAGE, _pull(99, 0), body_kind="any"),
    Case(
        "pull_no_subscription_unknown_group",
        RequestCode.PULL_MESSAGE,
        _pull(0, 0, 0, "DiffNobody"),
        body_kind="any",
    ),
    # offsets and times
    _offsets(RequestCode.GET_MAX_OFFSET, "get_max_offset"),
    _offsets(RequestCode.GET_MIN_OFFSET, "get_min_offset"),
    _offsets(RequestCode.GET_EARLIEST_MSG_STORETIME, "get_earliest_storetime"),
    _offsets(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, "search_offset_by_timestamp", timestamp="0"),
    Case(
        "query_offset_unknown",
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": "DiffNobody", "topic": TOPIC, "queueId": "0"},
    ),
    Case(
        "update_offset",
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "2"},
    ),
    Case(
        "query_offset",
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0"},
    ),
    Case("get_all_consumer_offset", RequestCode.GET_ALL_CONSUMER_OFFSET),
    Case("get_all_delay_offset", RequestCode.GET_ALL_DELAY_OFFSET),
    # clients
    Case("consumer_list", RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP}),
    Case(
        "consumer_list_unknown",
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
        {"consumerGroup": "DiffNobody"},
        remark=True,
    ),
    Case("consumer_connections", RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP}),
    Case(
        "consumer_connections_unknown",
        RequestCode.GET_CONSUMER_CONNECTION_LIST,
        {"consumerGroup": "DiffNobody"},
    ),
    Case("producer_connections", RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "DiffNobody"}),
    Case(
        "lock_batch_mq",
        RequestCode.LOCK_BATCH_MQ,
        None,
        json.dumps(
            {
                "consumerGroup": GROUP,
                "clientId": CLIENT,
                "mqSet": [{"topic": TOPIC, "brokerName": "broker-a", "queueId": 0}],
            }
        ).encode(),
    ),  # fmt: skip
    Case(
        "check_client_config",
        RequestCode.CHECK_CLIENT_CONFIG,
        None,
        json.dumps(
            {"group": GROUP, "subscriptionData": {"topic": TOPIC, "subString": "*", "expressionType": "TAG"}}
        ).encode(),
    ),  # fmt: skip
    # query
    Case(
        "query_by_key",
        RequestCode.QUERY_MESSAGE,
        {
            "topic": TOPIC,
            "key": "diff-key",
            "maxNum": "32",
            "beginTimestamp": "0",
            "endTimestamp": FAR_FUTURE,
        },
        body_kind="messages",
    ),  # fmt: skip
    Case(
        "query_by_unknown_key",
        RequestCode.QUERY_MESSAGE,
        {"topic": TOPIC, "key": "nope", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": FAR_FUTURE},
        body_kind="any",
    ),  # fmt: skip
    Case("view_by_bad_offset", RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "999999999"}, body_kind="any"),
    # admin
    Case("update_topic", RequestCode.UPDATE_AND_CREATE_TOPIC, _topic_ext("DiffAdminTopic")),
    Case("update_topic_bad_name", RequestCode.UPDATE_AND_CREATE_TOPIC, _topic_ext("bad topic!")),
    Case("topic_stats", RequestCode.GET_TOPIC_STATS_INFO, {"topic": TOPIC}),
    Case("topic_stats_unknown", RequestCode.GET_TOPIC_STATS_INFO, {"topic": "DiffNoSuchTopic"}, remark=True),
    Case("consume_stats", RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP, "topic": TOPIC}),
    Case("all_topic_config", RequestCode.GET_ALL_TOPIC_CONFIG),
    Case("all_subscription_groups", RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
    Case(
        "update_subscription_group",
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        None,
        json.dumps(
            {
                "groupName": "DiffAdminGroup",
                "consumeEnable": True,
                "consumeBroadcastEnable": True,
                "retryQueueNums": 1,
                "retryMaxTimes": 16,
                "brokerId": 0,
                "whichBrokerWhenConsumeSlowly": 1,
            }
        ).encode(),
    ),  # fmt: skip
    Case("delete_subscription_group", RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "DiffAdminGroup"}),
    Case("runtime_info", RequestCode.GET_BROKER_RUNTIME_INFO, json_path=("table",)),
    Case("broker_config", RequestCode.GET_BROKER_CONFIG, body_kind="any"),
    Case("topics_by_cluster_on_broker", RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER),
    Case("delete_topic_in_broker", RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "DiffAdminTopic"}),
    Case("unknown_code", 9999, remark=True),
    Case(
        "end_transaction",
        RequestCode.END_TRANSACTION,
        {
            "producerGroup": "DiffProducer",
            "tranStateTableOffset": "0",
            "commitLogOffset": "0",
            "commitOrRollback": "8",
            "fromTransactionCheck": "false",
            "msgId": "X",
        },
    ),  # fmt: skip
    Case("send_reply_v2", RequestCode.SEND_REPLY_MESSAGE_V2, _send_ext(TOPIC, 0, PROPS), b"reply"),
    # name server
    Case("ns_route", RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}, target="namesrv"),
    Case(
        "ns_route_unknown",
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        {"topic": "DiffNoSuchTopic"},
        target="namesrv",
        remark=True,
    ),
    Case("ns_cluster_info", RequestCode.GET_BROKER_CLUSTER_INFO, target="namesrv"),
    Case("ns_all_topics", RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, target="namesrv"),
    Case(
        "ns_topics_by_cluster",
        RequestCode.GET_TOPICS_BY_CLUSTER,
        {"cluster": "DefaultCluster"},
        target="namesrv",
    ),
    Case("ns_system_topics", RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, target="namesrv"),
    Case(
        "ns_put_kv",
        RequestCode.PUT_KV_CONFIG,
        {"namespace": "DIFF", "key": "k", "value": "v"},
        target="namesrv",
    ),
    Case("ns_get_kv", RequestCode.GET_KV_CONFIG, {"namespace": "DIFF", "key": "k"}, target="namesrv"),
    Case("ns_kv_list", RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "DIFF"}, target="namesrv"),
    Case("ns_delete_kv", RequestCode.DELETE_KV_CONFIG, {"namespace": "DIFF", "key": "k"}, target="namesrv"),
    Case(
        "ns_get_kv_missing",
        RequestCode.GET_KV_CONFIG,
        {"namespace": "DIFF", "key": "k"},
        target="namesrv",
        remark=True,
    ),
    Case("ns_namesrv_config", RequestCode.GET_NAMESRV_CONFIG, target="namesrv", body_kind="any"),
    Case("ns_unknown_code", 9999, target="namesrv", remark=True),
]


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        from pocketmq.remoting.protocol.fastjson import decode_object

        try:
            return decode_object(body, "body")
        except Exception:  # noqa: BLE001 - not JSON at all
            return None


def shape(case: Case, r: RemotingCommand) -> str:
    body = r.body or b""
    if not body:
        return "none"
    if case.body_kind == "messages":
        try:
            return f"messages:{len(decode_messages(body))}"
        except Exception:  # noqa: BLE001
            return "undecodable"
    if case.body_kind == "any":
        return "some"
    obj = _json(body)
    for key in case.json_path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(obj, dict):
        # a key that carries the store path (commitLogDiskRatio_<dir>) is compared without it
        keys = {re.sub(r"_/.*", "_<dir>", str(k)) for k in obj}
        return "keys:" + ",".join(sorted(keys))
    if isinstance(obj, list):
        return "list"
    return "some" if obj is not None else "bytes"


def observation(case: Case, r: RemotingCommand) -> dict[str, Any]:
    seen: dict[str, Any] = {
        "code": r.code,
        "ext": sorted((r.ext_fields or {}).keys()),
        "body": shape(case, r),
    }
    if case.remark:
        seen["remark"] = r.remark
    return seen


async def _setup(broker: Wire) -> None:
    """The state every case starts from (besides the topic, created by the test)."""
    for i in range(3):
        r = await broker.call(RequestCode.SEND_MESSAGE_V2, _send_ext(TOPIC, 0, PROPS), f"seed {i}".encode())
        assert r.code == 0, (r.code, r.remark)
    r = await broker.heartbeat(CLIENT, consumer_group=GROUP, topics={TOPIC: "*"})
    assert r.code == 0, (r.code, r.remark)


async def _observe(broker_addr: str, namesrv_addr: str) -> dict[str, dict[str, Any]]:
    broker, namesrv = Wire(broker_addr), Wire(namesrv_addr)
    out: dict[str, dict[str, Any]] = {}
    try:
        await _setup(broker)
        await asyncio.sleep(0.5)  # the IndexFile and ConsumeQueue are built asynchronously
        for case in CASES:
            wire = broker if case.target == "broker" else namesrv
            try:
                r = await wire.call(case.code, case.ext or None, case.body, timeout=10)
                out[case.name] = observation(case, r)
            except Exception as exc:  # noqa: BLE001 - a closed connection or a timeout is an observation
                out[case.name] = {"error": type(exc).__name__}
                await wire.close()
                if case.target == "broker":
                    broker = wire = Wire(broker_addr)
                else:
                    namesrv = wire = Wire(namesrv_addr)
        stored = await _stored_properties(broker)
        delayed = await _delayed_properties(broker)
        # what clients see (a map), then the exact bytes (order and separators) apart
        out["stored_properties"] = {
            "code": stored["code"],
            "properties": [_props(p) for p in stored["properties"]],
        }
        out["stored_properties_bytes"] = stored
        out["delay_reput_properties"] = {**delayed, "properties": _props(delayed.get("properties", ""))}
        out["delay_reput_properties_bytes"] = delayed
        committed = await _committed_properties(broker)
        out["tx_commit_properties"] = {**committed, "properties": _props(committed.get("properties", ""))}
        out["tx_commit_properties_bytes"] = committed
    finally:
        await broker.close()
        await namesrv.close()
    return out


def _props(s: str) -> dict[str, str]:
    return dict(p.split("\x01", 1) for p in s.split("\x02") if "\x01" in p)


async def _stored_properties(broker: Wire) -> dict[str, Any]:
    """The property strings of the seed messages as stored (pull from offset 0)."""
    r = await broker.call(RequestCode.PULL_MESSAGE, _pull(0, 0))
    return {"code": r.code, "properties": [m.properties_str for m in decode_messages(r.body or b"")][:3]}


async def _delayed_properties(broker: Wire) -> dict[str, Any]:
    """A level-1 (1 s) delayed message as the scheduler re-puts it into its topic."""
    props = PROPS.replace("DIFF0000", "DELA0000") + "DELAY\x011\x02"
    r = await broker.call(RequestCode.SEND_MESSAGE_V2, _send_ext(TOPIC, 2, props), b"delayed")
    if r.code != 0:
        return {"send": r.code}
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        r = await broker.call(RequestCode.PULL_MESSAGE, _pull(2, 0))
        msgs = decode_messages(r.body or b"") if r.code == 0 else []
        found = [m for m in msgs if m.body == b"delayed"]
        if found:
            m = found[0]
            return {"topic": m.topic, "queue": m.queue_id, "properties": m.properties_str}
        await asyncio.sleep(0.2)
    return {"timeout": True}


async def _committed_properties(broker: Wire) -> dict[str, Any]:
    """A transaction message (half to queue 3, then END_TRANSACTION commit) as its topic holds it."""
    props = "KEYS\x01tx-key\x02TRAN_MSG\x01true\x02PGROUP\x01DiffTxP\x02WAIT\x01true\x02UNIQ_KEY\x01TX01\x02TAGS\x01TagT\x02"
    ext = _send_ext(TOPIC, 3, props, a="DiffTxP", f="4")  # sysFlag TRANSACTION_PREPARED_TYPE
    r = await broker.call(RequestCode.SEND_MESSAGE_V2, ext, b"committed")
    if r.code != 0:
        return {"send": r.code}
    msg_id = r.ext("msgId") or "0" * 32
    end = {
        "producerGroup": "DiffTxP", "tranStateTableOffset": r.ext("queueOffset") or "0",
        "commitLogOffset": str(int(msg_id[-16:], 16)), "commitOrRollback": "8", "fromTransactionCheck": "false",
        "msgId": msg_id, "transactionId": "TX01",
    }  # fmt: skip
    await broker.call(RequestCode.END_TRANSACTION, end)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        r = await broker.call(RequestCode.PULL_MESSAGE, _pull(3, 0))
        found = [m for m in decode_messages(r.body or b"") if m.body == b"committed"] if r.code == 0 else []
        if found:
            return {
                "topic": found[0].topic,
                "queue": found[0].queue_id,
                "properties": found[0].properties_str,
            }
        await asyncio.sleep(0.2)
    return {"timeout": True}


def observe(broker_addr: str, namesrv_addr: str) -> dict[str, dict[str, Any]]:
    return asyncio.run(_observe(broker_addr, namesrv_addr))


def compare(
    ours: dict[str, dict[str, Any]], theirs: dict[str, dict[str, Any]]
) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """The cases whose observations differ: name -> (pocketmq's, Apache's)."""
    return {
        name: (ours.get(name, {}), theirs.get(name, {})) for name in theirs if ours.get(name) != theirs[name]
    }
