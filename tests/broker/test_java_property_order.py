"""Property strings byte for byte as Apache RocketMQ 4.9.7's broker writes them (Java HashMap order).

Apache's broker parses a message's properties into a ``new HashMap()`` and writes them back with
``messageProperties2String`` (iteration order, entries joined by ``\\x02``, no trailing one):
on every send (the request's map, ``WAIT`` out, ``CLUSTER`` in) and again on the way into and out
of ``SCHEDULE_TOPIC_XXXX`` (``REAL_TOPIC`` / ``REAL_QID`` in, the sender's ``WAIT`` back in).
pocketmq keeps the producer's order on a send (re-encoding each send would cost every message;
docs/differences-apache.md) and reproduces Java's order where its broker re-encodes anyway: a
delayed message's re-put, and CONSUMER_SEND_MSG_BACK's retry and DLQ copies (end of this file). The expected strings below were stored by Apache 4.9.7's broker (sent with
SEND_MESSAGE_V2 to topic ``CapTopic``, cluster ``DefaultCluster``, queue ids 0, 0, 0, 0, 1, 2, 3,
pulled back; the delayed ones after the level-1 re-put). They cover the 16-bucket table, its
doubling to 32 (17 names) and 64 (32 names), and shared buckets (insertion order within one).
"""

from __future__ import annotations

import pytest

from pocketmq.broker.processor.message_props import (
    apply_delay_level,
    java_properties_string,
    java_reput_properties,
    stored_properties,
)
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.message import (
    MessageConst,
    decode_messages,
    get_property,
    string_to_properties,
)
from pocketmq.store import MessageInner
from tests.broker.helpers import pull_until

# (what the producer sent, what Apache 4.9.7 stored / re-put)
APACHE_STORED = [
    (
        "UNIQ_KEY\x01U1\x02WAIT\x01true\x02TAGS\x01TagA\x02",
        "UNIQ_KEY\x01U1\x02CLUSTER\x01DefaultCluster\x02TAGS\x01TagA",
    ),
    (
        "a\x011\x02b\x012\x02c\x013\x02KEYS\x01k1 k2\x02WAIT\x01false\x02UNIQ_KEY\x01U2\x02",
        "a\x011\x02b\x012\x02c\x013\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01U2\x02CLUSTER\x01DefaultCluster",
    ),
    (
        "user0\x010\x02user1\x011\x02user2\x012\x02user3\x013\x02user4\x014\x02user5\x015\x02user6\x016\x02user7\x017\x02user8\x018\x02user9\x019\x02user10\x0110\x02user11\x0111\x02user12\x0112\x02user13\x0113\x02WAIT\x01true\x02TAGS\x01T\x02",
        "user1\x011\x02user11\x0111\x02user2\x012\x02user10\x0110\x02user0\x010\x02user13\x0113\x02user12\x0112\x02user9\x019\x02user7\x017\x02user8\x018\x02user5\x015\x02user6\x016\x02user3\x013\x02user4\x014\x02CLUSTER\x01DefaultCluster\x02TAGS\x01T",
    ),
    (
        "p00\x01v\x02p01\x01v\x02p02\x01v\x02p03\x01v\x02p04\x01v\x02p05\x01v\x02p06\x01v\x02p07\x01v\x02p08\x01v\x02p09\x01v\x02p10\x01v\x02p11\x01v\x02p12\x01v\x02p13\x01v\x02p14\x01v\x02p15\x01v\x02p16\x01v\x02p17\x01v\x02p18\x01v\x02p19\x01v\x02p20\x01v\x02p21\x01v\x02p22\x01v\x02p23\x01v\x02p24\x01v\x02p25\x01v\x02p26\x01v\x02p27\x01v\x02p28\x01v\x02p29\x01v\x02UNIQ_KEY\x01U4\x02",
        "p10\x01v\x02p12\x01v\x02p11\x01v\x02p14\x01v\x02p13\x01v\x02p16\x01v\x02p15\x01v\x02p18\x01v\x02p17\x01v\x02p19\x01v\x02UNIQ_KEY\x01U4\x02CLUSTER\x01DefaultCluster\x02p21\x01v\x02p20\x01v\x02p01\x01v\x02p23\x01v\x02p00\x01v\x02p22\x01v\x02p03\x01v\x02p25\x01v\x02p02\x01v\x02p24\x01v\x02p05\x01v\x02p27\x01v\x02p04\x01v\x02p26\x01v\x02p07\x01v\x02p29\x01v\x02p06\x01v\x02p28\x01v\x02p09\x01v\x02p08\x01v",
    ),
    (
        "KEYS\x01dk\x02WAIT\x01true\x02DELAY\x011\x02UNIQ_KEY\x01D1\x02TAGS\x01TD\x02",
        "REAL_TOPIC\x01CapTopic\x02KEYS\x01dk\x02UNIQ_KEY\x01D1\x02CLUSTER\x01DefaultCluster\x02DELAY\x011\x02WAIT\x01true\x02TAGS\x01TD\x02REAL_QID\x011",
    ),
    (
        "DELAY\x011\x02order\x01x\x02user0\x010\x02user1\x011\x02user2\x012\x02user3\x013\x02user4\x014\x02user5\x015\x02user6\x016\x02user7\x017\x02user8\x018\x02user9\x019\x02UNIQ_KEY\x01D2\x02",
        "user1\x011\x02user2\x012\x02user0\x010\x02user9\x019\x02user7\x017\x02user8\x018\x02user5\x015\x02user6\x016\x02user3\x013\x02user4\x014\x02REAL_TOPIC\x01CapTopic\x02UNIQ_KEY\x01D2\x02CLUSTER\x01DefaultCluster\x02DELAY\x011\x02order\x01x\x02REAL_QID\x012",
    ),
    (
        "k0\x010\x02k1\x011\x02k2\x012\x02k3\x013\x02k4\x014\x02k5\x015\x02WAIT\x01false\x02DELAY\x011\x02TAGS\x01Z\x02",
        "REAL_TOPIC\x01CapTopic\x02k0\x010\x02k1\x011\x02k2\x012\x02k3\x013\x02k4\x014\x02k5\x015\x02CLUSTER\x01DefaultCluster\x02DELAY\x011\x02WAIT\x01false\x02TAGS\x01Z\x02REAL_QID\x013",
    ),
]
QUEUES = [0, 0, 0, 0, 1, 2, 3]


