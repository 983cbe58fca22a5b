"""SEND_MESSAGE_V2 headers read by their shape (``remoting.protocol.send_raw``): after a header
teaches a shape, a header of the same length is read by it only when the general path reads it
the same way (the command, its extFields and the send header the processor parses, or the same
error); anything else (a look-alike of the same length included) is decoded as before."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.remoting.protocol import header_json, send_raw
from pocketmq.remoting.protocol.command import SendV2Request
from pocketmq.remoting.protocol.errors import HeaderDecodeError, HeaderFieldError
from pocketmq.remoting.protocol.frame import FrameDecoder
from pocketmq.remoting.protocol.headers import SendMessageRequestHeader
from pocketmq.remoting.protocol.send_raw import SendRawRequest

pytestmark = pytest.mark.skipif(header_json.send_v2_decode is None, reason="msgspec not installed")

UNIQ = "7F0000010A6B18B4AAC22794EB2C0001"
_TAIL = ',"flag":0,"language":"%s","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":%d}'


def _ext_json(ext: dict[str, Any]) -> str:
    # orjson's and fastjson's rendering: control characters as \u00XX, the rest as it is
    return json.dumps(ext, separators=(",", ":"), ensure_ascii=False)


def sdk(e: str = "1", g: str = "1764100000000", opaque: int = 4567, tags: str = "TagA", **more: str) -> bytes:
    """Our SDK's header (prepare.ext's order: a..n, then l when set)."""
    ext = {"a": "PG", "b": "TopicTest", "c": "TBW102", "d": "4", "e": e, "f": "0", "g": g, "h": "0",
           "i": f"TAGS\x01{tags}\x02UNIQ_KEY\x01{UNIQ}", "j": "0", "k": "false", "m": "false",
           "n": "broker-a", **more}  # fmt: skip
    return ('{"code":310,"extFields":' + _ext_json(ext) + _TAIL % ("PYTHON", opaque, 409)).encode()


def java(opaque: int = 4567, props: str | None = None) -> bytes:
    """The Java client's 4.9.8 (fastjson: sorted keys, no ``n``; UNIQ_KEY first)."""
    ext = {"a": "PG", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1764100000000",
           "h": "0", "i": props or f"UNIQ_KEY\x01{UNIQ}\x02WAIT\x01true\x02TAGS\x01TagA", "j": "0",
           "k": "false", "m": "false"}  # fmt: skip
    return ('{"code":310,"extFields":' + _ext_json(ext) + _TAIL % ("JAVA", opaque, 395)).encode()


def go(opaque: int = 4567) -> bytes:
    """A Go-style order (header keys unsorted, extFields last) and no remark."""
    ext = {"a": "PG", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "2", "f": "0", "g": "1764100000000",
           "h": "0", "i": f"UNIQ_KEY\x01{UNIQ}", "j": "0", "k": "false", "m": "false"}  # fmt: skip
    return (f'{{"code":310,"language":"GO","version":317,"opaque":{opaque},"flag":0,"extFields":'
            + _ext_json(ext) + "}").encode()  # fmt: skip


def frame(header: bytes, body: bytes = b"body") -> bytes:
    return (len(header) + len(body) + 4).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header + body


def _reference(header: bytes) -> Any:
    """What the general path reads: the command's fields and the processor's send header."""
    try:
        code, language, version, opaque, flag, remark, ext = header_json.decode_header(header)
    except HeaderDecodeError as exc:
        return ("error", str(exc), exc.opaque)
    try:
        parsed: Any = SendMessageRequestHeader.from_ext_fields_v2(ext)
    except HeaderFieldError as exc:
        parsed = ("error", str(exc))
    return (code, language, version, opaque, flag, remark, ext, parsed)


