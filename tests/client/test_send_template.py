"""A plain message's SEND_MESSAGE_V2 header rendered from its queue's template is byte-identical
to the one the general path (extFields dict -> encode_header) renders."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.client import Message, MessageQueue
from pocketmq.client.api import BORN_MARK, LANGUAGE, UNIQ_MARK, MQClientAPI, SendRequest, send_template
from pocketmq.client.config import ProducerConfig
from pocketmq.client.producer.prepare import MessagePreparer, Prepared
from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand

from .fakes import as_any


class Capture:
    """A remoting stand-in that keeps the command it is given (not awaited)."""

    hooks: list[object] = []
    before_hooks: list[object] = []

    def invoke(self, addr: str, cmd: RemotingCommand, timeout: float | None = None) -> None:
        self.cmd = cmd

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        self.cmd = cmd

    def writable(self, addr: str) -> bool:
        return True

    def oneway_now(self, addr: str, cmd: RemotingCommand, frames: int = 1) -> bool:
        self.cmd = cmd
        return True


def assert_template_is_general(prep: MessagePreparer, p: Prepared, mq: MessageQueue, opaque: int) -> str:
    """``p``'s request from its queue's template is byte-identical to the general path's;
    returns the template."""
    cap = Capture()
    api = MQClientAPI(as_any(cap), ["ns:1"])
    tpl = prep.head(p, mq)
    assert tpl is not None
    born = 1_764_000_000_123
    api.send_plain("a:1", tpl, born, p.msg_id, p.body, 3.0)
    cmd = cap.cmd
    assert type(cmd) is SendRequest
    cmd.opaque = opaque
    ext = prep.ext(p, mq)
    ext["g"] = str(born)
    general = RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque, 0, None, ext, p.body, LANGUAGE)
    assert cmd.encode_header() == general.encode_header()
    assert cmd.encode() == general.encode()
    return tpl


@pytest.mark.parametrize("group", ["PG", "组-ü", 'we"ird\\group'])
@pytest.mark.parametrize("tags", [None, "TagA", 'q"u\\o\tte', "ünï", "%d%s%%"])
@pytest.mark.parametrize(("queue_id", "opaque"), [(0, 1), (7, 12345), (1023, 0x7FFFFFFF)])
def test_template_header_is_byte_identical(group: str, tags: str | None, queue_id: int, opaque: int) -> None:
    prep = MessagePreparer(ProducerConfig(producer_group=group))
    mq = MessageQueue("Topic_%d-x", "broker-%s", queue_id)
    prep._valid_topics.add(mq.topic)
    for body in (b"x", b"y" * 3000):
        p = prep.prepare(Message(mq.topic, body, tags=tags))
        assert p.plain_tags == (tags or "")
        assert_template_is_general(prep, p, mq, opaque)


def _plain_template() -> tuple[MessagePreparer, MessageQueue, Prepared, tuple[str, ...]]:
    """A plain message prepared for queue 2 of topic T, and that queue's template."""
    prep = MessagePreparer(ProducerConfig(producer_group="PG"))
    mq = MessageQueue("T", "b", 2)
    prep._valid_topics.add(mq.topic)
    p = prep.prepare(Message(mq.topic, b"x", tags="A"))
    tpl = prep.head(p, mq)
    assert tpl is not None
    return prep, mq, p, tpl


def test_born_text_kept_per_ms_renders_each_requests_own() -> None:
    """encode_header keeps the last born timestamp's text: requests of the same ms, a later
    one, an earlier one (a clock step back) and one born at 0 each render their own born."""
    prep, mq, p, tpl = _plain_template()
    for born in (1_764_000_000_123, 1_764_000_000_123, 1_764_000_000_124, 999, 0, 1_764_000_000_124):
        cmd = SendRequest.__new__(SendRequest)
        cmd.opaque, cmd.body, cmd.tpl, cmd.born, cmd.uniq = 5, p.body, tpl, born, p.msg_id
        ext = prep.ext(p, mq)
        ext["g"] = str(born)
        general = RemotingCommand(RequestCode.SEND_MESSAGE_V2, 5, 0, None, ext, p.body, LANGUAGE)
        assert cmd.encode_header() == general.encode_header()


