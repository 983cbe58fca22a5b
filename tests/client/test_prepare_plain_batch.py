"""prepare_batch's one-pass way for plain messages: the same Prepared (body bytes, ids, WAIT)
as the general way, and everything else still checked and refused by the general way."""

from __future__ import annotations

import itertools

import pytest

from pocketmq.client import Message
from pocketmq.client.config import ProducerConfig
from pocketmq.client.errors import MessageValidationError
from pocketmq.client.producer.prepare import MessagePreparer
from pocketmq.remoting.protocol.message import decode_batch, string_to_properties


def _preparers() -> tuple[MessagePreparer, MessagePreparer]:
    """Two preparers with the same id sequence; the second never takes the one-pass way."""
    out = []
    for _ in range(2):
        prep = MessagePreparer(ProducerConfig(producer_group="g", max_message_size=8192))
        ids = itertools.count()
        prep._uniq.create = lambda ids=ids: f"{next(ids):032X}"  # type: ignore[method-assign]
        prep._uniq.create_many = lambda n, ids=ids: [f"{next(ids):032X}" for _ in range(n)]  # type: ignore[method-assign]
        prep._uniq.create_text = lambda n, ids=ids: ",".join(f"{next(ids):032X}" for _ in range(n))  # type: ignore[method-assign]
        out.append(prep)
    general = out[1]
    general._plain_batch = lambda msgs, topic: None  # type: ignore[method-assign]
    return out[0], general


def _items(p) -> list:
    """The body's items with UNIQ_KEY cut out, after checking they are the msgId's."""
    items = decode_batch(p.body)
    ids = [string_to_properties(i.properties_str).pop("UNIQ_KEY") for i in items]
    assert p.msg_id.split(",") == ids
    return [(i.flag, i.body, i.properties_str.replace(uniq, "")) for i, uniq in zip(items, ids, strict=True)]


def _same(msgs: list[Message]) -> None:
    """The same Prepared (the same bytes but for the ids when a message sends the batch the
    general way after the one-pass way made some: ids are not reused)."""
    fast, general = _preparers()
    for _ in range(3):  # (the first batch of a topic validates it: the general way)
        a = fast.prepare_batch(msgs)
        b = general.prepare_batch(msgs)
        assert (a.topic, a.sys_flag, a.flag, a.props, a.batch) == (b.topic, b.sys_flag, b.flag, b.props, b.batch)
        assert _items(a) == _items(b)
        if all(m.keys is None and not m.properties and m.wait_store_msg_ok and type(m.body) is bytes for m in msgs):
            assert (a.body, a.msg_id) == (b.body, b.msg_id)


@pytest.mark.parametrize(
    "msgs",
    [
        [Message("T", b"x" * 30) for _ in range(64)],
        # one length, flag and no tags (the uniform way), with tags "" and a flag, and alone
        [Message("T", bytes([i]) * 50, tags="" if i % 2 else None, flag=9) for i in range(40)],
        [Message("T", b"z")],
        [Message("T", b"ab", tags="é"), Message("T", b"x" * 7, flag=5, tags="t"), Message("T", b"y", tags="")],
        # runs of one size, tags length and flag, and changes of each (the kept item heads)
        [
            *(Message("T", b"s" * 9, tags="ab") for _ in range(3)),
            Message("T", b"s" * 10, tags="ab"),
            Message("T", b"s" * 9, tags="ab"),
            Message("T", b"s" * 9, tags="abc"),
            Message("T", b"s" * 9, tags="ab", flag=7),
            Message("T", b"s" * 9, tags="ab", flag=7),
            Message("T", b"s" * 9, tags="xy"),
            Message("T", b"s" * 9),
        ],
        # not plain: keys, user properties, WAIT false (the general way for the whole batch)
        [Message("T", b"a"), Message("T", b"b", keys="k")],
        [Message("T", b"a"), Message("T", b"b", properties={"p": "v"})],
        [Message("T", b"a"), Message("T", b"b", wait_store_msg_ok=False)],
        [Message("T", b"a"), Message("T", bytearray(b"b"))],  # type: ignore[arg-type]
    ],
)
def test_the_one_pass_way_prepares_what_the_general_way_does(msgs):
    _same(msgs)


