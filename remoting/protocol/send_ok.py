"""SEND_OK replies decoded typed: the header's extFields into a struct, no dict (the client side).

Every plain send a producer makes is answered by the broker's SEND_OK (``send_checks``'s
``reply_template``): code 0 and five extFields (``MSG_REGION``, ``TRACE_ON``, ``msgId``,
``queueId``, ``queueOffset``). The generic typed decode (``header_json.typed_decode``) builds a
dict of them, key strings included, and ``process_send_response`` then reads them by name. Here
the header goes to :class:`SendOkFields` in one msgspec call (values only) and
:func:`send_ok_command` returns a :class:`SendOkReply` whose ``fields`` the client reads.
As ``end_fields``: whatever the struct refuses -- another key (a credential, a newer broker's
field), a missing field, a null value or a number where a string goes, a language other than
JAVA, a remark, a body (none of which a broker writes a SEND_OK with) -- returns None and the frame takes the general path; ``ext_fields`` is that path's dict, decoded
from the raw header when first asked for (hooks, tests, other readers).

``queueId`` and ``queueOffset`` are decoded as ints from their text in the decoder's lax mode
(``strict=False``), which saves the client a Python ``int()`` of the offset per reply. Lax mode
takes a little more than the general path for int fields: a quoted int in ``flag``, ``opaque``
or ``version`` (as fastjson reads one into Java's int fields), a JSON number for the two ids
(the general path coerces it to the same value), and a number text in exponent or ``.0`` form
("1e3") for the two ids, which Python's ``int()`` refuses. No broker writes these (RocketMQ's
fastjson and ours write plain digits), and the ``SendResult`` of every reply that has plain
digits is the same as before. A text ``int()`` reads but msgspec does not (a sign, spaces,
leading zeros, ``_``) is refused and takes the general path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pocketmq.remoting.protocol import header_json
from pocketmq.remoting.protocol.codes import LanguageCode, ResponseCode
from pocketmq.remoting.protocol.command import TypedCommand

__all__ = ["SEND_OK_START", "SendOkReply", "send_ok_command"]

_SUCCESS = int(ResponseCode.SUCCESS)
_JAVA = int(LanguageCode.JAVA)

#: How fastjson (sorted keys) and our encoder start a SUCCESS reply's header whose extFields
#: begin with ``MSG_REGION`` (a send's): only such a header is tried typed.
SEND_OK_START = b'{"code":0,"extFields":{"MSG_REGION":'

_decode: Callable[[Any], Any] | None
try:  # pragma: no cover - without msgspec every frame takes the general path
    import msgspec

    class SendOkFields(msgspec.Struct, gc=False, forbid_unknown_fields=True):
        """``SendMessageResponseHeader``'s wire fields plus the two the broker adds (string
        values on the wire; ``transactionId`` may be absent). ``queueId`` and ``queueOffset``
        are read as the ints they spell (the decoder's lax mode: ``int()`` of the text in C,
        not a Python ``int()`` per reply)."""

        MSG_REGION: str
        TRACE_ON: Literal["true", "false"]  # (Java's String.valueOf(boolean); another: the general path)
        msgId: str
        queueId: int
        queueOffset: int
        transactionId: str | None = None

    class _SendOkHeader(msgspec.Struct, gc=False, forbid_unknown_fields=True, kw_only=True):
        """``header_json._Header`` with SEND_OK's extFields typed (no dict, no key strings
        built), its fields (the same types and defaults) in the order our broker and fastjson
        write them (sorted): msgspec tries the field after the last one matched first, so each
        key is found at its first compare (``_Header``'s order, defaults last, costs a scan per
        key: ~0.2k instructions a reply, callgrind). The language and remark every broker
        writes a SEND_OK with, or the general path (:class:`SendOkReply`'s class attributes)."""

        code: Literal[0]
        extFields: SendOkFields
        flag: header_json._Int64
        language: Literal["JAVA"]
        opaque: header_json._Int32
        remark: None = None
        serializeTypeCurrentRPC: Literal["JSON"] | None = None  # (another: the general path)
        version: header_json._Int64

    # strict=False: the digits of queueId's and queueOffset's strings read as ints (what lax
    # mode also takes: the module docstring)
    _decode = msgspec.json.Decoder(_SendOkHeader, strict=False).decode
except ImportError:  # pragma: no cover
    _decode = None


class SendOkReply(TypedCommand):
    """A SEND_OK reply decoded typed: ``fields`` is a :class:`SendOkFields`."""

    __slots__ = ()
    # What every SEND_OK a broker writes is (RocketMQ's and ours: code 0, JAVA, no remark, no
    # body): class attributes, read-only on an instance, so a reply fills five slots fewer and
    # looks no language up; a header of another language or with a remark, or a body, takes
    # the general path (the same values, a plain command)
    code = _SUCCESS
    language = _JAVA
    remark = None
    body = None
    serialize_type = 0


def send_ok_command(header: bytes | bytearray, body: bytes | None) -> SendOkReply | None:
    """:class:`SendOkReply` of a JSON header starting with :data:`SEND_OK_START`; None: the
    general path decodes it (module docstring, :class:`SendOkReply`). (Not ``typed_command``:
    the five fields the class holds are not set.)"""
    if _decode is None or body is not None:
        return None
    try:
        h = _decode(header)
    except Exception:  # (another key, language, a remark, a null value, bad JSON...)
        return None
    cmd = SendOkReply()
    cmd.version = h.version
    cmd.opaque = h.opaque
    cmd.flag = h.flag
    cmd.fields = h.extFields
    cmd.raw_header = header
    return cmd
