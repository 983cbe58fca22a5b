"""FrameDecoder and command codec: the h11 triad, golden frames, and hostile input."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.remoting.protocol import header_binary, header_json
from pocketmq.remoting.protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from pocketmq.remoting.protocol.command import RemotingCommand, decode_command
from pocketmq.remoting.protocol.errors import (
    FrameError,
    FrameTooLargeError,
    HeaderDecodeError,
    LocalProtocolError,
    ProtocolError,
)
from pocketmq.remoting.protocol.frame import FrameDecoder

# The Java broker's reply to a send (extFields in the order a Java broker writes them).
JAVA_SEND_REPLY_HEADER = (
    b'{"code":0,"extFields":{"queueId":"1","TRACE_ON":"true","MSG_REGION":"DefaultRegion",'
    b'"msgId":"0A0A0A0A00002A9F0000000000000F3C","queueOffset":"7"},"flag":1,"language":"JAVA",'
    b'"opaque":12,"serializeTypeCurrentRPC":"JSON","version":409}'
)


def frame_of(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return (
        struct.pack(">ii", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body
    )


def sample_commands() -> list[RemotingCommand]:
    return [
        RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, 1, 0, None, {"topic": "TopicTest"}),
        RemotingCommand(ResponseCode.SUCCESS, 2, 1, "ok", {"msgId": "AB", "queueId": "3"}, b"\x00\x01body"),
        RemotingCommand(
            RequestCode.SEND_MESSAGE_V2, 3, 0, None, {"a": "PG", "b": "T"}, b"x" * 1000, LanguageCode.CPP, 333
        ),
        RemotingCommand(
            RequestCode.HEART_BEAT, 4, 2, None, None, None, serialize_type=SerializeType.ROCKETMQ
        ),
        RemotingCommand(
            ResponseCode.SYSTEM_ERROR, 5, 1, "ünïcode remark", {"k": "v\u0001w"}, b"", serialize_type=1
        ),
    ]


def same(a: RemotingCommand, b: RemotingCommand) -> None:
    assert (a.code, a.opaque, a.flag, a.remark, a.language, a.version, a.serialize_type) == (
        b.code,
        b.opaque,
        b.flag,
        b.remark,
        b.language,
        b.version,
        b.serialize_type,
    )
    assert (a.ext_fields or None) == (b.ext_fields or None)
    assert (a.body or None) == (b.body or None)


# ------------------------------------------------------------------------------- the triad


def test_decode_whole_buffer() -> None:
    cmds = sample_commands()
    stream = b"".join(c.encode() for c in cmds)
    out = FrameDecoder().feed(stream)
    assert len(out) == len(cmds)
    for got, want in zip(out, cmds, strict=True):
        same(got, want)


def test_decode_one_byte_at_a_time() -> None:
    cmds = sample_commands()
    stream = b"".join(c.encode() for c in cmds)
    dec = FrameDecoder()
    out: list[RemotingCommand] = []
    for i in range(len(stream)):
        out += dec.feed(stream[i : i + 1])
    assert dec.buffered == 0
    for got, want in zip(out, cmds, strict=True):
        same(got, want)


def test_trailing_bytes_stay_unconsumed() -> None:
    cmd = sample_commands()[1]
    data = cmd.encode()
    dec = FrameDecoder()
    out = dec.feed(data + data[:7])
    assert len(out) == 1
    same(out[0], cmd)
    assert dec.buffered == 7 and dec.held == data[:7]  # (held: the buffer itself, for per-read checks)
    assert len(dec.feed(data[7:])) == 1
    assert dec.buffered == 0 and not dec.held


def test_feed_head_decodes_at_most_its_frames_and_leaves_the_rest_unbuffered() -> None:
    """``feed_head`` (a large read: ``RemotingConnection.data_received``): its first ``most``
    frames decoded, ``stopped`` where the rest starts (nothing buffered); fewer, or exactly
    ``most``, are all taken (``stopped`` 0), a trailing partial frame buffered as ``feed`` does;
    a skipped frame (a bad header) counts."""
    cmds = sample_commands()
    frames = [c.encode() for c in cmds]
    stream = b"".join(frames)
    for most in range(1, len(cmds)):
        dec = FrameDecoder()
        out = dec.feed_head(stream + frames[0][:5], most)
        assert [c.opaque for c in out] == [c.opaque for c in cmds[:most]]
        assert dec.stopped == len(b"".join(frames[:most])) and dec.buffered == 0
        for got, want in zip(out, cmds, strict=False):
            same(got, want)
    for tail in (b"", frames[0][:3], frames[0][:11]):
        dec = FrameDecoder()
        out = dec.feed_head(stream + tail, len(cmds))
        assert len(out) == len(cmds) and dec.stopped == (len(stream) if tail else 0)
        assert dec.buffered == 0
        dec = FrameDecoder()
        assert len(dec.feed_head(stream + tail, len(cmds) + 1)) == len(cmds)
        assert dec.stopped == 0 and dec.held == tail  # (a partial frame: buffered)
    bad = frame_of(b'{"code":10,"opaque":7,"flag":0,"language":"JAVA","version":1,"extFields":[]}')
    dec = FrameDecoder()
    out = dec.feed_head(bad + stream, 2)
    assert [c.opaque for c in out] == [cmds[0].opaque] and len(dec.errors) == 1
    assert dec.stopped == len(bad) + len(frames[0])


# ----------------------------------------------------------------------------- golden frames


def test_java_send_reply_golden() -> None:
    frame = frame_of(JAVA_SEND_REPLY_HEADER)
    (cmd,) = FrameDecoder().feed(frame)
    assert cmd.code == 0 and cmd.opaque == 12 and cmd.is_response
    assert cmd.language == LanguageCode.JAVA and cmd.version == 409
    assert cmd.ext_fields == {
        "queueId": "1",
        "TRACE_ON": "true",
        "MSG_REGION": "DefaultRegion",
        "msgId": "0A0A0A0A00002A9F0000000000000F3C",
        "queueOffset": "7",
    }
    # Re-encoding is byte-stable: fastjson key order, every value a string.
    assert cmd.encode() == frame_of(cmd.encode_header()[8:])
    again = FrameDecoder().feed(cmd.encode())[0]
    assert again.encode() == cmd.encode()


def test_emitted_header_is_fastjson_shaped() -> None:
    reply = RemotingCommand.response_to(
        RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=9), ext_fields={"msgId": "X", "queueOffset": "7"}
    )
    header = json.loads(reply.encode_header()[8:])
    assert list(header) == sorted(header)
    assert header["language"] == "JAVA" and header["version"] == 409 and header["flag"] == 1
    assert all(isinstance(v, str) for v in header["extFields"].values())


def test_cpp_and_alions_value_quirks() -> None:
    # C++: numbers in extFields, empty credentials, trailing newline; ali-ons: booleans.
    header = (
        b'{"code":11,"extFields":{"queueId":0,"maxMsgNums":32,"sysFlag":2,"commit":true,"none":null,'
        b'"Signature":"","AccessKey":"","OnsChannel":"","topic":"T"},"flag":0,"language":"CPP",'
        b'"opaque":5,"remark":"","version":333}\n'
    )
    (cmd,) = FrameDecoder().feed(frame_of(header))
    assert cmd.ext_fields == {
        "queueId": "0",
        "maxMsgNums": "32",
        "sysFlag": "2",
        "commit": "true",
        "topic": "T",
    }
    assert cmd.language == LanguageCode.CPP and cmd.version == 333


def test_reply_uses_request_serialize_type() -> None:
    req = RemotingCommand(RequestCode.HEART_BEAT, 77, serialize_type=SerializeType.ROCKETMQ)
    reply = RemotingCommand.response_to(req, remark="r", ext_fields={"a": "b"})
    data = reply.encode()
    assert data[4] == SerializeType.ROCKETMQ
    same(decode_command(data[4:]), reply)


@pytest.mark.parametrize("use_orjson", [True, False])
def test_json_codec_both_backends(use_orjson: bool) -> None:
    loads = None if use_orjson else header_json._std_loads
    dumps = None if use_orjson else header_json._std_dumps
    raw = header_json.encode_header(10, 0, 409, 3, 0, "é", {"b": "1", "a": "x"}, 0, dumps)
    assert header_json.decode_header(raw, loads) == (10, 0, 409, 3, 0, "é", {"b": "1", "a": "x"})


# ------------------------------------------------------------------------------- bad input


def broken_by(data: bytes, dec: FrameDecoder | None = None) -> LocalProtocolError:
    """Feed ``data`` that breaks the stream: nothing is returned, the error is recorded last."""
    dec = dec or FrameDecoder()
    assert dec.feed(data) == []
    assert dec.broken is not None and dec.errors[-1] is dec.broken
    assert dec.buffered == 0
    return dec.broken


def rejected_by(data: bytes) -> HeaderDecodeError:
    """Feed ``data`` holding one bad header in an intact frame: skipped, recorded, not fatal."""
    dec = FrameDecoder()
    assert dec.feed(data) == []
    assert dec.broken is None
    (err,) = dec.errors
    assert isinstance(err, HeaderDecodeError)
    return err


def test_two_gib_length_prefix_fails_without_allocating() -> None:
    dec = FrameDecoder()
    assert isinstance(broken_by(struct.pack(">i", 0x7FFFFFFF) + b"abc", dec), FrameTooLargeError)
    # stays broken: the stream cannot be resynchronised
    assert dec.feed(b"more") == [] and isinstance(dec.broken, FrameError) and len(dec.errors) == 1


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 3])
def test_negative_or_tiny_length(length: int) -> None:
    assert isinstance(broken_by(struct.pack(">i", length) + b"\x00" * 8), FrameError)


def test_configurable_max_frame() -> None:
    data = RemotingCommand(1, body=b"x" * 2000).encode()
    assert isinstance(broken_by(data, FrameDecoder(max_frame_size=1024)), FrameTooLargeError)
    assert len(FrameDecoder(max_frame_size=4096).feed(data)) == 1


def test_header_length_beyond_frame() -> None:
    frame = struct.pack(">ii", 8, 1000) + b"{}{}"
    err = broken_by(frame)
    assert isinstance(err, HeaderDecodeError) and err.opaque is None


@pytest.mark.parametrize(
    "header",
    [b"\xff\xfe not utf8", b"{not json", b"[1,2]", b'"str"'],
)
def test_invalid_json_headers(header: bytes) -> None:
    # no readable opaque: nobody to answer, the peer speaks something else
    err = broken_by(frame_of(header))
    assert isinstance(err, HeaderDecodeError) and err.opaque is None


@pytest.mark.parametrize(("header", "opaque"), [(b"{}", 0), (b'{"code":"x","opaque":1}', 1)])
def test_invalid_json_headers_with_an_opaque(header: bytes, opaque: int) -> None:
    # an object without a valid code: answered under its opaque (RocketMQ's default is 0)
    assert rejected_by(frame_of(header)).opaque == opaque


def test_readable_opaque_is_reported_and_stream_continues() -> None:
    bad = frame_of(b'{"code":"oops","opaque":42}')
    good = RemotingCommand(RequestCode.HEART_BEAT, 43).encode()
    first = RemotingCommand(RequestCode.HEART_BEAT, 41).encode()
    dec = FrameDecoder()
    assert [c.opaque for c in dec.feed(first + bad + good)] == [41, 43]
    (err,) = dec.errors
    assert isinstance(err, HeaderDecodeError) and err.opaque == 42
    assert dec.broken is None and dec.buffered == 0


def test_whole_frames_before_broken_framing_are_returned() -> None:
    first = RemotingCommand(RequestCode.HEART_BEAT, 41).encode()
    dec = FrameDecoder()
    assert [c.opaque for c in dec.feed(first + struct.pack(">ii", -8, 0))] == [41]
    assert isinstance(dec.broken, FrameError) and dec.errors == [dec.broken]
    assert dec.buffered == 0 and dec.feed(first) == []


def test_too_many_ext_fields_is_rejected_with_opaque() -> None:
    fields = ",".join(f'"k{i}":"v"' for i in range(5_000))
    header = b'{"code":10,"opaque":7,"extFields":{' + fields.encode() + b"}}"
    assert rejected_by(frame_of(header)).opaque == 7


def test_header_bomb_is_refused_from_its_first_eight_bytes() -> None:
    # a half-million-field header (6 MB): refused from the header-length word, before the
    # header's bytes arrive, so it is never buffered or parsed
    fields = ",".join(f'"k{i}":"v"' for i in range(500_000))
    frame = frame_of(b'{"code":10,"opaque":7,"extFields":{' + fields.encode() + b"}}")
    err = broken_by(frame[:8])
    assert isinstance(err, FrameTooLargeError) and "header length" in str(err)
    # split inside the header-length word: still refused once it is whole
    dec = FrameDecoder()
    assert dec.feed(frame[:6]) == [] and dec.broken is None
    broken_by(frame[6:64], dec)


def test_unknown_serialize_type() -> None:
    assert isinstance(broken_by(frame_of(b"{}", serialize_type=5)), HeaderDecodeError)


def test_truncated_binary_headers() -> None:
    good = RemotingCommand(10, 1, 0, "remark", {"key": "value"}, serialize_type=1).encode()
    header_len = struct.unpack_from(">i", good, 4)[0] & 0xFFFFFF
    header = good[8 : 8 + header_len]
    for cut in range(len(header)):
        with pytest.raises(HeaderDecodeError):
            decode_command(struct.pack(">i", (1 << 24) | cut) + header[:cut])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_random_bytes_record_only_protocol_errors(data: bytes) -> None:
    dec = FrameDecoder(max_frame_size=64 * 1024)
    dec.feed(data)  # never raises for what the peer sent
    assert all(isinstance(err, ProtocolError) for err in dec.errors)
    assert dec.broken is None or dec.errors[-1] is dec.broken
    assert dec.buffered <= len(data)


@settings(max_examples=200, deadline=None)
@given(
    code=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    remark=st.none() | st.text(max_size=50),
    ext=st.none()
    | st.dictionaries(st.text(min_size=1, max_size=10), st.text(min_size=1, max_size=20), max_size=5),
    body=st.binary(max_size=100),
    stype=st.sampled_from([0, 1]),
)
def test_roundtrip_property(
    code: int, opaque: int, remark: str | None, ext: dict[str, str] | None, body: bytes, stype: int
) -> None:
    for key in ("Signature", "AccessKey", "OnsChannel"):
        if ext and ext.get(key) == "":
            del ext[key]
    cmd = RemotingCommand(code, opaque, 0, remark or None, ext or None, body or None, serialize_type=stype)
    (got,) = FrameDecoder().feed(cmd.encode())
    same(got, cmd)


@pytest.mark.parametrize("ext", [None, {}, {"b": "1", "a": 'é\u0001"\\\n'}])
@pytest.mark.parametrize("remark", [None, "", 'quote " and ünï'])
@pytest.mark.parametrize("language", [LanguageCode.JAVA, LanguageCode.PYTHON, 99])
@pytest.mark.parametrize("stype", [0, 1, 5])
def test_template_encoder_matches_the_dict_encoder(
    ext: dict[str, str] | None, remark: str | None, language: int, stype: int
) -> None:
    # The fast path renders the fixed keys from a template; it must be byte-identical to
    # dumping the whole header object (what fastjson, and our golden frames, look like).
    args = (RequestCode.SEND_MESSAGE_V2, language, 409, -(2**31), 3, remark, ext, stype)
    fast = header_json.encode_header(*args)
    assert fast == header_json.encode_header(*args, dumps=header_json._dumps)
    assert json.loads(fast) == json.loads(header_json.encode_header(*args, dumps=header_json._std_dumps))


@pytest.mark.parametrize(
    ("header", "want"),
    [
        # only code and opaque: every other key takes its default (the checked path)
        (b'{"code":10,"opaque":7}', (10, LanguageCode.JAVA, 0, 7, 0, None, None)),
        # a language ordinal instead of its name
        (b'{"code":10,"opaque":7,"flag":0,"version":1,"language":1}', (10, 1, 1, 7, 0, None, None)),
        # an unknown language name
        (
            b'{"code":1,"opaque":2,"flag":1,"version":3,"language":"COBOL"}',
            (1, LanguageCode.OTHER, 3, 2, 1, None, None),
        ),
        # a non-empty credential is kept
        (
            b'{"code":1,"opaque":2,"flag":0,"version":3,"language":"CPP","extFields":{"AccessKey":"ak"}}',
            (1, LanguageCode.CPP, 3, 2, 0, None, {"AccessKey": "ak"}),
        ),
    ],
)
def test_headers_off_the_fast_path(header: bytes, want: tuple[object, ...]) -> None:
    assert header_json.decode_header(header) == want
    assert header_json.decode_header(header, header_json._std_loads) == want


@pytest.mark.parametrize(
    "header",
    [
        b'{"code":true,"opaque":1,"flag":0,"version":1,"language":"JAVA"}',
        b'{"code":1,"opaque":1,"flag":false,"version":1,"language":"JAVA"}',
        b'{"code":1,"opaque":1,"flag":0,"version":1,"language":"JAVA","remark":5}',
        b'{"code":1,"opaque":1,"flag":0,"version":1,"language":"JAVA","extFields":[1]}',
        b'{"code":2147483648,"opaque":1,"flag":0,"version":1,"language":"JAVA"}',
    ],
)
def test_bad_types_are_rejected_with_the_opaque(header: bytes) -> None:
    with pytest.raises(HeaderDecodeError) as info:
        header_json.decode_header(header)
    assert info.value.opaque == 1


def test_frames_split_across_reads_at_every_offset() -> None:
    # The decoder cuts frames straight out of a read when nothing is buffered and keeps only
    # a partial tail: split a stream of frames at every position, in two reads.
    stream = b"".join(c.encode() for c in sample_commands())
    for cut in range(len(stream) + 1):
        dec = FrameDecoder()
        got = dec.feed(stream[:cut]) + dec.feed(stream[cut:])
        assert dec.buffered == 0
        for a, b in zip(got, sample_commands(), strict=True):
            same(a, b)


# -------------------------------------------------------- custom headers (generated parsers)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.integers(-(2**64), 2**64).map(str),
        st.text(alphabet="0123456789_-+ ١٢x\t", max_size=22),
    )
)
def test_generated_int_parsing_agrees_with_the_checked_parser(raw: str) -> None:
    # The generated parsers try int() first and fall back to the checked parser: the outcome
    # (value or HeaderFieldError) must be the checked parser's, for int32 and int64 fields.
    from pocketmq.remoting.protocol.errors import HeaderFieldError
    from pocketmq.remoting.protocol.header_codec import _generic_parse
    from pocketmq.remoting.protocol.headers import PullMessageRequestHeader

    ext = {"consumerGroup": "G", "topic": "T", "queueId": raw, "queueOffset": raw, "maxMsgNums": "32",
           "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "15000"}  # fmt: skip
    try:
        want: object = _generic_parse(PullMessageRequestHeader, ext, v2=False)
    except HeaderFieldError as exc:
        want = str(exc)
    try:
        got: object = PullMessageRequestHeader.from_ext_fields(ext)
    except HeaderFieldError as exc:
        got = str(exc)
    assert got == want


@pytest.mark.parametrize("ext", [None, {}, {"b": "1", "a": 'é\u0001"\\\n'}])
@pytest.mark.parametrize("remark", [None, "", "ok"])
@pytest.mark.parametrize("language", [LanguageCode.JAVA, LanguageCode.PYTHON, 99])
@pytest.mark.parametrize("stype", [0, 1])
def test_command_encoder_matches_the_header_codec(
    ext: dict[str, str] | None, remark: str | None, language: int, stype: int
) -> None:
    # RemotingCommand.encode_header renders its common case (JSON, no remark) inline from the
    # codec's templates: the bytes must be what the codec itself produces.
    cmd = RemotingCommand(
        RequestCode.SEND_MESSAGE_V2, 2**31 - 1, 1, remark, ext, b"body", language, 409, stype
    )
    head = cmd.encode_header()
    total, word = struct.unpack_from(">ii", head)
    header = head[8:]
    assert (total, word) == (4 + len(header) + 4, (stype << 24) | len(header))
    if stype == 0:
        assert header == header_json.encode_header(
            RequestCode.SEND_MESSAGE_V2, language, 409, 2**31 - 1, 1, remark, ext
        )
    (got,) = FrameDecoder().feed(head + b"body")
    if stype == 0 and language == 99:  # JSON names the language: an unknown one reads back as OTHER
        cmd.language = LanguageCode.OTHER
    if stype == 1 and remark == "":  # the binary header has no empty remark, as in Java
        cmd.remark = None
    same(got, cmd)


def test_partial_frame_completed_by_a_read_that_carries_a_bad_header() -> None:
    good = RemotingCommand(RequestCode.SEND_MESSAGE, 1, body=b"a" * 300).encode()
    bad = frame_of(b'{"code":1,"opaque":42,"flag":0,"version":1,"language":"JAVA","remark":5}', b"zz")
    after = RemotingCommand(RequestCode.SEND_MESSAGE, 3, body=b"c").encode()
    dec = FrameDecoder()
    # the first read ends inside the bad frame; the second completes it and carries the next
    assert [c.opaque for c in dec.feed(good + bad[:20])] == [1]
    assert [c.opaque for c in dec.feed(bad[20:] + after)] == [3]
    (err,) = dec.errors
    assert isinstance(err, HeaderDecodeError) and err.opaque == 42
    dec.errors.clear()  # what the transport does once it has answered
    assert dec.buffered == 0
    # and when the partial frame is good, the frames after it come straight from the read
    assert [c.opaque for c in dec.feed(good[:50])] == []
    assert [c.opaque for c in dec.feed(good[50:] + after + good[:7])] == [1, 3]
    assert dec.buffered == 7


def test_oversize_prefix_behind_a_bad_header_fails_in_the_same_read() -> None:
    # A bad header does not stop the scan, so the length behind it is checked at once:
    # the claim is rejected, never awaited.
    bad = frame_of(b'{"code":1,"opaque":42,"remark":5}')
    dec = FrameDecoder()
    assert dec.feed(bad + struct.pack(">ii", 2**31 - 1, 0)) == []
    first, second = dec.errors
    assert isinstance(first, HeaderDecodeError) and first.opaque == 42
    assert isinstance(second, FrameTooLargeError) and dec.broken is second
    assert dec.buffered == 0
    assert dec.feed(b"x" * 10) == [] and dec.feed(b"") == []
    assert dec.buffered == 0 and dec.errors == [first, second]


def test_header_template_cache_stays_bounded_and_exact() -> None:
    from pocketmq.remoting.protocol import command

    for code in range(command._MAX_TEMPLATES + 10):
        cmd = RemotingCommand(code, code * 7, 1, None, {"k": "%d%b"} if code % 2 else None)
        assert cmd.encode_header()[8:] == header_json.encode_header(
            code, cmd.language, cmd.version, cmd.opaque, 1, None, cmd.ext_fields
        )
        assert len(command._json_templates) <= command._MAX_TEMPLATES


def test_frames_after_a_bad_header_come_in_order() -> None:
    # The frames after a bad header come from the same read; a partial one is completed by the
    # next read as usual.
    bad = frame_of(b'{"code":1,"opaque":42,"remark":5}')
    frames = [RemotingCommand(RequestCode.SEND_MESSAGE, i, body=b"b" * i).encode() for i in range(1, 5)]
    dec = FrameDecoder()
    assert [c.opaque for c in dec.feed(bad + frames[0] + frames[1] + frames[2][:5])] == [1, 2]
    assert [c.opaque for c in dec.feed(frames[2][5:] + frames[3])] == [3, 4]
    assert [type(e) for e in dec.errors] == [HeaderDecodeError] and dec.broken is None
    assert dec.buffered == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2000), max_size=8))
def test_frames_split_into_many_reads(cuts: list[int]) -> None:
    # Partial frames completed from the next read, several frames per read, reads smaller
    # than a length word: every split of the stream decodes to the same commands.
    stream = b"".join(c.encode() for c in sample_commands()) * 2
    points = sorted({min(c, len(stream)) for c in cuts})
    dec = FrameDecoder()
    got: list[RemotingCommand] = []
    start = 0
    for point in [*points, len(stream)]:
        got += dec.feed(stream[start:point])
        start = point
    assert dec.buffered == 0
    for a, b in zip(got, sample_commands() * 2, strict=True):
        same(a, b)


_JSON_SCALARS = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=5)


@settings(max_examples=300, deadline=None)
@given(
    obj=st.dictionaries(
        st.sampled_from(["code", "opaque", "flag", "version", "language", "remark", "extFields", "x"]),
        _JSON_SCALARS | st.dictionaries(st.sampled_from(["a", "Signature", "AccessKey"]), _JSON_SCALARS),
    ),
    body=st.binary(max_size=8),
)
def test_single_frame_read_decodes_as_inside_a_longer_read(obj: dict[str, object], body: bytes) -> None:
    """A read of exactly one frame (``feed``'s shortcut) gives the commands and errors of the loop."""
    frame = frame_of(json.dumps(obj).encode(), body)
    lead = RemotingCommand(RequestCode.HEART_BEAT, 1).encode()
    alone, inside = FrameDecoder(), FrameDecoder()
    got_alone = alone.feed(frame)
    got_inside = inside.feed(lead + frame)[1:]
    fields = (
        "code",
        "opaque",
        "flag",
        "remark",
        "ext_fields",
        "body",
        "language",
        "version",
        "serialize_type",
    )
    assert [[getattr(c, f) for f in fields] for c in got_alone] == [
        [getattr(c, f) for f in fields] for c in got_inside
    ]
    assert [(type(e), str(e), getattr(e, "opaque", None)) for e in alone.errors] == [
        (type(e), str(e), getattr(e, "opaque", None)) for e in inside.errors
    ]


def _reference_binary_header(code: int, opaque: int, remark: str | None, ext: dict[str, str]) -> bytes:
    """RocketMQSerializable.rocketMQProtocolEncode, written out field by field."""
    rb = remark.encode() if remark else b""
    blob = b"".join(
        struct.pack(">h", len(k.encode())) + k.encode() + struct.pack(">i", len(v.encode())) + v.encode()
        for k, v in ext.items()
    )
    return struct.pack(">hbhiii", code, 8, 409, opaque, 1, len(rb)) + rb + struct.pack(">i", len(blob)) + blob


@settings(max_examples=200, deadline=None)
@given(
    ext=st.dictionaries(st.text(max_size=6), st.text(max_size=30), max_size=16),
    remark=st.none() | st.text(max_size=20),
    opaque=st.integers(-(2**31), 2**31 - 1),
)
def test_binary_codec_matches_the_reference_layout(
    ext: dict[str, str], remark: str | None, opaque: int
) -> None:
    """Bytes as Java writes them (cached key parts included); empty keys/values decode as absent."""
    encoded = header_binary.encode_header(310, 8, 409, opaque, 1, remark, ext)
    assert encoded == _reference_binary_header(310, opaque, remark, ext)
    want = {k: v for k, v in ext.items() if k and v} if ext else None
    assert header_binary.decode_header(encoded) == (310, 8, 409, opaque, 1, remark or None, want)
    assert header_binary.decode_header(bytearray(encoded)) == header_binary.decode_header(memoryview(encoded))


@pytest.mark.parametrize("key", ["Signature", "AccessKey", "OnsChannel"])
@pytest.mark.parametrize("others", [{}, {"Signature": "s", "AccessKey": "ak"}])
def test_each_empty_credential_key_is_dropped_alone(key: str, others: dict[str, str]) -> None:
    ext = {"topic": "T", **others, key: ""}
    header = json.dumps(
        {"code": 10, "extFields": ext, "flag": 0, "language": "CPP", "opaque": 1, "version": 1}
    )
    got = header_json.decode_header(header.encode())[6]
    assert got == {k: v for k, v in ext.items() if v}
    signed = {"topic": "T", **others, key: "v"}
    header = json.dumps(
        {"code": 10, "extFields": signed, "flag": 0, "language": "CPP", "opaque": 1, "version": 1}
    )
    assert header_json.decode_header(header.encode())[6] == signed
