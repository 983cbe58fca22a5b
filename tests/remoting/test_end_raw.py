"""END_TRANSACTION headers read by their shape (``remoting.protocol.end_raw``): after a header
teaches a shape, a header of the same length is read by it only when the general path reads it
the same way; anything else (a look-alike of the same length included) is decoded as before."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pocketmq.remoting.protocol import end_raw, header_json
from pocketmq.remoting.protocol.codes import RPC_ONEWAY, RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.end_fields import EndTxRequest
from pocketmq.remoting.protocol.end_raw import EndRawRequest
from pocketmq.remoting.protocol.errors import HeaderDecodeError, RemoteSystemError
from pocketmq.remoting.protocol.frame import FrameDecoder
from tests.broker.transaction.test_recent import offline_broker, prepare

ID = "7F0000010A6B18B4AAC22794EB2C0001"
#: our SDK's header (EndTransactionRequestHeader's order), as end_template writes it
SDK = (
    b'{"code":37,"extFields":{"producerGroup":"PG1","tranStateTableOffset":"1234",'
    b'"commitLogOffset":"98765432","commitOrRollback":"8","fromTransactionCheck":"false",'
    b'"msgId":"' + ID.encode() + b'","transactionId":"' + ID.encode() + b'"},"flag":2,'
    b'"language":"PYTHON","opaque":4567,"serializeTypeCurrentRPC":"JSON","version":409}'
)
#: fastjson's (sorted keys), without transactionId
JAVA = (
    b'{"code":37,"extFields":{"commitLogOffset":"98765432","commitOrRollback":"12",'
    b'"fromTransactionCheck":"false","msgId":"' + ID.encode() + b'","producerGroup":"PG2",'
    b'"tranStateTableOffset":"1234"},"flag":2,"language":"JAVA","opaque":4567,'
    b'"serializeTypeCurrentRPC":"JSON","version":399}'
)


def frame(header: bytes) -> bytes:
    return (len(header) + 4).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header


def _sub(header: bytes, old: bytes, new: bytes) -> bytes:
    assert header.count(old) >= 1
    return header.replace(old, new, 1)


#: (base header, the bytes replaced, their replacement: same length, so the base's shape is tried)
VARIANTS = [
    (SDK, b'"1234"', b'"1235"'),  # another table offset: read by the shape
    (SDK, b'"98765432"', b'"00000012"'),  # leading zeros in a string: int() reads 12, as the parser
    (SDK, b'"1234"', b'"1_34"'),  # int() takes it, the header parser does not
    (SDK, b'"1234"', b'" 123"'),
    (SDK, b'"1234"', b'"+123"'),
    (SDK, b'"1234"', b'"-123"'),
    (SDK, b'"1234"', b'"1e03"'),
    (SDK, b'"1234"', b'"1.00"'),
    (SDK, b'"1234"', b'"\t123"'),  # a control character: not JSON
    (SDK, b'"1234"', b'"12a4"'),
    (SDK, b'"98765432"', b'"\\u00312"'),  # an escape
    (SDK, b":4567,", b":0456,"),  # a leading zero: not JSON
    (SDK, b":4567,", b":-456,"),
    (SDK, b":4567,", b":45e1,"),
    (SDK, b":4567,", b":45a7,"),
    (SDK, b":4567,", b": 456,"),  # a space (JSON)
    (SDK, ID.encode()[:4], b"abcd"),  # another msgId (letters and digits): read
    (SDK, ID.encode()[:4], b"\\u41"),
    (SDK, ID.encode()[:4], b'AB"C'),
    (SDK, ID.encode()[:4], b"AB C"),  # a space: JSON, but not read by the shape
    (SDK, ID.encode()[:4], b"\xc3\xa9AB"),  # UTF-8
    (SDK, ID.encode()[:4], b"\xff\xfeAB"),  # not UTF-8
    (SDK, b'"msgId"', b'"msgIx"'),  # another key, same length
    (SDK, b'"PG1"', b'"PG2"'),  # another group: another shape
    (SDK, b'"8"', b'"9"'),  # not a commit or a rollback
    (SDK, b'"8"', b'"0"'),  # UNKNOW
    (SDK, b'"false"', b'"fals0"'),
    (SDK, b'"flag":2', b'"flag":3'),
    (SDK, b'"JSON"', b'"JSOM"'),
    (SDK, b'"version":409', b'"version":408'),
    (SDK, b'"PYTHON"', b'"GOLANG"'),
    (SDK, b'"code":37', b'"code":38'),
    (SDK, b'"code":37,', b'"code":37 ,'),  # (a space: another length)
    (SDK, b'{"code"', b'{ "code"'),  # a space: another length
    (JAVA, b'"1234"', b'"4321"'),
    (JAVA, b'"1234"', b'"1_34"'),
    (JAVA, b'"98765432"', b'"9876543a"'),
    (JAVA, ID.encode()[:4], b"0000"),
    (JAVA, b'"12"', b'"08"'),
]


def _general(header: bytes) -> Any:
    try:
        return header_json.decode_header(header)
    except HeaderDecodeError:
        return HeaderDecodeError


def _command(cmd: Any) -> Any:
    return (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields)


def _check(cmd: Any, header: bytes) -> None:
    """``cmd`` is what the general path makes of ``header``; one read by a shape has the
    fields the header parser reads."""
    want = _general(header)
    assert want is not HeaderDecodeError
    assert _command(cmd) == want and cmd.body is None and cmd.serialize_type == 0
    if type(cmd) is EndRawRequest:
        ext = want[6]
        assert cmd.end == (
            int(ext["commitLogOffset"]),
            int(ext["tranStateTableOffset"]),
            ext["producerGroup"],
            ext["commitOrRollback"] == "8",
        )
        assert ext["commitOrRollback"] in ("8", "12") and want[4] == RPC_ONEWAY and ext["msgId"].isalnum()
        assert "_" not in ext["commitLogOffset"] + ext["tranStateTableOffset"]
        assert {k: getattr(cmd.fields, k) for k in ext} == ext


@pytest.mark.parametrize(("base", "old", "new"), VARIANTS)
def test_a_variant_is_read_as_the_general_path_reads_it(base: bytes, old: bytes, new: bytes) -> None:
    variant = _sub(base, old, new)
    end_raw._shapes.clear()
    # the base teaches its shape (typed), a second base is read by it
    decoder = FrameDecoder()
    first, second = decoder.feed(frame(base) * 2)
    assert type(first) is EndTxRequest and type(second) is EndRawRequest
    _check(second, base)
    # the variant: in the frame loop and alone in a read (feed's fast path), from a shape
    for data in (frame(base) + frame(variant), frame(variant)):
        decoder = FrameDecoder()
        cmds = decoder.feed(data)
        if _general(variant) is HeaderDecodeError:
            assert len(decoder.errors) == 1 and isinstance(decoder.errors[0], HeaderDecodeError)
            assert all(type(c) is EndRawRequest for c in cmds)  # (the base's, if there)
            continue
        _check(cmds[-1], variant)


def test_a_variant_of_the_shape_is_read_by_it() -> None:
    """The fast path is taken for what it should take (the table above only says "equal")."""
    end_raw._shapes.clear()
    for old, new in ((b'"1234"', b'"1235"'), (ID.encode()[:4], b"abcd"), (b":4567,", b":9999,")):
        cmds = FrameDecoder().feed(frame(SDK) + frame(_sub(SDK, old, new)))
        assert type(cmds[-1]) is EndRawRequest
    for old, new in ((b'"1234"', b'"1_34"'), (b":4567,", b":0456,"), (b'"1234"', b'"12a4"')):
        cmds = FrameDecoder().feed(frame(SDK) + frame(_sub(SDK, old, new)))
        assert [type(c) for c in cmds][1:] in ([], [EndTxRequest], [RemotingCommand])
    # one frame a read (feed's own path): the typed decode
    (cmd,) = FrameDecoder().feed(frame(SDK))
    assert type(cmd) is EndTxRequest


def test_two_groups_of_one_header_length_do_not_take_the_shape_from_each_other() -> None:
    """Headers of one length from two groups (names of one length): the first keeps the
    length's shape; the other's are decoded typed, and take the shape only after
    ``RELEARN_AFTER`` of them (not at every END, which would relearn a shape per END)."""
    end_raw._shapes.clear()
    end_raw._misses.clear()
    other = _sub(SDK, b'"PG1"', b'"PG2"')
    first = FrameDecoder().feed(frame(SDK) * 2)
    assert [type(c) for c in first] == [EndTxRequest, EndRawRequest]
    (shape,) = end_raw._shapes.values()
    for n in range(1, end_raw.RELEARN_AFTER):
        cmds = FrameDecoder().feed(frame(other) + frame(SDK))
        assert [type(c) for c in cmds] == [EndTxRequest, EndRawRequest], n
        assert end_raw._shapes[len(SDK)] is shape
    cmds = FrameDecoder().feed(frame(other) * 2)  # the 64th miss: PG2's shape now
    assert [type(c) for c in cmds] == [EndTxRequest, EndRawRequest]
    assert cmds[1].end[2] == "PG2"
    for cmd in cmds:
        _check(cmd, other)


def test_headers_that_teach_no_shape() -> None:
    """A remark, a reply wanted (no oneway bit), spaces, an escape, an opaque of 10 digits, an
    UNKNOW: always the typed decode or the general path."""
    ext = {"producerGroup": "PG", "tranStateTableOffset": "1", "commitLogOffset": "2",
           "commitOrRollback": "8", "msgId": "M"}  # fmt: skip
    base = {"code": 37, "extFields": ext, "flag": 2, "language": "JAVA", "opaque": 1,
            "serializeTypeCurrentRPC": "JSON", "version": 409}  # fmt: skip
    headers = [
        json.dumps({**base, "remark": "r"}, separators=(",", ":")),
        json.dumps({**base, "flag": 0}, separators=(",", ":")),
        json.dumps(base),
        json.dumps({**base, "extFields": {**ext, "msgId": "\u00e9"}}, separators=(",", ":")),
        json.dumps({**base, "opaque": 1234567890}, separators=(",", ":")),
        json.dumps({**base, "extFields": {**ext, "commitOrRollback": "0"}}, separators=(",", ":")),
        json.dumps({**base, "extFields": {**ext, "tranStateTableOffset": "-1"}}, separators=(",", ":")),
    ]
    for header in headers:
        end_raw._shapes.clear()
        data = frame(header.encode())
        for cmd in FrameDecoder().feed(data * 3):
            assert type(cmd) is not EndRawRequest
            assert _command(cmd) == header_json.decode_header(header.encode())
        assert not end_raw._shapes


def test_the_processor_ends_what_a_shape_read(tmp_path: Any) -> None:
    """Commits and rollbacks read by a shape are stored; a wrong group or table offset, an
    unknown offset, a second END: the general path's errors (or nothing, for an unknown half's
    oneway: not found is an error too)."""
    tx_props = "UNIQ_KEY\x01AC1\x02TRAN_MSG\x01true\x02PGROUP\x01PG"

    def oneway(fields: dict[str, str], kind: str) -> bytes:
        ext = {**fields, "msgId": "ID", "commitOrRollback": kind}
        ext = {k: ext[k] for k in end_raw._SDK_ORDER if k in ext}  # (our SDK's order)
        return RemotingCommand(code=RequestCode.END_TRANSACTION, ext_fields=ext, flag=RPC_ONEWAY).encode()

    async def run(broker: Any) -> None:
        svc = broker.transactional_message_service
        end = broker.end_transaction_processor.end_transaction
        # (offsets of 4 digits from the 7th, table offsets of 2 from the 11th: one shape each)
        halves = [prepare(broker, tx_props, None) for _ in range(12)]
        end_raw._shapes.clear()
        batch = zip(halves[6:10], ["8", "8", "12", "12"], strict=True)
        cmds = FrameDecoder().feed(b"".join(oneway(h, k) for h, k in batch))
        assert [type(c) for c in cmds] == [EndTxRequest, EndRawRequest, EndTxRequest, EndRawRequest]
        assert [end(None, c) for c in cmds] == [None] * 4
        await asyncio.sleep(0)  # the turn's flush
        assert (svc.counters.committed, svc.counters.rolled_back) == (2, 2)
        wrong = halves[10]
        refused = [
            ({**wrong, "producerGroup": "PH"}, "The producer group wrong"),
            ({**wrong, "tranStateTableOffset": "12"}, "The transaction state table offset wrong"),
            (halves[7], "already committed or rolled back"),
            ({**wrong, "commitLogOffset": str(int(wrong["commitLogOffset"]) + 1)}, "Find prepared"),
        ]
        for fields, remark in refused:
            end_raw._shapes.clear()  # (a length's shape is not replaced at once: RELEARN_AFTER)
            _, cmd = FrameDecoder().feed(oneway(fields, "8") * 2)  # (the first teaches its shape)
            assert type(cmd) is EndRawRequest
            with pytest.raises(RemoteSystemError, match=remark):
                end(None, cmd)
        assert (svc.counters.committed, svc.counters.rolled_back) == (2, 2)
        end_raw._shapes.clear()
        _, cmd = FrameDecoder().feed(oneway(wrong, "8") + oneway(halves[11], "8"))  # (one shape)
        assert type(cmd) is EndRawRequest and end(None, cmd) is None
        await asyncio.sleep(0)
        assert (svc.counters.committed, svc.counters.rolled_back) == (3, 2)

    with offline_broker(tmp_path) as broker:
        asyncio.run(run(broker))
