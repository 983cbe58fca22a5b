"""QUERY_MESSAGE (by key, through the index) and VIEW_MESSAGE_BY_ID against a real in-process broker."""

from __future__ import annotations

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.message import decode_message, decode_messages, decode_offset_msg_id

FAR_FUTURE = str(2**62)


def query_ext(
    topic: str, key: str, max_num: int = 32, begin: int = 0, end: str = FAR_FUTURE
) -> dict[str, str]:
    return {
        "topic": topic,
        "key": key,
        "maxNum": str(max_num),
        "beginTimestamp": str(begin),
        "endTimestamp": end,
    }


async def test_query_message_by_key(broker, wire):
    for body, keys in ((b"a", "k1 common"), (b"b", "k2 common"), (b"c", "k3")):
        assert (await wire.send("QT", body, keys=keys)).code == ResponseCode.SUCCESS
    last = await wire.send("Other", b"x", keys="common")
    assert last.code == ResponseCode.SUCCESS
    broker.store.do_reput()

    r = await wire.call(RequestCode.QUERY_MESSAGE, query_ext("QT", "common"))
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
    msgs = decode_messages(r.body)
    assert sorted(m.body for m in msgs) == [b"a", b"b"] and {m.topic for m in msgs} == {"QT"}
    assert int(r.ext_fields["indexLastUpdateTimestamp"]) > 0
    # the CommitLog offset of the last indexed message (IndexHeader endPhyOffset)
    assert int(r.ext_fields["indexLastUpdatePhyoffset"]) == decode_offset_msg_id(last.ext_fields["msgId"])[2]

    r = await wire.call(RequestCode.QUERY_MESSAGE, query_ext("QT", "common", max_num=1))
    assert len(decode_messages(r.body)) == 1
    r = await wire.call(RequestCode.QUERY_MESSAGE, query_ext("QT", "k3"))
    assert [m.body for m in decode_messages(r.body)] == [b"c"]


async def test_query_message_not_found_carries_the_index_header(broker, wire):
    assert (await wire.send("QT", b"a", keys="present")).code == ResponseCode.SUCCESS
    broker.store.do_reput()
    stored = decode_messages((await wire.call(RequestCode.QUERY_MESSAGE, query_ext("QT", "present"))).body)[
        0
    ].store_timestamp
    for ext in (
        query_ext("QT", "absent"),
        query_ext("Nope", "present"),
        query_ext("QT", "present", begin=stored + 1),  # outside the time window
        query_ext("QT", "present", end=str(stored - 1)),
    ):
        r = await wire.call(RequestCode.QUERY_MESSAGE, ext)
        assert (r.code, r.remark) == (
            ResponseCode.QUERY_NOT_FOUND,
            "can not find message, maybe time range not correct",
        )
        assert "indexLastUpdateTimestamp" in r.ext_fields and "indexLastUpdatePhyoffset" in r.ext_fields
        assert r.body is None
    ext = query_ext("QT", "present")
    del ext["maxNum"]
    r = await wire.call(RequestCode.QUERY_MESSAGE, ext)
    assert r.code == ResponseCode.SYSTEM_ERROR and "maxNum" in r.remark


async def test_unique_key_query_uses_default_query_max_num(broker, wire):
    uniq = "7F0000010001000000000000000000AA"
    for i in range(3):  # a producer retry stores the same client msgId more than once
        r = await wire.send("QT", f"dup{i}".encode(), props={"UNIQ_KEY": uniq})
        assert r.code == ResponseCode.SUCCESS
    broker.store.do_reput()
    r = await wire.call(RequestCode.QUERY_MESSAGE, query_ext("QT", uniq, max_num=1))
    assert len(decode_messages(r.body)) == 1
    r = await wire.call(
        RequestCode.QUERY_MESSAGE, {**query_ext("QT", uniq, max_num=1), "_UNIQUE_KEY_QUERY": "true"}
    )
    msgs = decode_messages(r.body)
    assert len(msgs) == 3 and {m.uniq_key for m in msgs} == {uniq}


async def test_view_message_by_commitlog_offset(broker, wire):
    first = await wire.send("VT", b"first", keys="k")
    second = await wire.send("VT", b"second", tags="TagB")
    _, _, offset = decode_offset_msg_id(second.ext_fields["msgId"])
    r = await wire.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
    msg = decode_message(r.body)
    assert (msg.topic, msg.body, msg.tags, msg.msg_id) == (
        "VT",
        b"second",
        "TagB",
        second.ext_fields["msgId"],
    )
    assert msg.commit_log_offset == offset

    _, _, first_offset = decode_offset_msg_id(first.ext_fields["msgId"])
    for bad in (first_offset + 1, offset + 4, 1 << 40, -5):  # inside a record, past the end, negative
        r = await wire.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(bad)})
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {bad}")
    r = await wire.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "abc"})
    assert r.code == ResponseCode.SYSTEM_ERROR and "offset" in r.remark
    # still serving
    assert (
        await wire.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
    ).code == ResponseCode.SUCCESS
