"""END_TRANSACTION frames decoded typed (``remoting.protocol.end_fields``): the same command as
the general decode, or the general decode itself for what the struct refuses; the processor
reads the typed fields as it reads the dict."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pocketmq.remoting.protocol import header_json
from pocketmq.remoting.protocol.codes import RPC_ONEWAY, RequestCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.end_fields import EndTxRequest
from pocketmq.remoting.protocol.end_raw import EndRawRequest
from pocketmq.remoting.protocol.errors import RemoteSystemError
from pocketmq.remoting.protocol.frame import FrameDecoder
from tests.broker.transaction.test_recent import offline_broker, prepare

FIELDS = {
    "producerGroup": "PG",
    "tranStateTableOffset": "3",
    "commitLogOffset": "1024",
    "commitOrRollback": "8",
    "fromTransactionCheck": "false",
    "msgId": "U",
    "transactionId": "T",
}
#: the typed kinds (a header of a learnt shape is read by it: remoting.protocol.end_raw)
ENDS = (EndTxRequest, EndRawRequest)
TX_PROPS = "UNIQ_KEY\x01AC1\x02TRAN_MSG\x01true\x02PGROUP\x01PG"


def frame(ext: dict[str, Any] | None, sort: bool = False, language: str = "JAVA", **head: Any) -> bytes:
    """An END_TRANSACTION frame with the header ``ext`` (any JSON values), keys in our encoder's
    order or sorted (fastjson)."""
    header = {"code": 37, "extFields": ext, "flag": 2, "language": language, "opaque": 9,
              "serializeTypeCurrentRPC": "JSON", "version": 409, **head}  # fmt: skip
    data = json.dumps(header, sort_keys=sort, separators=(",", ":")).encode()
    return (len(data) + 4).to_bytes(4, "big") + len(data).to_bytes(4, "big") + data


CASES = [
    (FIELDS, True),
    ({k: v for k, v in FIELDS.items() if k not in ("fromTransactionCheck", "transactionId")}, True),
    ({**FIELDS, "msgId": 'a"b\\u00e9\\n'}, True),
    ({**FIELDS, "AccessKey": "ak", "Signature": "s"}, False),  # ACL: the general path
    ({**FIELDS, "AccessKey": ""}, False),
    ({**FIELDS, "transactionId": None}, True),  # (not read by the fast path; null in the dict path: absent)
    ({**FIELDS, "commitLogOffset": 1024}, False),
    ({k: v for k, v in FIELDS.items() if k != "msgId"}, False),
    ({**FIELDS, "other": "x"}, False),
    (None, False),
    ({}, False),
]


@pytest.mark.parametrize("sort", [False, True])
@pytest.mark.parametrize(("ext", "typed"), CASES)
def test_the_typed_decode_is_the_general_one(ext: Any, typed: bool, sort: bool) -> None:
    data = frame(ext, sort)
    # one frame per read (feed's fast path, _json_command) and two (the frame loop's own branch)
    (one,) = FrameDecoder().feed(data)
    two = FrameDecoder().feed(data + data)
    assert len(two) == 2
    general = header_json.decode_header(data[8:])
    for cmd in (one, *two):
        assert (type(cmd) in ENDS) == typed
        got = (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields)
        assert got == general
        assert cmd.body is None and cmd.serialize_type == 0
        if typed:
            assert {k: getattr(cmd.fields, k) for k in ext} == ext


def test_an_unknown_language_and_a_remark() -> None:
    (cmd,) = FrameDecoder().feed(frame(FIELDS, language="KLINGON"))
    assert type(cmd) not in ENDS
    for cmd in FrameDecoder().feed(frame(FIELDS, language="KLINGON") * 2):  # (the frame loop)
        assert type(cmd) not in ENDS and cmd.language == header_json.decode_header(
            frame(FIELDS, language="KLINGON")[8:]
        )[1]
    (cmd,) = FrameDecoder().feed(frame(FIELDS, language="CPP"))
    assert type(cmd) in ENDS and cmd.language == header_json.LANGUAGE_BY_NAME["CPP"]
    (cmd,) = FrameDecoder().feed(frame(FIELDS, remark="r"))
    assert type(cmd) is EndTxRequest and cmd.remark == "r"


def test_the_processor_reads_the_typed_fields(tmp_path) -> None:
    """Oneway commits and rollbacks decoded typed are stored as the dict path stores them; what
    the fast read refuses takes the general path (its error), the lazy extFields decoded."""

    def oneway(fields: dict[str, str], kind: str) -> bytes:
        ext = {**fields, "commitOrRollback": kind}
        return RemotingCommand(code=RequestCode.END_TRANSACTION, ext_fields=ext, flag=RPC_ONEWAY).encode()

    async def run(broker: Any) -> None:
        svc = broker.transactional_message_service
        end = broker.end_transaction_processor.end_transaction
        commit = prepare(broker, TX_PROPS, None)
        rollback = prepare(broker, TX_PROPS, None)
        wrong = prepare(broker, TX_PROPS, None)
        cmds = FrameDecoder().feed(oneway(commit, "8") + oneway(rollback, "12"))
        assert [type(c) in ENDS for c in cmds] == [True, True]
        assert [end(None, c) for c in cmds] == [None, None]
        await asyncio.sleep(0)  # the turn's flush
        assert (svc.counters.committed, svc.counters.rolled_back) == (1, 1)
        refused = [
            ({**wrong, "producerGroup": "other"}, "The producer group wrong"),
            ({**wrong, "tranStateTableOffset": "99"}, "The transaction state table offset wrong"),
            (commit, "already committed or rolled back"),  # a second END_TRANSACTION of one
        ]
        for fields, remark in refused:  # (the general path's errors)
            (cmd,) = FrameDecoder().feed(oneway(fields, "8"))
            assert type(cmd) in ENDS
            with pytest.raises(RemoteSystemError, match=remark):
                end(None, cmd)
        assert (svc.counters.committed, svc.counters.rolled_back) == (1, 1)

    with offline_broker(tmp_path) as broker:
        asyncio.run(run(broker))
