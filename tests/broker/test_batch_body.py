"""The batch body splitter of the send path (pure: bytes in, MessageInner list or MESSAGE_ILLEGAL out)."""

from __future__ import annotations

import struct

import pytest

from pocketmq.broker.processor.batch_body import ITEM_HEAD, batch_items, batch_messages
from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.remoting.protocol.errors import MessageIllegalError
from pocketmq.remoting.protocol.message import encode_batch

BORN = (b"\x0a\x00\x00\x01", 4321)
STORE = (b"\x7f\x00\x00\x01", 10911)


def split(data: bytes, max_body: int = 1024) -> list:
    return batch_messages(
        data, "T", 3, 0x40, 17, BORN, STORE, 2, "WAIT\x01x\x02CLUSTER\x01C", max_body, "too long"
    )


def test_items_share_the_header_fields_and_get_its_properties_appended():
    data = encode_batch([(1, b"a", "TAGS\x01t"), (2, b"", ""), (3, b"ccc", "K\x01v\x02")])
    msgs = split(data)
    assert [(m.flag, m.body) for m in msgs] == [(1, b"a"), (2, b""), (3, b"ccc")]
    assert [m.properties for m in msgs] == [
        "TAGS\x01t\x02WAIT\x01x\x02CLUSTER\x01C",
        "WAIT\x01x\x02CLUSTER\x01C",
        "K\x01v\x02WAIT\x01x\x02CLUSTER\x01C",  # no doubled separator
    ]
    for m in msgs:
        assert (m.topic, m.queue_id, m.sys_flag, m.born_timestamp, m.reconsume_times) == ("T", 3, 0x40, 17, 2)
        assert m.born_host == BORN and m.store_host == STORE and type(m.body) is bytes


def _item(
    flag: int, body: bytes, props: bytes, *, total: int | None = None, plen: int | None = None
) -> bytes:
    size = ITEM_HEAD.size + len(body) + 2 + len(props)
    head = ITEM_HEAD.pack(size if total is None else total, 0, 0, flag, len(body))
    return head + body + struct.pack(">h", len(props) if plen is None else plen) + props


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        (b"", "empty batch body"),
        (b"\x00\x00\x00\x05garbage", "truncated"),
        (_item(0, b"x", b"") + b"\x00\x00", "truncated"),
        (_item(0, b"x", b"", total=10_000), "total size"),
        (_item(0, b"x", b"", total=5), "total size"),
        (_item(0, b"xyz", b"a\x01b", plen=2), "properties length"),
        (_item(0, b"x", b"a\x01b", plen=-1), "properties length"),
        (_item(0, b"x", b"\xff\xfe"), "not UTF-8"),
    ],
)
def test_inconsistent_items_are_message_illegal(data, detail):
    with pytest.raises(MessageIllegalError) as info:
        split(data)
    assert info.value.response_code == ResponseCode.MESSAGE_ILLEGAL
    assert info.value.remark.startswith("the batch body is illegal") and detail in info.value.remark


def test_negative_body_length_is_illegal():
    head = ITEM_HEAD.pack(30, 0, 0, 0, -5)
    with pytest.raises(MessageIllegalError, match="body length"):
        split(head + b"\x00" * 10)


def test_body_over_the_limit_uses_the_given_remark():
    with pytest.raises(MessageIllegalError) as info:
        split(encode_batch([(0, b"ok", ""), (0, b"x" * 11, "")]), max_body=10)
    assert info.value.remark == "too long"


def test_batch_items_are_flag_body_view_and_properties_as_the_store_takes_them():
    data = encode_batch([(1, b"a", "TAGS\x01t"), (2, b"", ""), (3, b"ccc", "K\x01v\x02")])
    items = batch_items(data, "CLUSTER\x01C", 1024, "too long")
    assert [(f, bytes(b), p) for f, b, p in items] == [
        (1, b"a", "TAGS\x01t\x02CLUSTER\x01C"),
        (2, b"", "CLUSTER\x01C"),
        (3, b"ccc", "K\x01v\x02CLUSTER\x01C"),
    ]
    assert all(type(b) is memoryview and b.obj is data for _, b, _ in items)  # no copy yet
    with pytest.raises(MessageIllegalError, match="too long"):
        batch_items(data, "CLUSTER\x01C", 2, "too long")


def test_stored_records_alone_and_together_are_bounded_by_the_limit():
    # each record is stored as 91 fixed bytes + body + topic + its properties with the header's
    one = encode_batch([(0, b"x" * 100, "")])
    header_props = "CLUSTER\x01C"
    stored = 91 + 100 + len("T") + len(header_props)
    assert len(batch_items(one, header_props, stored, "too long", "T")) == 1
    with pytest.raises(MessageIllegalError, match="too long"):
        batch_items(one, header_props, stored - 1, "too long", "T")
    two = encode_batch([(0, b"x" * 100, "")] * 2)
    with pytest.raises(MessageIllegalError, match="too long"):
        batch_items(two, header_props, 2 * stored - 1, "too long", "T")
    assert len(batch_items(two, header_props, 2 * stored, "too long", "T")) == 2
