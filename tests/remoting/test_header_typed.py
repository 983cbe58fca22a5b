"""The typed (msgspec) header decode agrees with the orjson path on every input.

``header_json.decode_header`` first tries a typed decode of the common header and falls back to
orjson plus field checks for anything else; the fallback alone is reached by passing ``loads``.
Whatever the bytes (valid headers, odd types, extra keys, big ints, broken UTF-8 or JSON), both
must give the same tuple or the same error (text and opaque).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.remoting.protocol import header_json
from pocketmq.remoting.protocol.command import RemotingCommand, SendV2Request
from pocketmq.remoting.protocol.errors import HeaderDecodeError, HeaderFieldError
from pocketmq.remoting.protocol.frame import FrameDecoder
from pocketmq.remoting.protocol.headers import SendMessageRequestHeader

pytestmark = pytest.mark.skipif(header_json._typed_decode is None, reason="msgspec not installed")

_EXT_KEYS = ["a", "b", "i", "Signature", "AccessKey", "OnsChannel", "x"]
_SCALARS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, 310, -1, 2**31, 2**63, 2**64, -(2**63) - 1, 2**64 - 1]),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.text(max_size=8),
    st.sampled_from(["JAVA", "CPP", "GO", "PYTHON", "", "OTHER", "java"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_EXT = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(_EXT_KEYS),
        st.one_of(st.text(max_size=6), st.just(""), _SCALARS),
        max_size=6,
    ),
    _VALUES,
)
_KEYS = ["code", "flag", "language", "opaque", "version", "remark", "extFields", "serializeTypeCurrentRPC"]


def _outcome(data: bytes, typed: bool) -> object:
    try:
        return header_json.decode_header(data) if typed else header_json.decode_header(data, orjson.loads)
    except HeaderDecodeError as exc:
        return ("error", str(exc), exc.opaque)


@st.composite
def headers(draw: st.DrawFn) -> bytes:
    obj: dict[str, object] = {}
    for key in _KEYS:
        odd = draw(st.integers(0, 7)) == 0  # most fields well-formed, a few odd ones
        if (
            key in ("remark", "serializeTypeCurrentRPC", "extFields")
            and draw(st.booleans())
            or (odd and draw(st.integers(0, 3)) == 0)
        ):
            continue  # missing
        if key in ("code", "flag", "opaque", "version"):
            obj[key] = draw(_SCALARS) if odd else draw(st.integers(-(2**31), 2**31 - 1))
        elif key == "language":
            obj[key] = (
                draw(_SCALARS) if odd else draw(st.sampled_from(["JAVA", "CPP", "GO", "PYTHON", "NOPE"]))
            )
        elif key == "extFields":
            obj[key] = (
                draw(_EXT) if odd else draw(st.dictionaries(st.sampled_from(_EXT_KEYS), st.text(max_size=6)))
            )
        else:
            obj[key] = draw(_VALUES) if odd else draw(st.text(max_size=6))
    if draw(st.integers(0, 4)) == 0:
        obj[draw(st.text(max_size=5))] = draw(_VALUES)
    text = json.dumps(obj, ensure_ascii=draw(st.booleans())).encode()
    if draw(st.integers(0, 5)) == 0 and text:  # break a byte: bad UTF-8, bad JSON, ...
        pos = draw(st.integers(0, len(text) - 1))
        text = text[:pos] + bytes([draw(st.integers(0, 255))]) + text[pos + 1 :]
    if draw(st.integers(0, 5)) == 0:
        text += draw(st.sampled_from([b"\n", b" ", b"x", b"\xff", b"{}"]))
    return text


@settings(max_examples=1500)
@given(headers())
def test_typed_decode_matches_the_orjson_path(data: bytes) -> None:
    assert _outcome(data, True) == _outcome(data, False)


@pytest.mark.parametrize(
    "data",
    [
        b'{"code":1,"flag":99999999999999999999999,"language":"JAVA","opaque":1,"version":1}',
        b'{"code":1,"flag":0,"language":"JAVA","opaque":1,"version":18446744073709551615}',
        b'{"code":1,"flag":0,"language":"JAVA","opaque":1,"version":1,"x":"\xff"}',
        b'{"code":1,"flag":0,"language":"JAVA","opaque":1,"version":1,"extFields":{"a":1}}',
        b'{"code":1,"flag":0,"language":"JAVA","opaque":1,"version":1,"extFields":{"AccessKey":""}}',
        b'{"code":1,"flag":0,"language":"JAVA","opaque":1,"version":1,"extFields":{"AccessKey":"k","a":"b"}}',
        b'{"code":1,"flag":0,"language":"JAVA","opaque":1,"version":1,"code":2}',
        b'{"code":310,"extFields":{"a":"x","a":"y"},"flag":0,"language":"CPP","opaque":7,"version":1}\n',
        b'{"code":1,"flag":0,"language":4,"opaque":1,"version":1}',
        b'{"code":1,"flag":0,"language":"JAVA","opaque":2147483648,"version":1}',
    ],
)
def test_edge_headers_match(data: bytes) -> None:
    assert _outcome(data, True) == _outcome(data, False)


# ------------------------------------------------------------------ SEND_MESSAGE_V2, typed
_V2_KEYS = [*"abcdefghijklmn", "AccessKey", "Signature", "x"]
_V2_VALUES = st.one_of(
    st.sampled_from(
        ["0", "4", "-1", "1023", "1024", "1e2", "4.0", " 4", "+4", "4_0", "\u0664", "2147483648"]
    ),
    st.sampled_from(["true", "false", "1", "0", "TRUE", "yes", "", "1764100000000", "9" * 20]),
    st.text(max_size=6),
    st.none(),
    st.integers(-5, 5),
    st.booleans(),
)


def _v2_frame(ext: dict[str, object]) -> tuple[bytes, bytes]:
    header = (
        b'{"code":310,"extFields":'
        + json.dumps(ext).encode()
        + b',"flag":0,"language":"JAVA","opaque":5,"serializeTypeCurrentRPC":"JSON","version":409}'
    )
    return header, struct.pack(">ii", 4 + len(header) + 3, len(header)) + header + b"abc"


def _parsed(parse: Callable[[Any], object], arg: object) -> object:
    try:
        return parse(arg)
    except HeaderFieldError as exc:
        return ("error", str(exc))


_SDK_V2 = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1764100000000", "h": "0",
           "i": "UNIQ_KEY\x01AB\x02WAIT\x01true", "j": "0", "k": "false", "m": "false"}  # fmt: skip


@settings(max_examples=1000)
@given(st.dictionaries(st.sampled_from(_V2_KEYS), st.one_of(_V2_VALUES, st.just(KeyError)), max_size=4))
def test_send_v2_typed_matches_the_dict_path(changes: dict[str, object]) -> None:
    """A SEND_MESSAGE_V2 frame (the SDK's with a few fields changed, added or removed) decoded
    typed (SendV2Request) gives the command and the send header the dict path gives (or the
    same error), and its lazily built extFields."""
    ext = {k: v for k, v in {**_SDK_V2, **changes}.items() if v is not KeyError}
    header, frame = _v2_frame(ext)
    (cmd,) = FrameDecoder().feed(frame)
    want = header_json.decode_header(header)
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark) == want[:6]
    if type(cmd) is SendV2Request:
        assert _parsed(SendMessageRequestHeader.from_v2_attrs, cmd.v2_fields) == _parsed(
            SendMessageRequestHeader.from_ext_fields_v2, want[6]
        )
    assert cmd.ext_fields == want[6]
    assert list((cmd.ext_fields or {}).items()) == list((want[6] or {}).items())


def test_send_v2_frames_of_the_sdk_are_typed() -> None:
    ext = dict(_SDK_V2)
    header, frame = _v2_frame(ext)
    (cmd,) = FrameDecoder().feed(frame)
    assert type(cmd) is SendV2Request and cmd.body == b"abc"
    assert SendMessageRequestHeader.from_v2_attrs(
        cmd.v2_fields
    ) == SendMessageRequestHeader.from_ext_fields_v2(ext)
    assert cmd.ext_fields == ext
    # an ACL client's (credential keys) and a C++ client's (number values) take the dict path
    for odd in ({**ext, "AccessKey": "k"}, {**ext, "d": 4}):
        (cmd,) = FrameDecoder().feed(_v2_frame(odd)[1])
        assert type(cmd) is RemotingCommand


_EDGE_VALUES = ["0", "5", "-1", "-2", "1023", "1024", "007", "+5", " 5", "1_0", "2147483647", "2147483648",
                "-2147483648", "-2147483649", "x", "", "1e3", "\u0663", "9223372036854775807",
                "9223372036854775808", "true", "false", "TRUE", "1", "True", None]  # fmt: skip


@pytest.mark.parametrize("key", list("abcdefghijklmn"))
def test_from_v2_attrs_matches_from_ext_fields_v2_on_every_field(key: str) -> None:
    """The generated attrs parser (one subscript per small int, optional strs assigned as they
    are) gives what the dict parser gives, value or error, for each field and edge value
    (None: the field absent)."""
    for value in _EDGE_VALUES:
        ext = {k: v for k, v in {**_SDK_V2, key: value}.items() if v is not None}
        try:
            fields = header_json.send_v2_decode(_v2_frame(ext)[0]).extFields  # type: ignore[misc]
        except Exception:  # noqa: S112 - (a required field absent: the decoder refuses it, the dict path decides)
            continue
        assert _parsed(SendMessageRequestHeader.from_v2_attrs, fields) == _parsed(
            SendMessageRequestHeader.from_ext_fields_v2, ext
        ), (key, value)