def _cases() -> list[tuple[int, str, str]]:
    return [(i, sent, stored) for i, (sent, stored) in enumerate(APACHE_STORED)]


@pytest.mark.parametrize(("i", "sent", "stored"), _cases())
def test_java_hashmap_order_matches_apache(i: int, sent: str, stored: str) -> None:
    props, _ = stored_properties(sent, "DefaultCluster")
    if "DELAY\x01" not in sent:
        # a send: Java's map of the request's properties, WAIT out, CLUSTER in (pocketmq stores
        # the producer's order instead; the same map, encoded the Java way, is Apache's string)
        assert java_properties_string(string_to_properties(props)) == stored
        assert string_to_properties(props) == string_to_properties(stored)
        return
    # a delayed message: pocketmq's schedule record, then the re-put a schedule service stores
    inner = MessageInner("CapTopic", b"x", QUEUES[i], 0, props, 0, 0, ("127.0.0.1", 1), ("127.0.0.1", 2), 0)
    apply_delay_level(inner, 18, get_property(sent, MessageConst.WAIT))
    assert java_reput_properties(inner.properties_string()) == stored
    # an Apache record read back is re-put unchanged (the same map, the same order)
    assert java_reput_properties(stored) == stored


def test_reput_cached_shape_and_parse_rules() -> None:
    sent, stored = APACHE_STORED[4]
    props, _ = stored_properties(sent, "DefaultCluster")
    inner = MessageInner("CapTopic", b"x", 1, 0, props, 0, 0, ("127.0.0.1", 1), ("127.0.0.1", 2), 0)
    apply_delay_level(inner, 18, get_property(sent, MessageConst.WAIT))
    record = inner.properties_string()
    assert record != stored  # pocketmq's record keeps the producer's order
    for _ in range(2):  # the uncached reordering, then the cached one
        assert java_reput_properties(record) == stored
    assert java_reput_properties(record + "\x02") == stored  # a trailing separator is tolerated
    # the same names with other values reuse the cached shape
    assert java_reput_properties(record.replace("TD", "TE")) == stored.replace("TD", "TE")
    assert java_reput_properties("") == ""
    # Java's parse: empty names/values and entries shorter than 3 chars are dropped; a value
    # may hold \x01; a repeated name keeps its first place and takes the last value
    odd = "\x01v\x02k\x01\x02ab\x02DELAY\x013\x02k2\x01a\x01b\x02DELAY\x014\x02\x02"
    assert java_reput_properties(odd) == "k2\x01a\x01b\x02DELAY\x014"


