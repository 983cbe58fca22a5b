"""SEND_OK replies decoded typed (``remoting.protocol.send_ok``): the same command as the general
decode, or the general decode itself for what the struct refuses; the client's send result is
the same either way."""

from __future__ import annotations

from typing import Any

import pytest

from pocketmq.client.api import MQClientAPI
from pocketmq.client.message import MessageQueue
from pocketmq.remoting.protocol import header_json
from pocketmq.remoting.protocol.command import RemotingCommand, reply_template
from pocketmq.remoting.protocol.frame import FrameDecoder
from pocketmq.remoting.protocol.send_ok import SendOkReply
from tests.broker.transaction.test_end_typed import frame as end_frame

FIELDS = {
    "MSG_REGION": "DefaultRegion",
    "TRACE_ON": "true",
    "msgId": "7F00000100002A9F0000000000001F40",
    "queueId": "3",
    "queueOffset": "1234",
}


def frame(ext: dict[str, Any] | None, sort: bool = False, language: str = "JAVA", **head: Any) -> bytes:
    """A SUCCESS reply frame with the header ``ext`` (test_end_typed's frame, code and flag replaced)."""
    return end_frame(ext, sort, language, **{"code": 0, "flag": 1, **head})


CASES = [
    (FIELDS, True),
    ({**FIELDS, "transactionId": "T"}, True),
    ({**FIELDS, "transactionId": None}, True),  # (null in the dict path: absent, read as None)
    ({**FIELDS, "msgId": 'a"b\\u00e9\\n'}, True),
    ({**FIELDS, "TRACE_ON": "false", "MSG_REGION": "r1"}, True),
    ({**FIELDS, "AccessKey": "ak", "Signature": "s"}, False),
    ({**FIELDS, "queueOffset": 1234}, True),  # (lax: the general path coerces it to the same)
    ({**FIELDS, "queueOffset": "01234"}, False),  # (a text int() reads, msgspec not: the general path)
    ({**FIELDS, "queueId": "+3"}, False),
    ({k: v for k, v in FIELDS.items() if k != "queueOffset"}, False),
    ({**FIELDS, "other": "x"}, False),
    ({"MSG_REGION": "DefaultRegion"}, False),
    ({**FIELDS, "TRACE_ON": "TRUE"}, False),  # (not Java's String.valueOf(boolean): the general path)
    ({**FIELDS, "TRACE_ON": ""}, False),
]


@pytest.mark.parametrize("sort", [False, True])
@pytest.mark.parametrize(("ext", "typed"), CASES)
def test_the_typed_decode_is_the_general_one(ext: Any, typed: bool, sort: bool) -> None:
    data = frame(ext, sort)
    for feed in (data, data + data):  # one frame per read, and the split loop
        cmds = FrameDecoder().feed(feed)
        for cmd in cmds:
            assert (type(cmd) is SendOkReply) == typed
            general = header_json.decode_header(data[8:])
            got = (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields)
            assert got == general
            assert cmd.body is None and cmd.serialize_type == 0


def test_an_unknown_language_a_remark_and_another_code() -> None:
    (cmd,) = FrameDecoder().feed(frame(FIELDS, language="KLINGON"))
    assert type(cmd) is not SendOkReply
    data = frame(FIELDS, remark="r")  # (no broker writes one: the general path, the same values)
    (cmd,) = FrameDecoder().feed(data)
    assert type(cmd) is not SendOkReply and cmd.remark == "r"
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields) == (
        header_json.decode_header(data[8:])
    )
    (cmd,) = FrameDecoder().feed(frame(FIELDS, remark=None))  # (null: as absent)
    assert type(cmd) is SendOkReply and cmd.remark is None
    (cmd,) = FrameDecoder().feed(frame(FIELDS, code=10))  # FLUSH_DISK_TIMEOUT: the general path
    assert type(cmd) is not SendOkReply and cmd.code == 10


