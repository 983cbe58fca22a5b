"""A transactional half's properties and SEND_MESSAGE_V2 header, and an END_TRANSACTION
header, from the fast paths (prepare's half shape, the group's END_TRANSACTION template, the
commit-log offset read from the msgId's tail) are byte-identical to the general paths'."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from pocketmq.client import Message, MessageQueue
from pocketmq.client.api import LANGUAGE, EndTransactionRequest, MQClientAPI, end_template, end_templates
from pocketmq.client.config import ProducerConfig
from pocketmq.client.errors import MessageValidationError
from pocketmq.client.message import SendResult, SendStatus
from pocketmq.client.producer.prepare import MessagePreparer
from pocketmq.client.producer.transaction import TransactionState, commit_log_offset, send_in_transaction
from pocketmq.remoting.protocol.codes import RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.headers import EndTransactionRequestHeader
from pocketmq.remoting.protocol.message import (
    TRANSACTION_PREPARED_TYPE,
    MessageConst,
    decode_offset_msg_id,
    properties_to_string,
)

from .fakes import as_any
from .test_send_template import Capture, assert_template_is_general

GROUPS = ["PG", "组-ü", 'we"ird\\group', "%d%s%%"]


def _half(topic: str, group: str, tags: str | None, flag: int = 0) -> Message:
    """A message as send_in_transaction hands it to send."""
    msg = Message(topic, b"body", tags=tags, flag=flag)
    msg.properties[MessageConst.TRAN_MSG] = "true"
    msg.properties[MessageConst.PGROUP] = group
    return msg


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("tags", [None, "TagA", 'q"u\\o\tte', "ünï", "%d%s%%"])
@pytest.mark.parametrize(("queue_id", "opaque"), [(0, 1), (1023, 0x7FFFFFFF)])
def test_half_is_the_general_paths(group: str, tags: str | None, queue_id: int, opaque: int) -> None:
    prep = MessagePreparer(ProducerConfig(producer_group=group))
    mq = MessageQueue("Topic_%d-x", "broker-%s", queue_id)
    prep._valid_topics.add(mq.topic)
    msg = _half(mq.topic, group, tags)
    p = prep.prepare(msg)
    assert p.plain_tags is not None and p.sys_flag == TRANSACTION_PREPARED_TYPE and p.flag == 0
    assert p.props == properties_to_string({**msg.wire_properties(), MessageConst.UNIQ_KEY: p.msg_id})
    tpl = assert_template_is_general(prep, p, mq, opaque)
    # a plain message of the same queue and tags keeps its own template
    plain = prep.prepare(Message(mq.topic, b"body", tags=tags))
    assert plain.sys_flag == 0 and prep.head(plain, mq) != tpl


def test_other_shapes_take_the_general_path() -> None:
    prep = MessagePreparer(ProducerConfig(producer_group="PG"))
    prep._valid_topics.add("T")
    reordered = Message("T", b"x", properties={MessageConst.PGROUP: "PG", MessageConst.TRAN_MSG: "true"})
    other_group = _half("T", "PG2", "A")
    extra = _half("T", "PG", "A")
    extra.properties["k"] = "v"
    flagged = _half("T", "PG", "A", flag=3)
    for msg in (reordered, other_group, extra):
        p = prep.prepare(msg)
        assert p.plain_tags is None and p.sys_flag == TRANSACTION_PREPARED_TYPE
        assert p.props == properties_to_string({**msg.wire_properties(), MessageConst.UNIQ_KEY: p.msg_id})
    p = prep.prepare(flagged)
    assert p.plain_tags is None and p.flag == 3 and p.sys_flag == TRANSACTION_PREPARED_TYPE
    # validation errors stay the general path's
    bad = MessagePreparer(ProducerConfig(producer_group="P\x01G"))
    bad._valid_topics.add("T")
    with pytest.raises(MessageValidationError, match="reserved separator"):
        bad.prepare(_half("T", "P\x01G", "A"))
    odd_tags = _half("T", "PG", "A\x02B")  # not refused by the general path either
    p = prep.prepare(odd_tags)
    assert p.plain_tags is None
    assert p.props == properties_to_string({**odd_tags.wire_properties(), MessageConst.UNIQ_KEY: p.msg_id})


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize(
    ("msg_id", "tx_id"),
    [
        ("7F000001ABCD00000000000000010002", None), ("AB12", "tx42"), ("ü1", 'q"uote'), ("a b", None),
        # letters outside ASCII (their UTF-8 bytes are no ASCII letters): the general path
        ("ÄB", None), ("AB12", "tx\u00b2"), ("", None),
    ],  # fmt: skip
)
@pytest.mark.parametrize(
    ("queue_offset", "offset", "state"),
    [(0, 0, 8), (2**40, 2**62, 12), (-1, 7, 0), (5, 6, 4)],  # 4: not a state of the text table
)
async def test_end_transaction_is_the_general_header(
    group: str, msg_id: str, tx_id: str | None, queue_offset: int, offset: int, state: int
) -> None:
    cap = Capture()
    api = MQClientAPI(as_any(cap), ["ns:1"])
    end = api.end_transaction("a:1", group, queue_offset, offset, state, msg_id, tx_id or msg_id)
    # a state of no template (4) takes the general path too
    templated = all(i.isascii() and i.isalnum() for i in (msg_id, tx_id or msg_id)) and state != 4
    assert (end is None) is templated  # the template's is queued for the turn's END write
    if end is not None:
        await end
    else:
        await asyncio.sleep(0)  # the turn's END write (oneway_now)
    cmd = cap.cmd
    assert (type(cmd) is EndTransactionRequest) is templated
    cmd.opaque = 4711
    if templated:  # its shared fields are class attributes: what the general request holds
        fields = ("code", "flag", "remark", "body", "language", "version", "serialize_type")
        assert [getattr(cmd, f) for f in fields] == [
            RequestCode.END_TRANSACTION,
            2,
            None,
            None,
            LANGUAGE,
            RemotingCommand(0).version,
            0,
        ]
    header = EndTransactionRequestHeader(
        producer_group=group,
        tran_state_table_offset=queue_offset,
        commit_log_offset=offset,
        commit_or_rollback=state,
        from_transaction_check=False,
        msg_id=msg_id,
        transaction_id=tx_id or msg_id,
    )
    general = RemotingCommand.request(
        RequestCode.END_TRANSACTION, header.to_ext_fields(), language=LANGUAGE, oneway=True
    )
    general.opaque = 4711
    assert cmd.encode() == general.encode()
    fields = ("code", "flag", "remark", "body", "language", "version", "serialize_type")
    assert [getattr(cmd, f) for f in fields] == [getattr(general, f) for f in fields]
    assert end_template(group, state) is not None
    if templated:  # the group's cached templates: the three states'
        assert sorted(api._end_templates[group]) == [0, 8, 12]


async def test_rpc_hooks_turn_the_end_template_off() -> None:
    cap = Capture()
    cap.before_hooks = [lambda addr, req: None]
    api = MQClientAPI(as_any(cap), ["ns:1"])
    end = api.end_transaction("a:1", "PG", 1, 2, 8, "AB", "AB")
    assert end is not None
    await end
    assert type(cap.cmd) is RemotingCommand
    assert cap.cmd.ext_fields is not None and cap.cmd.ext_fields["commitLogOffset"] == "2"


@pytest.mark.parametrize(
    "msg_id",
    ["7F00000100002A9F0000000000000F2C", "7f00000100002a9fFFFFFFFFFFFFFFFF", "0" * 32, "AB" * 28],
)
def test_commit_log_offset_of_an_offset_msg_id(msg_id: str) -> None:
    assert commit_log_offset(msg_id) == decode_offset_msg_id(msg_id)[2]


@pytest.mark.parametrize(
    "msg_id",
    # "0A 0A ...": 32 characters that bytes.fromhex reads (it skips spaces between bytes)
    [
        "",
        "AB",
        "G" * 32,
        "0x" + "0" * 30,
        " 1" * 16,
        "1_" * 16,
        "Ａ" * 32,
        "0A " * 10 + "0A",
        "AB" * 27 + "A ",
    ],
)
def test_bad_offset_msg_ids_raise_as_before(msg_id: str) -> None:
    with pytest.raises(Exception) as expected:
        decode_offset_msg_id(msg_id)
    with pytest.raises(expected.type):
        commit_log_offset(msg_id)


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("tags", [None, "TagA", 'q"u\\o\tte', "ünï", "%d%s%%"])
@pytest.mark.parametrize("known_topic", [True, False])
def test_prepare_half_is_prepare_with_the_properties(group: str, tags: str | None, known_topic: bool) -> None:
    """``prepare_half`` (Producer.send_half's path: ``msg`` untouched) gives what ``prepare``
    gives once send_half's general path has set TRAN_MSG and PGROUP; other shapes: None."""
    prep = MessagePreparer(ProducerConfig(producer_group=group))
    mq = MessageQueue("T", "broker-a", 3)
    if known_topic:  # else prepare's general path (validate) first
        prep._valid_topics.add(mq.topic)
    msg = Message(mq.topic, b"body", tags=tags)
    p = prep.prepare_half(msg)
    assert p is not None and not msg.properties
    general = prep.prepare(_half(mq.topic, group, tags))
    general_props = general.props.replace(general.msg_id, p.msg_id)
    assert (p.topic, p.body, p.sys_flag, p.flag, p.props, p.batch, p.plain_tags) == (
        general.topic, general.body, general.sys_flag, general.flag, general_props, general.batch,
        general.plain_tags,
    )  # fmt: skip
    if p.plain_tags is not None:
        assert prep.head(p, mq) == prep.head(general, mq)
    for other in (
        Message(mq.topic, b"body", keys="k"),
        Message(mq.topic, b"body", properties={"k": "v"}),
        Message(mq.topic, b"body", tags="A\x02B"),  # prepare refuses it, the general path not
        Message(mq.topic, b"body", flag=3),
        Message(mq.topic, b"x" * 5000),  # compressed
        Message(mq.topic, b"body", wait_store_msg_ok=False),
    ):
        assert prep.prepare_half(other) is None
    bad = MessagePreparer(ProducerConfig(producer_group="P\x01G"))  # validate() refuses the group
    bad._valid_topics.add(mq.topic)
    assert bad.prepare_half(msg) is None


async def test_end_prefix_cache_keeps_the_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The END frame's prefix comes from a cache by header length, bounded: headers of many
    lengths (offsets and opaques of 1..19 digits), before and past the bound, encode as the
    general path's."""
    import pocketmq.client.api as api_mod

    def general(value: int) -> RemotingCommand:
        header = EndTransactionRequestHeader(
            producer_group="PG", tran_state_table_offset=value, commit_log_offset=value,
            commit_or_rollback=8, from_transaction_check=False, msg_id="AB12", transaction_id="AB12",
        )  # fmt: skip
        cmd = RemotingCommand.request(
            RequestCode.END_TRANSACTION, header.to_ext_fields(), language=LANGUAGE, oneway=True
        )
        cmd.opaque = value & 0x7FFFFFFF
        return cmd

    # bounded at the header of 10-digit values: the shorter ones cached, the longer packed
    bound = len(general(int("9" * 10)).encode_header()) - 8
    prefixes: list[bytes | None] = [None] * bound
    monkeypatch.setattr(api_mod, "_END_PREFIXES", prefixes)
    cap = Capture()
    api = MQClientAPI(as_any(cap), ["ns:1"])
    for rnd in range(2):  # the second round: lengths from the cache, or packed past its bound
        for digits in range(1, 20):
            value = int("9" * digits)
            assert api.end_transaction("a:1", "PG", value, value, 8, "AB12", "AB12") is None
            await asyncio.sleep(0)  # the turn's END write
            cmd = cap.cmd
            assert type(cmd) is EndTransactionRequest
            cmd.opaque = value & 0x7FFFFFFF
            expected = general(value)
            assert cmd.encode() == expected.encode(), (rnd, digits)
            hlen = len(expected.encode_header()) - 8
            assert hlen >= bound or prefixes[hlen] == expected.encode_header()[:8], (rnd, digits)
    assert 0 < sum(p is not None for p in prefixes) < 19  # both kinds were met


@pytest.mark.parametrize(
    "offset_msg_id",
    [
        "7F00000100002A9F0000000000000F2C",  # IPv4: read inline
        "7f00000100002a9fFFFFFFFFFFFFFFFF",  # a negative long, as decoded
        "AB" * 28,  # IPv6: through commit_log_offset
        "G" * 32,  # bad: raises as decode_offset_msg_id
        "0A " * 10 + "0A",  # 32 characters bytes.fromhex reads to 11 bytes: bad
    ],
)
async def test_send_in_transaction_ends_at_the_decoded_offset(offset_msg_id: str) -> None:
    """send_in_transaction's END_TRANSACTION carries decode_offset_msg_id's commit-log offset
    (its IPv4 case read inline), and a bad offset msgId raises as that decoding does."""
    cap = Capture()
    api = MQClientAPI(as_any(cap), ["ns:1"])
    instance = SimpleNamespace(
        api=api, broker_versions={"a:1": 1}, find_broker_addr_in_publish=lambda b: "a:1"
    )
    mq = MessageQueue("T", "b", 0)
    result = SendResult(SendStatus.SEND_OK, "AB12", offset_msg_id, mq, 5)

    async def send_half(msg: Message) -> SendResult:
        return result

    async def commit(msg: Message, res: SendResult) -> TransactionState:
        return TransactionState.COMMIT_MESSAGE

    producer = SimpleNamespace(group="PG", running_instance=lambda: instance, send_half=send_half)
    try:
        expected = decode_offset_msg_id(offset_msg_id)[2]
    except Exception as exc:
        with pytest.raises(type(exc)):
            await send_in_transaction(as_any(producer), Message("T", b"x"), commit)
        return
    await send_in_transaction(as_any(producer), Message("T", b"x"), commit)
    await asyncio.sleep(0)  # the turn's END write
    cmd = cap.cmd
    assert type(cmd) is EndTransactionRequest and [item[2] for item in cmd.items] == [expected]


class _Wire(Capture):
    """A remoting stand-in that encodes what oneway_now is given at once while ``open`` (taking
    ``frames`` opaques from its sequence, as the transport's does), else refuses it;
    invoke_oneway keeps the request, encoded later."""

    def __init__(self) -> None:
        self.open = True
        self.opaque = 0
        self.writes: list[bytes] = []
        self.later: list[RemotingCommand] = []

    def writable(self, addr: str) -> bool:
        return self.open

    def oneway_now(self, addr: str, cmd: RemotingCommand, frames: int = 1) -> bool:
        if self.open:
            cmd.opaque = self.opaque + 1
            self.opaque += frames
            self.writes.append(cmd.encode())
        return self.open

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        self.later.append(cmd)


def _general_end(queue_offset: int, offset: int, state: int, msg_id: str, opaque: int) -> bytes:
    header = EndTransactionRequestHeader(
        producer_group="PG", tran_state_table_offset=queue_offset, commit_log_offset=offset,
        commit_or_rollback=state, from_transaction_check=False, msg_id=msg_id, transaction_id=msg_id,
    )  # fmt: skip
    general = RemotingCommand.request(
        RequestCode.END_TRANSACTION, header.to_ext_fields(), language=LANGUAGE, oneway=True
    )
    general.opaque = opaque
    return general.encode()


async def test_ends_of_a_loop_turn_go_in_one_write() -> None:
    """A loop turn's ENDs to a broker are written together when the loop gets to the turn's
    callbacks: one oneway_now of their frames, each the general path's with the next opaque;
    with no open connection an END is a request of its own, awaited; ENDs whose connection
    closed before the turn's write go each through invoke_oneway."""
    wire = _Wire()
    api = MQClientAPI(as_any(wire), ["ns:1"])
    states = (8, 12, 0, 8)
    for i, state in enumerate(states):
        assert api.end_transaction("a:1", "PG", i, 10 * i, state, f"ID{i}", f"ID{i}") is None
    assert wire.writes == []  # not before the turn's end
    await asyncio.sleep(0)
    assert wire.writes == [b"".join(_general_end(i, 10 * i, s, f"ID{i}", i + 1) for i, s in enumerate(states))]
    assert api.end_transaction("a:1", "PG", 5, 50, 12, "ID5", "ID5") is None  # the next turn's
    await asyncio.sleep(0)
    assert wire.writes[1:] == [_general_end(5, 50, 12, "ID5", 5)]
    wire.open = False  # not connected: awaited, a request of its own
    end = api.end_transaction("a:1", "PG", 6, 60, 8, "L6", "L6")
    assert end is not None
    await end
    # queued while open, closed before the turn's write: each through invoke_oneway
    wire.open = True
    for i in (7, 8):
        assert api.end_transaction("a:1", "PG", i, 10 * i, 12, f"L{i}", f"L{i}") is None
    wire.open = False
    for _ in range(3):
        await asyncio.sleep(0)
    assert len(wire.writes) == 2 and len(wire.later) == 3
    for cmd in wire.later:
        cmd.opaque = 9
    assert [cmd.encode() for cmd in wire.later] == [
        _general_end(6, 60, 8, "L6", 9), _general_end(7, 70, 12, "L7", 9), _general_end(8, 80, 12, "L8", 9)
    ]  # fmt: skip


def test_end_frames_opaques_wrap_as_the_sequence() -> None:
    """The frames of one request take consecutive opaques, past 0x7FFFFFFF from 0, as the
    client's sequence does."""
    api = MQClientAPI(as_any(Capture()), ["ns:1"])
    tpl = api._end_templates["PG"] = end_templates("PG")
    cmd = EndTransactionRequest.__new__(EndTransactionRequest)
    cmd.flag, cmd.opaque = 2, 0x7FFFFFFF
    cmd.items = [(tpl[8], i, i, "ID", "ID") for i in range(2)]
    assert cmd.encode() == _general_end(0, 0, 8, "ID", 0x7FFFFFFF) + _general_end(1, 1, 8, "ID", 0)


async def test_end_transaction_of_a_lone_surrogate_takes_the_general_path() -> None:
    """An id that does not encode (a lone surrogate) is no template's: the general path has it,
    with what that path does of it."""
    cap = Capture()
    api = MQClientAPI(as_any(cap), ["ns:1"])
    for ids in (("\ud800", "\ud800"), ("AB12", "\udfff")):
        end = api.end_transaction("a:1", "PG", 1, 2, 8, *ids)
        assert end is not None  # not written at once: the general path's coroutine
        await end
        assert type(cap.cmd) is not EndTransactionRequest
