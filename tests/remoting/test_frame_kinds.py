"""The frame decoder picks the typed decode to try from two header bytes (``frame._json_command``):
a header that only looks like a typed kind there, or is too short to hold one, is decoded as the
general path decodes it (the same command or the same error), one frame per read (``feed``'s
fast path) and several (``_split``'s loop), from bytes and from a buffered partial frame."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pocketmq.remoting.protocol import header_json
from pocketmq.remoting.protocol.end_fields import EndTxRequest
from pocketmq.remoting.protocol.errors import HeaderDecodeError
from pocketmq.remoting.protocol.frame import FrameDecoder
from pocketmq.remoting.protocol.send_ok import SendOkReply

OK = {"MSG_REGION": "R", "TRACE_ON": "true", "msgId": "AB", "queueId": "1", "queueOffset": "2"}


def head(code: int, ext: dict[str, Any] | None, **more: Any) -> bytes:
    header = {"code": code, "extFields": ext, "flag": 1, "language": "JAVA", "opaque": 5,
              "serializeTypeCurrentRPC": "JSON", "version": 409, **more}  # fmt: skip
    if ext is None:
        del header["extFields"]
    return json.dumps(header, separators=(",", ":")).encode()


def frame(header: bytes, body: bytes = b"") -> bytes:
    return (len(header) + len(body) + 4).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header + body


#: (header, the typed class it decodes to, or None: the general path's RemotingCommand)
CASES: list[tuple[bytes, type | None]] = [
    (head(0, OK), SendOkReply),
    (head(0, {**OK, "X": "y"}), None),  # '0' and 'M' but another key: refused, general
    (head(0, {"MSG": "x"}), None),  # 'M' but not a SEND_OK's fields
    (head(0, {"maxOffset": "3"}), None),  # a success reply of another kind ('m')
    (head(0, None), None),  # no extFields: the 25th byte is another key's
    (head(3, {"a": "b"}), None),  # '3' but neither 310 nor 37
    (head(30, {"a": "b"}), None),
    (head(37, None), None),  # END_TRANSACTION's code without extFields
    (head(310, None), None),
    # the 1 of 310 sends a lone frame to _split's loop (feed's index test): other 31x codes
    # and a 310 whose extFields are not first are decoded there as the general path does
    (head(31, {"a": "b"}), None),
    (head(311, {"a": "b"}), None),
    (head(319, None), None),
    (b'{"code":310,"flag":0,"extFields":{"a":"b"}}', None),
    (head(1, None, remark="r"), None),
    (head(0, OK, remark="r"), None),  # (a remark: no broker writes a SEND_OK with one)
    (head(0, OK, language="GO"), None),  # (SendOkReply holds JAVA)
    (
        head(37, {"producerGroup": "PG", "tranStateTableOffset": "3", "commitLogOffset": "1",
                  "commitOrRollback": "8", "msgId": "U"}),
        EndTxRequest,
    ),  # fmt: skip
    (b'{"code":0}', None),  # shorter than the dispatch bytes: the general path's error
    (b'{"code":0,"extFields":{}}', None),  # 25 bytes
    (b'{"code":0,"extFields":{"M":1}', None),  # bad JSON past the bytes
    (b'{"code":3', None),
]


def _general(header: bytes) -> Any:
    try:
        return header_json.decode_header(header)
    except HeaderDecodeError as exc:
        return type(exc)


def _decoded(data: bytes, chunks: int) -> list[Any]:
    decoder = FrameDecoder()
    step = max(1, len(data) // chunks)
    out: list[Any] = []
    for i in range(0, len(data), step):
        out += decoder.feed(data[i : i + step])
    out += decoder.errors  # (a bad header with an opaque is skipped; without one, fatal)
    return out


@pytest.mark.parametrize(("header", "typed"), CASES)
@pytest.mark.parametrize("reads", ["one", "two_frames", "split"])
def test_a_look_alike_is_decoded_as_the_general_path(header: bytes, typed: type | None, reads: str) -> None:
    want = _general(header)
    data = frame(header)
    if reads == "one":
        got = _decoded(data, 1)
    elif reads == "two_frames":
        got = _decoded(data + data, 1)
    else:  # a partial frame buffered, completed by the next read
        got = _decoded(data + data, 3)
    if want is HeaderDecodeError:
        assert got and all(isinstance(e, HeaderDecodeError) for e in got)
        return
    assert len(got) == (1 if reads == "one" else 2)
    for cmd in got:
        assert (type(cmd) is typed) if typed is not None else type(cmd).__name__ == "RemotingCommand"
        assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields) == want
        assert cmd.body is None


def test_a_send_ok_with_a_body_keeps_it() -> None:
    for data in (frame(head(0, OK), b"xyz"), frame(head(0, OK), b"xyz") * 2):
        for cmd in FrameDecoder().feed(data):
            assert cmd.body == b"xyz" and cmd.ext_fields == OK


@pytest.mark.parametrize(("header", "typed"), [*CASES, (head(310, {"a": "G", "b": "T"}), None)])
def test_a_clients_decoder_decodes_as_a_servers(header: bytes, typed: type | None) -> None:
    """``server=False`` (a client's: no SEND_MESSAGE_V2 test per frame): the same commands; a
    send's frame, which a client never receives, is decoded by the general path."""
    data = frame(header) * 2
    server, client = FrameDecoder().feed(data), FrameDecoder(server=False).feed(data)
    assert len(server) == len(client)
    for a, b in zip(server, client, strict=True):
        fields = ("code", "language", "version", "opaque", "flag", "remark", "ext_fields", "body")
        assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]


def test_a_send_is_typed_only_by_a_servers_decoder() -> None:
    v2 = {"a": "G", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0"}
    data = frame(head(310, v2, flag=0)) * 2
    # (the first typed, the second read by the shape the first taught: send_raw)
    assert [type(c).__name__ for c in FrameDecoder().feed(data)] == ["SendV2Request", "SendRawRequest"]
    assert [type(c).__name__ for c in FrameDecoder(server=False).feed(data)] == ["RemotingCommand"] * 2