def test_kept_frame_prefix_follows_each_requests_lengths() -> None:
    """encode_header keeps the last frame prefix with its header and body lengths: bodies of
    the same and other sizes (none, empty, 1 byte, 64 KiB), opaques of 1 to 10 digits (the
    header's length), back and forth, each get the general encoder's prefix byte for byte."""
    prep, mq, p, tpl = _plain_template()
    ext = prep.ext(p, mq)
    ext["g"] = str(p.born)
    bodies: list[bytes | None] = [b"x" * 1024, b"x" * 1024, b"y", None, b"", b"z" * 65536, b"x" * 1024]
    for opaque in (9, 10, 10, 99_999, 100_000, 9, 0x7FFFFFFF, 0x7FFFFFFF, 1):
        for body in bodies:
            cmd = SendRequest.__new__(SendRequest)
            cmd.opaque, cmd.body, cmd.tpl, cmd.born, cmd.uniq = opaque, body, tpl, p.born, p.msg_id
            general = RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque, 0, None, ext, body, LANGUAGE)
            assert cmd.encode_header() == general.encode_header()


def test_no_template_when_a_marker_repeats_or_is_missing() -> None:
    ext = {"a": "PG", "g": BORN_MARK, "i": f"UNIQ_KEY\x01{UNIQ_MARK}"}
    assert send_template(ext) is not None
    assert send_template({**ext, "b": BORN_MARK}) is None  # twice
    assert send_template({"a": "PG", "i": f"UNIQ_KEY\x01{UNIQ_MARK}"}) is None  # no born mark
    assert send_template({"i": f"UNIQ_KEY\x01{UNIQ_MARK}", "g": BORN_MARK}) is None  # out of order
    assert send_template({**ext, "b": "@@pocketmq-opaque@@"}) is None  # the opaque's cut marker


def test_not_plain_messages_take_the_general_header() -> None:
    prep = MessagePreparer(ProducerConfig(producer_group="PG"))
    mq = MessageQueue("T", "b", 0)
    prep._valid_topics.add("T")
    for msg in (
        Message("T", b"x", flag=3),
        Message("T", b"x", keys="k"),
        Message("T", b"x", properties={"p": "v"}),
        Message("T", b"x", delay_level=2),
        Message("T", b"x" * 5000),  # compressed
        Message("T", b"x", wait_store_msg_ok=False),
    ):
        p = prep.prepare(msg)
        assert p.plain_tags is None and prep.head(p, mq) is None


async def test_rpc_hooks_turn_templates_off() -> None:
    from .test_producer_unit import make_producer, ok

    producer, inst = make_producer(ok)
    await producer.send(Message("T", b"x", tags="A"))
    inst.remoting.before_hooks.append(lambda addr, req: None)
    await producer.send(Message("T", b"x", tags="A"))
    assert inst.remoting.request_types == [SendRequest, RemotingCommand]
    plain, general = (req for _addr, req in inst.remoting.requests)
    assert plain.ext_fields is not None and general.ext_fields is not None
    assert plain.ext_fields.keys() == general.ext_fields.keys()