# CONSUMER_SEND_MSG_BACK on Apache 4.9.7 (group CapGroup, maxReconsumeTimes 16) of a message sent
# to CapTopic queue 0: (what the producer sent, the retry delivered to %RETRY%CapGroup after a
# level-1 delay, the copy stored in %DLQ%CapGroup by delayLevel -1). ORIGIN_MESSAGE_ID's value is
# the offset msgId, which names the broker's own address: replaced by this broker's below.
APACHE_SEND_BACK = [
    (
        "KEYS\x01bk\x02WAIT\x01true\x02UNIQ_KEY\x01B1\x02TAGS\x01TB\x02biz\x011\x02",
        "REAL_TOPIC\x01%RETRY%CapGroup\x02biz\x011\x02ORIGIN_MESSAGE_ID\x017F0000010000ECEB0000000000000000\x02RETRY_TOPIC\x01CapTopic\x02KEYS\x01bk\x02UNIQ_KEY\x01B1\x02CLUSTER\x01DefaultCluster\x02WAIT\x01false\x02DELAY\x011\x02TAGS\x01TB\x02REAL_QID\x010",
        "biz\x011\x02ORIGIN_MESSAGE_ID\x017F0000010000ECEB0000000000000000\x02RETRY_TOPIC\x01CapTopic\x02KEYS\x01bk\x02UNIQ_KEY\x01B1\x02CLUSTER\x01DefaultCluster\x02WAIT\x01false\x02DELAY\x010\x02TAGS\x01TB",
    ),
    (
        "user0\x010\x02user1\x011\x02user2\x012\x02user3\x013\x02user4\x014\x02user5\x015\x02user6\x016\x02user7\x017\x02user8\x018\x02TAGS\x01T2\x02UNIQ_KEY\x01B2\x02",
        "user1\x011\x02user2\x012\x02user0\x010\x02user7\x017\x02user8\x018\x02user5\x015\x02user6\x016\x02user3\x013\x02user4\x014\x02REAL_TOPIC\x01%RETRY%CapGroup\x02ORIGIN_MESSAGE_ID\x017F0000010000ECEB00000000000003F4\x02RETRY_TOPIC\x01CapTopic\x02UNIQ_KEY\x01B2\x02CLUSTER\x01DefaultCluster\x02WAIT\x01false\x02DELAY\x011\x02TAGS\x01T2\x02REAL_QID\x010",
        "user1\x011\x02user2\x012\x02user0\x010\x02user7\x017\x02user8\x018\x02user5\x015\x02user6\x016\x02user3\x013\x02user4\x014\x02ORIGIN_MESSAGE_ID\x017F0000010000ECEB00000000000003F4\x02RETRY_TOPIC\x01CapTopic\x02UNIQ_KEY\x01B2\x02CLUSTER\x01DefaultCluster\x02WAIT\x01false\x02DELAY\x010\x02TAGS\x01T2",
    ),
]


def _with_origin(stored: str, msg_id: str) -> str:
    entries = stored.split("\x02")
    return "\x02".join(
        f"ORIGIN_MESSAGE_ID\x01{msg_id}" if e.startswith("ORIGIN_MESSAGE_ID\x01") else e for e in entries
    )


async def test_send_back_retry_and_dlq_properties_match_apache(broker, wire) -> None:
    for i, (sent, retry, dlq) in enumerate(APACHE_SEND_BACK):
        body = f"back{i}".encode()
        ext = {
            "a": "CapP", "b": "CapTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0",
            "g": "1700000000000", "h": "0", "i": sent, "j": "0", "k": "false",
        }  # fmt: skip
        assert (await wire.call(RequestCode.SEND_MESSAGE_V2, ext, body)).code == ResponseCode.SUCCESS
        (m,) = [
            x for x in await pull_until(wire, "CapTopic", count=i + 1, group="CapGroup") if x.body == body
        ]
        for level in ("1", "-1"):
            back = {
                "offset": str(m.commit_log_offset), "group": "CapGroup", "delayLevel": level,
                "originMsgId": m.msg_id, "originTopic": "CapTopic", "unitMode": "false",
                "maxReconsumeTimes": "16",
            }  # fmt: skip
            r = await wire.call(RequestCode.CONSUMER_SEND_MSG_BACK, back)
            assert r.code == ResponseCode.SUCCESS, r.remark
        retried = await pull_until(wire, "%RETRY%CapGroup", count=i + 1, group="CapGroup")
        (got,) = [x for x in retried if x.body == body]
        assert got.properties_str == _with_origin(retry, m.msg_id)
        # the DLQ is write-only (RocketMQ 4.x): read the copy from the store
        found = broker.store.get_message("CapGroup", "%DLQ%CapGroup", 0, i, 1)
        (dead,) = decode_messages(found.body)
        assert dead.body == body and dead.properties_str == _with_origin(dlq, m.msg_id)