def _read(header: bytes) -> tuple[Any, str]:
    """What the frame decoder reads (the same tuple), and the class it built."""
    decoder = FrameDecoder()
    cmds = decoder.feed(frame(header))
    if decoder.errors:
        (exc,) = decoder.errors
        assert isinstance(exc, HeaderDecodeError)
        return ("error", str(exc), exc.opaque), "error"
    (cmd,) = cmds
    assert cmd.body == b"body"
    if type(cmd) is SendRawRequest:
        parsed: Any = cmd.send_header
        assert SendMessageRequestHeader.from_v2_attrs(cmd.v2_fields) == parsed
        # the shape's plain flag: the send processor's own search would find no key, no tail
        props = parsed.properties or ""
        keyless = all(f"{key}\x01" not in props for key in ("WAIT", "CLUSTER", "DELAY", "TRAN_MSG"))
        assert cmd.plain == (keyless and props != "" and not props.endswith("\x02"))
    else:
        try:
            parsed = (
                SendMessageRequestHeader.from_v2_attrs(cmd.v2_fields)
                if type(cmd) is SendV2Request
                else SendMessageRequestHeader.from_ext_fields_v2(cmd.ext_fields)
            )
        except HeaderFieldError as exc:
            parsed = ("error", str(exc))
    got = (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields, parsed)
    return got, type(cmd).__name__


@pytest.fixture(autouse=True)
def _fresh_shapes() -> Any:
    _forget()
    yield
    _forget()


def _forget() -> None:
    send_raw.SHAPES.clear()
    send_raw.OTHER_SHAPES.clear()
    send_raw._misses.clear()


def _teach(header: bytes) -> None:
    got, kind = _read(header)
    assert kind == "SendV2Request" and got == _reference(header)
    assert len(header) in send_raw.SHAPES


@pytest.mark.parametrize(
    "base",
    [
        sdk(), sdk(l="16"), sdk(tags='Tág"\\x'), java(), sdk(opaque=7), sdk(tags="A\x02DELAY\x013"),
        sdk(tags="A\x02TRAN_MSG\x01true"), sdk(tags="A\x02CLUSTER\x01c"), sdk(i="TAGS\x01A"),
        sdk(i=f"UNIQ_KEY\x01{UNIQ}\x02"), sdk(i=f"UNIQ_KEY\x01{UNIQ}\x02DELAY\x011"), sdk(i="TAGS\x01A\x02"),
    ],
)  # fmt: skip
def test_the_producers_headers_teach_a_shape_and_are_read_by_it(base: bytes) -> None:
    _teach(base)
    got, kind = _read(base)
    assert kind == "SendRawRequest" and got == _reference(base)
    # the changing values: another queue, born time, UNIQ_KEY and opaque of the same widths
    at = base.index(b'"e":"') + 5
    other = base[:at] + b"9" + base[at + 1 :]
    for old, new in ((UNIQ.encode(), b"ZZ09" * 8), (b"1764100000000", b"1799999999999")):
        other = other.replace(old, new, 1)
    got, kind = _read(other)
    assert kind == "SendRawRequest" and got == _reference(other)
    assert got[-1].born_timestamp == 1799999999999
    assert got[-1].properties.count("ZZ09" * 8) == (UNIQ.encode() in base)


def _sub(header: bytes, old: bytes, new: bytes) -> bytes:
    assert header.count(old) == 1, (header, old)
    assert len(old) == len(new)
    return header.replace(old, new, 1)