def test_a_reply_with_a_body_takes_the_general_path() -> None:
    """SendOkReply's body is a class attribute (None): a SEND_OK with a body (no broker sends
    one) is a plain command with its body."""
    data = frame(FIELDS)
    body = b"xyz"
    (cmd,) = FrameDecoder().feed(
        (int.from_bytes(data[:4], "big") + len(body)).to_bytes(4, "big") + data[4:] + body
    )
    assert type(cmd) is not SendOkReply and cmd.body == body and cmd.ext_fields == FIELDS


def test_the_brokers_rendered_reply_is_decoded_typed() -> None:
    """The broker's SEND_OK head (``reply_template``, as ``send._reply`` fills it)."""
    p0, p1, p2, p3, p4 = reply_template({**FIELDS, "msgId": None, "queueId": None, "queueOffset": None})  # type: ignore[misc]
    head = f"{p0}{FIELDS['msgId']}{p1}3{p2}1234{p3}77{p4}".encode()
    data = (len(head) + 4).to_bytes(4, "big") + len(head).to_bytes(4, "big") + head
    (cmd,) = FrameDecoder().feed(data)
    assert type(cmd) is SendOkReply and cmd.opaque == 77 and cmd.ext_fields == FIELDS


@pytest.mark.parametrize(
    ("ext", "typed"), CASES[:5] + CASES[-2:] + [({k: v for k, v in FIELDS.items() if k != "queueOffset"}, False)]
)
@pytest.mark.parametrize("queue_id", [3, 5])
def test_the_send_result_is_the_same(ext: dict[str, Any], typed: bool, queue_id: int) -> None:
    (cmd,) = FrameDecoder().feed(frame(ext))
    assert (type(cmd) is SendOkReply) == typed
    assert_same_send_result(cmd, ext, queue_id)


def assert_same_send_result(cmd: RemotingCommand, ext: dict[str, Any], queue_id: int) -> Any:
    """``cmd``'s send result (returned) is the general decode's of the reply with ``ext``,
    field by field, each of the same type."""
    general = RemotingCommand(0, 9, 1, None, header_json.decode_header(frame(ext)[8:])[6])
    mq = MessageQueue("T", "b", queue_id)
    got = MQClientAPI.process_send_response(mq, cmd, "U", "addr")
    want = MQClientAPI.process_send_response(mq, general, "U", "addr")
    for name in ("send_status", "msg_id", "offset_msg_id", "message_queue", "queue_offset",
                 "transaction_id", "region_id", "trace_on"):  # fmt: skip
        assert getattr(got, name) == getattr(want, name), name
        assert type(getattr(got, name)) is type(getattr(want, name)), name
    return got


@pytest.mark.parametrize("language", sorted(header_json.LANGUAGE_BY_NAME))
def test_java_is_decoded_typed_every_other_language_by_the_general_path(language: str) -> None:
    """SendOkReply's language is a class attribute, JAVA (what every broker writes): a reply of
    JAVA is read typed, any other known language by the general path; each gives the code the
    general path gives, and the same send result."""
    data = frame(FIELDS, True, language)
    (cmd,) = FrameDecoder().feed(data)
    assert (type(cmd) is SendOkReply) == (language == "JAVA")
    assert cmd.language == header_json.decode_header(data[8:])[1] == header_json.LANGUAGE_BY_NAME[language]
    assert type(cmd.language) is int
    if language == "JAVA":
        assert cmd.fields.TRACE_ON == "true"
    assert_same_send_result(cmd, FIELDS, 3)


def test_the_class_held_fields_cannot_be_set() -> None:
    """code, language, remark, body and serialize_type are SendOkReply's class attributes (the
    values of every reply it is made for): read-only on an instance."""
    (cmd,) = FrameDecoder().feed(frame(FIELDS))
    assert type(cmd) is SendOkReply
    for name in ("code", "language", "remark", "body", "serialize_type"):
        with pytest.raises(AttributeError):
            setattr(cmd, name, getattr(cmd, name))