def test_uniq_ids_are_the_packed_layout() -> None:
    """UniqIdGenerator.create (head cached per millisecond, counter from a table) renders what
    packing ``>iH`` (signed ms since the month's start, counter) and ``hex().upper()`` does."""
    import struct

    from pocketmq.remoting.protocol.message import UniqIdGenerator

    gen = UniqIdGenerator(ip=b"\x0a\x00\x00\x07", pid=0x12345)
    for start in (0, 0xFF, 0x100, 0xFFFF, 0x10000, 0x1FFFE, 0xABCD):
        gen._count_from(start)
        for _ in range(3):
            uid = gen.create()
            count = int(uid[-4:], 16)
            assert count == (start + _) & 0xFFFF
            diff = (gen.last_ms - gen._start_ms) & 0xFFFFFFFF
            tail = struct.pack(">iH", diff - 0x100000000 if diff & 0x80000000 else diff, count)
            assert uid == gen._prefix + tail.hex().upper()
    gen.last_ms, gen._start_ms, gen._next_start_ms = -1, 1 << 62, 1 << 62  # diff's bit 31 set
    gen._roll_month = lambda now: None  # type: ignore[method-assign]
    uid = gen.create()
    diff = (gen.last_ms - gen._start_ms) & 0xFFFFFFFF
    tail = struct.pack(">iH", diff - 0x100000000 if diff & 0x80000000 else diff, int(uid[-4:], 16))
    assert uid == gen._prefix + tail.hex().upper()


async def test_untagged_templates_kept_by_queue_only_for_the_queues_topic() -> None:
    """send_async reads an untagged message's template by its queue alone
    (MessagePreparer.untagged): each request carries its own topic and queue id, and only a
    template of the queue's own topic, untagged and not a transactional half, is kept there."""
    from .test_producer_unit import QUEUES, make_future_producer, ok

    producer, inst = make_future_producer(ok)
    prep = producer._prep
    for i in range(8):  # twice round the four queues
        res = await producer.send_async(Message("T", b"x%d" % i))
        ext = inst.remoting.requests[-1][1].ext_fields
        assert ext is not None and ext["b"] == "T" and ext["e"] == str(res.message_queue.queue_id)
        assert ext["i"] == f"UNIQ_KEY\x01{res.msg_id}"
    assert prep.untagged == {mq: prep.heads[("T", mq.queue_id, mq.broker_name, "")] for mq in QUEUES}
    kept = dict(prep.untagged)
    prep._valid_topics.add("U")
    prep.head(prep.prepare(Message("U", b"x")), QUEUES[0])  # another topic's message on T's queue
    prep.head(prep.prepare(Message("T", b"x", tags="A")), QUEUES[0])  # tagged
    half = prep.prepare_half(Message("T", b"x"))  # a half without tags: plain_tags is TX_MARK
    assert half is not None
    prep.head(half, QUEUES[1])
    assert prep.untagged == kept
    res = await producer.send_async(Message("T", b"y"))
    ext = inst.remoting.requests[-1][1].ext_fields
    assert ext is not None and ext["b"] == "T" and "TRAN_MSG" not in ext["i"]


async def test_await_send_reads_an_untagged_template_by_queue_and_send_to_keeps_the_tuple_key() -> None:
    """An awaited send's first attempt on one of its topic's queues reads an untagged
    message's template by the queue (MessagePreparer.untagged); send to an explicit queue of
    another topic renders the message's own topic, as before."""
    from .test_producer_unit import QUEUES, make_future_producer, ok

    producer, inst = make_future_producer(ok)
    producer._sender.loop = asyncio.get_running_loop()
    await producer.send(Message("T", b"w"))  # the topic checked: the fast path from now on
    prep = producer._prep
    for i in range(4):
        res = await producer.send(Message("T", b"x%d" % i))
        ext = inst.remoting.requests[-1][1].ext_fields
        assert ext is not None and ext["b"] == "T" and ext["e"] == str(res.message_queue.queue_id)
    assert set(prep.untagged) == set(QUEUES)
    # read by the queue: every queue given queue 0's template renders queue 0's id
    prep.untagged = dict.fromkeys(QUEUES, prep.untagged[QUEUES[0]])
    for _ in range(4):  # (round robin: every queue)
        await producer.send(Message("T", b"z"))
        assert inst.remoting.requests[-1][1].ext_fields["e"] == "0"
    prep._valid_topics.add("U")
    foreign = MessageQueue("U", "broker-a", 0)
    await producer.send(Message("T", b"y"), queue=foreign)
    ext = inst.remoting.requests[-1][1].ext_fields
    assert ext is not None and ext["b"] == "T" and ext["e"] == "0"
    assert foreign not in prep.untagged
