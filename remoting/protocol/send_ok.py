"""SEND_OK replies decoded typed, straight into the reply object (the client side).

Every plain send a producer makes is answered by the broker's SEND_OK (``send_checks``'s
``reply_template``): code 0 and five extFields (``MSG_REGION``, ``TRACE_ON``, ``msgId``,
``queueId``, ``queueOffset``). The generic typed decode (``header_json.typed_decode``) builds a
dict of them, key strings included, and ``process_send_response`` then reads them by name. Here
one msgspec call decodes the header into a :class:`SendOkReply` itself, its extFields into
:class:`SendOkFields` (values only), and the client reads ``fields``: no command object filled
field by field from a decoded header (~3k instructions a reply, a third of the decode).
As ``end_fields``: whatever the struct refuses -- another key (a credential, a newer broker's
field), a missing field, a null or number value, an unknown language, a body -- returns None
and the frame takes the general path.

A :class:`SendOkReply` stands in for the general path's :class:`RemotingCommand`: the same
attributes with the same values (``language`` as a code, ``ext_fields`` a dict made when first
asked for: hooks, tests, other readers; ``body`` None, ``serialize_type`` JSON); it is handed
only to the waiter of its opaque, as a reply (the response flag is required).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, cast

import msgspec

from pocketmq.remoting.protocol.codes import RPC_TYPE_RESPONSE
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.header_json import LANGUAGE_BY_NAME

__all__ = ["SEND_OK_START", "SendOkFields", "SendOkReply", "send_ok_command"]

#: How fastjson (sorted keys) and our encoder start a SUCCESS reply's header whose extFields
#: begin with ``MSG_REGION`` (a send's): only such a header is tried typed.
SEND_OK_START = b'{"code":0,"extFields":{"MSG_REGION":'

# The range checks of header_json's _Header (msgspec checks them while it decodes).
_Int32 = Annotated[int, msgspec.Meta(ge=-0x80000000, le=0x7FFFFFFF)]
_Int64 = Annotated[int, msgspec.Meta(ge=-0x8000000000000000, le=0x7FFFFFFFFFFFFFFF)]
_RESPONSE = int(RPC_TYPE_RESPONSE)


class SendOkFields(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """``SendMessageResponseHeader``'s wire fields plus the two the broker adds (string values;
    ``transactionId`` may be absent)."""

    MSG_REGION: str
    TRACE_ON: str
    msgId: str
    queueId: str
    queueOffset: str
    transactionId: str | None = None


class SendOkReply(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """A SEND_OK reply header, decoded typed (``header_json._Header`` with SEND_OK's extFields
    as ``fields``); read as the :class:`RemotingCommand` of the general decode."""

    code: _Int32
    flag: _Int64
    lang: str = msgspec.field(name="language")
    opaque: _Int32
    version: _Int64
    fields: SendOkFields = msgspec.field(name="extFields")
    remark: str | None = None
    serializeTypeCurrentRPC: str | None = None

    # what the general decode gives every such frame (a frame with a body is not decoded here)
    body = None
    serialize_type = 0

    @property
    def language(self) -> int:
        return LANGUAGE_BY_NAME[self.lang]

    @property
    def ext_fields(self) -> dict[str, str]:
        """The general decode's extFields dict (a null value is absent there)."""
        f = self.fields
        ext = {
            "MSG_REGION": f.MSG_REGION, "TRACE_ON": f.TRACE_ON, "msgId": f.msgId, "queueId": f.queueId,
            "queueOffset": f.queueOffset,
        }  # fmt: skip
        if f.transactionId is not None:
            ext["transactionId"] = f.transactionId
        return ext


_decode = msgspec.json.Decoder(SendOkReply).decode


def _send_ok_command(header: bytes | bytearray, body: bytes | None) -> SendOkReply | None:
    if body is not None:
        return None
    try:
        reply = _decode(header)
    except Exception:  # (another key, a null value, bad JSON...): the general path
        return None
    if reply.lang not in LANGUAGE_BY_NAME or not reply.flag & _RESPONSE:
        return None
    return reply


#: The reply of a JSON header starting with :data:`SEND_OK_START`, or None: the general path
#: decodes it (module docstring). Typed as the command it stands in for.
send_ok_command = cast(Callable[[bytes | bytearray, bytes | None], RemotingCommand | None], _send_ok_command)