@pytest.mark.parametrize(
    ("head", "typed"),
    [
        ({"serializeTypeCurrentRPC": "JSON"}, True),
        ({"serializeTypeCurrentRPC": None}, True),
        ({"serializeTypeCurrentRPC": "ROCKETMQ"}, False),  # (not a JSON header's: the general path)
        ({"opaque": 2147483647, "version": 1, "flag": 3}, True),
    ],
)
@pytest.mark.parametrize("sort", [False, True])
def test_the_header_fields_in_any_order(head: dict[str, Any], typed: bool, sort: bool) -> None:
    """The typed header's fields are in fastjson's (sorted) order; any other order and the
    general path's values read the same."""
    data = frame(FIELDS, sort, **head)
    (cmd,) = FrameDecoder().feed(data)
    assert (type(cmd) is SendOkReply) == typed
    got = (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields)
    assert got == header_json.decode_header(data[8:])
    general = RemotingCommand(0, 9, 1, None, header_json.decode_header(data[8:])[6])
    mq = MessageQueue("T", "b", 3)
    result = MQClientAPI.process_send_response(mq, cmd, "U", "addr")
    want = MQClientAPI.process_send_response(mq, general, "U", "addr")
    assert (result.offset_msg_id, result.queue_offset, result.trace_on, result.region_id) == (
        want.offset_msg_id, want.queue_offset, want.trace_on, want.region_id
    )  # fmt: skip


@pytest.mark.parametrize(
    "ext",
    [
        {**FIELDS, "queueId": "5"},
        {**FIELDS, "queueOffset": "0"},
        {**FIELDS, "queueOffset": "9223372036854775807"},
        {**FIELDS, "queueOffset": "-1"},
        {**FIELDS, "queueOffset": 1234, "queueId": 3},  # (numbers: the general path coerces them)
        {**FIELDS, "queueOffset": "007"},  # (the general path's)
        {**FIELDS, "queueId": " 3"},  # (likewise)
    ],
)
@pytest.mark.parametrize("queue_id", [3, 5, 1023, 1024])
def test_the_ids_read_as_ints_give_the_same_send_result(ext: dict[str, Any], queue_id: int) -> None:
    """``queueId`` and ``queueOffset`` decoded as ints (lax mode): the send result is the
    general path's, its fields' types included (the queue's id an int, the offset an int)."""
    (cmd,) = FrameDecoder().feed(frame(ext))
    got = assert_same_send_result(cmd, ext, queue_id)
    assert type(got.message_queue.queue_id) is int and type(got.queue_offset) is int


def test_what_lax_mode_reads_that_the_general_path_does_not() -> None:
    """The lax decode's wider acceptance (module docstring), pinned: a quoted opaque, flag or
    version is its number; an id's text in exponent form is its value (no broker writes these)."""
    (cmd,) = FrameDecoder().feed(frame(FIELDS, opaque="77", flag="1", version="409"))
    assert type(cmd) is SendOkReply and (cmd.opaque, cmd.flag, cmd.version) == (77, 1, 409)
    (cmd,) = FrameDecoder().feed(frame({**FIELDS, "queueOffset": "1e3"}))
    assert type(cmd) is SendOkReply and cmd.fields.queueOffset == 1000


def test_a_typed_command_is_made_without_arguments_and_filled() -> None:
    """send_ok_command makes its commands by a bare class call (object's __init__): every field
    the general path's command has is set on the one decoded (or held by its class)."""
    with pytest.raises(TypeError):
        SendOkReply(0)  # type: ignore[call-arg]
    data = frame(FIELDS, opaque=5, version=77)
    (cmd,) = FrameDecoder().feed(data)
    assert type(cmd) is SendOkReply
    general = RemotingCommand(0, 9, 1, None, None)
    for name in RemotingCommand.__slots__:
        getattr(cmd, name)  # (set: no AttributeError)
    code, language, version, opaque, flag, remark, ext = header_json.decode_header(data[8:])
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark) == (
        code, language, version, opaque, flag, remark
    )  # fmt: skip
    assert cmd.ext_fields == ext and cmd.body is None and cmd.serialize_type == general.serialize_type