#: (the bytes replaced, their replacement, whether the shape reads the result); the same length,
#: so the base's shape is tried
VARIANTS = [
    (b'"e":"1"', b'"e":"7"', True),
    (b'"e":"1"', b'"e":"-"', False),
    (b'"e":"1"', b'"e":" "', False),
    (b'"e":"1"', b'"e":"\xd9"', False),  # not UTF-8
    (b'"g":"1764100000000"', b'"g":"0000000000012"', True),  # leading zeros in a string: int() reads 12
    (b'"g":"1764100000000"', b'"g":"17641000000_0"', False),
    (b'"g":"1764100000000"', b'"g":"+764100000000"', False),
    (b'"g":"1764100000000"', b'"g":" 764100000000"', False),
    (b'"g":"1764100000000"', b'"g":"1764100000e00"', False),
    (b'"g":"1764100000000"', b'"g":"\\u00316410000"', False),  # an escape
    (b":4567,", b":0456,", False),  # a leading zero: not JSON
    (b":4567,", b":-456,", False),
    (b":4567,", b":45e1,", False),
    (b":4567,", b": 456,", False),  # a space (JSON): not read by the shape, read the same
    (b":4567,", b":9999,", True),
    (UNIQ[:4].encode(), b"abcd", True),
    (UNIQ[:4].encode(), b"\\u41", False),
    (UNIQ[:4].encode(), b'AB"C', False),
    (UNIQ[:4].encode(), b"AB\\\\", False),
    (UNIQ[:4].encode(), b"AB C", False),
    (UNIQ[:4].encode(), b"\xc3\xa9AB", False),  # UTF-8
    (UNIQ[:4].encode(), b"\xff\xfeAB", False),  # not UTF-8
    (b'"a":"PG"', b'"a":"PH"', False),  # another group: another shape (read the same)
    (b'"k":"false"', b'"k":"fals0"', False),
    (b'"k":"false"', b'"x":"false"', False),  # an unknown key: the general path
    (b'"flag":0', b'"flag":1', False),
    (b'"JSON"', b'"JSOM"', False),
    (b'"version":409', b'"version":408', False),
    (b'"PYTHON"', b'"GOLANG"', False),
    (b'"PYTHON"', b'"PYTHOX"', False),  # an unknown language
    (b"TagA", b'Ta\\"', False),  # an escaped quote in the tags
    (b"TagA", b"Tag\\", False),  # breaks the JSON string
]