def test_the_one_pass_body_is_items_of_tags_and_uniq_key():
    fast, _ = _preparers()
    fast.prepare_batch([Message("T", b"w")])
    p = fast.prepare_batch([Message("T", b"a", tags="t", flag=3), Message("T", b"bb")])
    items = decode_batch(p.body)
    assert [(i.flag, i.body) for i in items] == [(3, b"a"), (0, b"bb")]
    ids = p.msg_id.split(",")
    assert [i.properties_str for i in items] == [f"TAGS\x01t\x02UNIQ_KEY\x01{ids[0]}", f"UNIQ_KEY\x01{ids[1]}"]
    assert p.props == "WAIT\x01true"


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (Message("U", b"x"), "same topic"),
        (Message("T", b""), "zero"),
        (Message("T", b"x" * 9000), "over the max"),
        (Message("T", b"x", delay_level=2), "delay levels"),
        (Message("T", b"x", delay_level=-1), "negative"),
        (Message("T", b"x", tags="a\x01b"), None),
    ],
)
def test_what_the_general_way_refuses_is_still_refused(bad, match):
    fast, general = _preparers()
    fast.prepare_batch([Message("T", b"w")])
    general.prepare_batch([Message("T", b"w")])
    for prep in (fast, general):
        if match is None:  # (TAGS with a separator: whatever the general way does)
            try:
                want = general.prepare_batch([Message("T", b"a"), bad]).body
            except MessageValidationError:
                with pytest.raises(MessageValidationError):
                    fast.prepare_batch([Message("T", b"a"), bad])
            else:
                assert want
                assert _items(fast.prepare_batch([Message("T", b"a"), bad])) == _items(
                    general.prepare_batch([Message("T", b"a"), bad])
                )
            return
        with pytest.raises(MessageValidationError, match=match):
            prep.prepare_batch([Message("T", b"a"), bad])


def test_a_batch_over_the_max_size_is_refused_as_before():
    fast, general = _preparers()
    for prep in (fast, general):
        prep.prepare_batch([Message("T", b"w")])
        with pytest.raises(MessageValidationError, match="batch size"):
            prep.prepare_batch([Message("T", b"x" * 4000), Message("T", b"x" * 4200)])


def test_uniform_batches_take_the_one_join_way_and_others_do_not():
    """Untagged messages of one body length and flag are cut from one join (_uniform_batch);
    a message that differs in any of those, or ids of unequal lengths, leave it to the
    item-by-item way, with the same bytes either way."""
    from pocketmq.client.producer import prepare

    ids = [f"{i:032X}" for i in range(5)]
    msgs = [Message("T", b"%05d" % i, flag=2) for i in range(5)]
    p = prepare._uniform_batch(msgs, "T", ",".join(ids), 8192)
    assert p is not None and p.msg_id == ",".join(ids)
    assert [(i.flag, i.body, i.properties_str) for i in decode_batch(p.body)] == [
        (2, b"%05d" % i, f"UNIQ_KEY\x01{ids[i]}") for i in range(5)
    ]
    for odd in (
        Message("T", b"123456", flag=2),
        Message("T", b"12345", flag=3),
        Message("T", b"12345", flag=2, tags="t"),
        Message("U", b"12345", flag=2),
        Message("T", b"12345", flag=2, keys="k"),
        Message("T", b"12345", flag=2, properties={"a": "b"}),
        Message("T", b"12345", flag=2, wait_store_msg_ok=False),
        Message("T", bytearray(b"12345"), flag=2),  # type: ignore[arg-type]
    ):
        assert prepare._uniform_batch([*msgs[:3], odd], "T", ",".join(ids[:4]), 8192) is None
    # ids of unequal lengths, also when the whole is as long as equal ones would be
    assert prepare._uniform_batch(msgs, "T", ",".join([*ids[:4], ids[4] + "0"]), 8192) is None
    assert prepare._uniform_batch(msgs, "T", ",".join([ids[0], ids[1] + "0", ids[2][1:], *ids[3:]]), 8192) is None
    assert prepare._uniform_batch(msgs, "T", ",".join(ids), len(p.body) - 1) is None  # over the max size
    _same([*msgs[:3], Message("T", b"123456", flag=2), *msgs[3:]])