@pytest.mark.parametrize(("old", "new", "shaped"), VARIANTS)
def test_a_header_of_the_same_length_is_read_as_the_general_path_reads_it(
    old: bytes, new: bytes, shaped: bool
) -> None:
    base = sdk()
    _teach(base)
    header = _sub(base, old, new)
    got, kind = _read(header)
    assert got == _reference(header)
    assert (kind == "SendRawRequest") == shaped, kind


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(["sdk", "java", "go", "sdk2", "java2"]),
    st.lists(
        st.tuples(
            st.integers(0, 400),
            st.sampled_from(
                [b"0", b"9", b"a", b"Z", b'"', b"\\", b" ", b"-", b"_", b"\x01", b"\xc3", b"\xa9", b"%"]
            ),
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_any_byte_changed_reads_as_the_general_path(kind: str, changes: list[tuple[int, bytes]]) -> None:
    _forget()  # (the fixture runs once for all examples)
    base = {"sdk": sdk, "java": java, "go": go}[kind.rstrip("2")]()
    if kind == "go":  # (not SEND_V2_START: the general path, never shaped)
        assert _read(base) == (_reference(base), "RemotingCommand")
    else:
        if kind.endswith("2"):  # base is its length's other shape (the first's constants differ)
            _teach(base.replace(b'"a":"PG"', b'"a":"QG"'))
        _teach(base)
    header = bytearray(base)
    for at, byte in changes:
        header[at % len(header)] = byte[0]
    got, _ = _read(bytes(header))
    assert got == _reference(bytes(header))


def test_other_orders_and_the_cpp_clients_numbers_take_the_general_path() -> None:
    cpp = sdk().replace(b'"d":"4"', b'"d":4').replace(b'"e":"1"', b'"e":1')
    for header in (go(), go(), cpp, cpp, cpp + b"\n"):
        assert _read(header) == (_reference(header), "RemotingCommand")
    assert not send_raw.SHAPES


def test_headers_that_cannot_teach_a_shape_are_read_typed() -> None:
    # a remark, no UNIQ_KEY, an opaque of ten digits, a queue id over nine digits
    remark = sdk().replace(b',"serializeTypeCurrentRPC"', b',"remark":"r","serializeTypeCurrentRPC"')
    no_uniq = sdk().replace(f"UNIQ_KEY\\u0001{UNIQ}".encode(), b"KEYS\\u0001k")
    for header in (remark, sdk(opaque=1234567890), sdk(e="1234567890"), no_uniq):
        for _ in range(2):
            got, kind = _read(header)
            assert got == _reference(header)
        assert kind == ("SendRawRequest" if header is no_uniq else "SendV2Request"), header
    assert len(no_uniq) in send_raw.SHAPES  # (its properties are a constant)


def _group(k: int) -> bytes:
    """Producer ``k``'s header: ``sdk()`` of another group of the same length."""
    return sdk().replace(b'"a":"PG"', f'"a":"G{k}"'.encode())


def test_producers_sharing_a_length_each_keep_their_shape() -> None:
    """Two producers alternating headers of one length both take the shape read (one shape
    per length thrashed: each was read typed), and a look-alike of the same length is read as
    the general path reads it (the hypothesis test covers any byte changed after two shapes)."""
    first, second = _group(1), _group(2)
    _teach(first)
    _teach(second)
    for _ in range(3):
        for header in (first, second, sdk(e="7").replace(b'"a":"PG"', b'"a":"G2"')):
            got, kind = _read(header)
            assert kind == "SendRawRequest" and got == _reference(header)
    assert list(send_raw.SHAPES) == list(send_raw.OTHER_SHAPES) == [len(first)]
    for header in (_group(3).replace(b'"k":"false"', b'"k":"fals0"'), _sub(second, b'"JSON"', b'"JSOM"')):
        got, kind = _read(header)
        assert kind != "SendRawRequest" and got == _reference(header)


def test_producers_alternating_in_one_read_each_read_by_their_shape() -> None:
    """The frame loop keeps the last shape's parts in its locals (unpacked again only when a
    frame's shape is another): frames of two shapes and look-alikes alternating in one read
    each read as the general path reads them."""
    first, second = _group(1), _group(2)
    _teach(first)
    _teach(second)
    look_alike = sdk(e="7").replace(b'"a":"PG"', b'"a":"G2"')
    odd = _group(3).replace(b'"k":"false"', b'"k":"fals0"')
    headers = [first, second, second, look_alike, first, odd, first, second, java(), first]
    cmds = FrameDecoder().feed(b"".join(frame(h) for h in headers))
    assert len(cmds) == len(headers)
    for header, cmd in zip(headers, cmds, strict=True):
        assert (type(cmd) is SendRawRequest) == (header in (first, second, look_alike))
        if type(cmd) is SendRawRequest:
            parsed: Any = cmd.send_header
        else:
            parsed = SendMessageRequestHeader.from_ext_fields_v2(cmd.ext_fields)
        got = (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields, parsed)
        assert got == _reference(header)


def test_sends_around_an_end_transaction_read_by_its_shape_keep_their_own() -> None:
    """An END_TRANSACTION read by its shape between two sends of one shape in one read (a
    transactional producer's stream) leaves the second send read by the send's shape with its
    own fields: the END's shape shares the frame loop's locals with a send's."""
    from pocketmq.remoting.protocol import end_raw
    from pocketmq.remoting.protocol.end_raw import EndRawRequest
    from tests.remoting.test_end_raw import SDK as END
    from tests.remoting.test_end_raw import frame as end_frame

    end_raw._shapes.clear()
    send = _group(5)
    _teach(send)
    FrameDecoder().feed(end_frame(END))  # (teaches the END's shape)
    later = sdk(opaque=9876, g="1764100000123").replace(b'"a":"PG"', b'"a":"G5"')
    cmds = FrameDecoder().feed(frame(send) + end_frame(END) + frame(later) + end_frame(END) + frame(send))
    assert [type(c) for c in cmds] == [SendRawRequest, EndRawRequest, SendRawRequest, EndRawRequest, SendRawRequest]
    for header, cmd in zip((send, later, send), cmds[::2], strict=True):
        got = (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields, cmd.send_header)
        assert got == _reference(header)


def test_a_length_keeps_at_most_per_length_shapes_and_relearns_after_misses() -> None:
    groups = [_group(k) for k in range(send_raw.PER_LENGTH + 1)]
    for header in groups[:-1]:
        _teach(header)
    extra = groups[-1]  # the length is full: read typed until it missed RELEARN_AFTER times
    for _ in range(send_raw.RELEARN_AFTER - 1):
        got, kind = _read(extra)
        assert kind == "SendV2Request" and got == _reference(extra)
        assert all(_read(header)[1] == "SendRawRequest" for header in groups[:-1])
    _read(extra)  # teaches it, in place of the oldest other shape (the first stays)
    kinds = [_read(header)[1] for header in groups]
    assert kinds == ["SendRawRequest", "SendV2Request"] + ["SendRawRequest"] * (send_raw.PER_LENGTH - 1)
    assert len(send_raw.OTHER_SHAPES[len(extra)]) == send_raw.PER_LENGTH - 1


def test_a_header_of_a_kept_shapes_constants_teaches_none() -> None:
    """A queue id past QUEUE_IDS renders as the shape but is read typed: no second shape."""
    _teach(sdk(e="1000"))
    header = sdk(e="2000")
    for _ in range(3):
        got, kind = _read(header)
        assert kind == "SendV2Request" and got == _reference(header)
    assert not send_raw.OTHER_SHAPES
    assert _read(sdk(e="1001"))[1] == "SendRawRequest"


def test_a_shaped_request_is_processed_as_a_typed_one() -> None:
    """The shape read's whole header (``send_header``) is the typed decode's."""
    base = sdk()
    _teach(base)
    (cmd,) = FrameDecoder().feed(frame(base))
    assert type(cmd) is SendRawRequest
    assert cmd.code == 310 and cmd.remark is None and cmd.serialize_type == 0
    assert cmd.send_header == SendMessageRequestHeader.from_ext_fields_v2(cmd.ext_fields)
    with pytest.raises(TypeError):  # object's __init__ (SlotRecord): the decoder fills the slots
        SendRawRequest(1)  # type: ignore[call-arg]


def test_a_shapes_sends_share_its_header_and_carry_their_own_values() -> None:
    """A shape's sends share the shape's one header (no header object per send): every field
    of it but the queue id, born timestamp and properties is each send's, and those three are
    the request's own. ``send_header`` is the send's whole header (a plain
    ``SendMessageRequestHeader`` equal to the typed decode's), one per request, and writing to
    it leaves the shape's header and other sends as they were. Two producers' shapes of one
    length keep their own headers."""
    first, second = _group(1), _group(2)
    _teach(first)
    _teach(second)
    shared = {}
    for header in (first, second):
        sends = [header.replace(b'"e":"1"', f'"e":"{q}"'.encode()).replace(b"1764100000000", f"17641000000{q}0".encode())
                 .replace(UNIQ.encode(), f"{UNIQ[:-4]}{q:04d}".encode()) for q in (1, 2, 3)]  # fmt: skip
        cmds = [cmd for data in sends for cmd in FrameDecoder().feed(frame(data))]
        assert [type(cmd) for cmd in cmds] == [SendRawRequest] * 3
        assert all(cmd.shape_header is cmds[0].shape_header for cmd in cmds)
        for q, cmd in zip((1, 2, 3), cmds, strict=True):
            want = SendMessageRequestHeader.from_v2_attrs(cmd.v2_fields)
            assert (cmd.queue_id, cmd.born_timestamp) == (q, int(f"17641000000{q}0"))
            assert cmd.properties == want.properties and cmd.properties.endswith(f"{q:04d}")
            for name in (row[0] for row in SendMessageRequestHeader.FIELD_TABLE):
                if name not in ("queue_id", "born_timestamp", "properties"):
                    assert getattr(cmd.shape_header, name) == getattr(want, name), name
            got = cmd.send_header
            assert type(got) is SendMessageRequestHeader and got == want and cmd.send_header is got
            assert send_raw.full_header(cmd, cmd.shape_header) is got
        kept = SendMessageRequestHeader.from_v2_attrs(cmds[0].v2_fields)
        cmds[1].send_header.queue_id = 9
        assert cmds[0].shape_header.queue_id == kept.queue_id and cmds[0].send_header.queue_id == 1
        assert cmds[2].send_header.queue_id == 3
        shared[header] = cmds[0].shape_header
    assert shared[first].producer_group == "G1" and shared[second].producer_group == "G2"
    typed = SendMessageRequestHeader.from_v2_attrs(FrameDecoder().feed(frame(first))[0].v2_fields)
    assert send_raw.full_header(object(), typed) is typed


def test_a_frame_split_across_reads_is_read_by_the_shape() -> None:
    """A header completed from the decoder's buffer (a bytearray) reads as one from a read."""
    base = sdk()
    _teach(base)
    data = frame(base) * 3
    decoder = FrameDecoder()
    cmds = [*decoder.feed(data[:50]), *decoder.feed(data[50:400]), *decoder.feed(data[400:])]
    assert [type(c) for c in cmds] == [SendRawRequest] * 3 and not decoder.errors
    want = _reference(base)
    for cmd in cmds:
        assert cmd.body == b"body" and bytes(cmd.raw_header) == base
        got = (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields)
        assert (*got, cmd.send_header) == want


def test_born_times_and_opaques_of_one_read_convert_as_int_reads_them() -> None:
    """The shape read converts g and the opaque from their leading digits kept within a read
    (the last digit added): frames of one read whose leading digits repeat, change, or are
    refused, and whose last byte is a digit or its neighbours ('/' and ':'), each read as the
    general path reads it; a one-digit opaque's shape (no leading digits) in the same read."""
    wide, narrow = sdk(), sdk(opaque=7, e="12")
    _teach(wide)
    _teach(narrow)
    headers, shaped = [], []
    for g, opaque in [
        ("1764100000000", 4567), ("1764100000009", 4560), ("1764100000010", 4561), ("1764100000011", 4599),
        ("1764100000011", 4600), ("0000000000012", 1000), ("1764100000012", 9999), ("1764100000019", 4567),
    ]:  # fmt: skip
        headers.append(sdk(g=g, opaque=opaque))
        shaped.append(True)
    # (valid JSON only: a header that does not decode ends the stream; VARIANTS has those)
    for old, new in ((b":4567,", b":456 ,"), (b":4567,", b":-456,"), (b'"g":"1764100000000"', b'"g":"176410000000/"'),
                     (b'"g":"1764100000000"', b'"g":"176410000000:"'), (b'"g":"1764100000000"', b'"g":"17641000000_0"'),
                     (b'"g":"1764100000000"', b'"g":"+764100000000"'), (b'"g":"1764100000000"', b'"g":"17641000000:0"')):  # fmt: skip
        headers += [_sub(wide, old, new), wide]
        shaped += [False, True]
    for opaque in (0, 9, 3):
        headers.append(sdk(opaque=opaque, e="12"))
        shaped.append(True)
    headers += [wide, narrow]
    shaped += [True, True]
    decoder = FrameDecoder()  # (two reads: the leading digits are kept from one to the next)
    cmds = [
        *decoder.feed(b"".join(frame(h) for h in headers)),
        *decoder.feed(b"".join(frame(h) for h in headers)),
    ]
    for header, cmd, raw in zip(headers * 2, cmds, shaped * 2, strict=True):
        assert (type(cmd) is SendRawRequest) == raw, header
        want = _reference(header)
        got = (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields)
        if raw:
            assert (*got, cmd.send_header) == want
        else:
            assert got == want[:7]


@pytest.mark.parametrize("code", [11, 37, 311])
def test_another_frame_of_a_shapes_length_reads_as_the_general_path(code: int) -> None:
    """A shape is tried before the SEND_MESSAGE_V2 prefix test (frame._split): a frame of
    another code whose header has a learnt shape's length fails its constant pieces and is
    decoded as before (lone in its read, and two in a read)."""
    base = sdk()
    _teach(base)

    def other(pad: int) -> bytes:
        return (f'{{"code":{code},"extFields":{{"x":"' + "y" * pad + '"}' + _TAIL % ("JAVA", 9, 1)).encode()

    header = other(len(base) - len(other(0)))
    assert len(header) == len(base)
    decoder = FrameDecoder()
    cmds = [*decoder.feed(frame(header)), *decoder.feed(frame(header) * 2)]
    assert not decoder.errors and len(cmds) == 3
    for cmd in cmds:
        assert type(cmd).__name__ == "RemotingCommand" and cmd.body == b"body"
        got = (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields)
        assert got == _reference(header)[:7]
