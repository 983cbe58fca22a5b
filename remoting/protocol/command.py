"""``RemotingCommand``: one request or response of the RocketMQ remoting protocol.

Frame layout, big-endian:

    ======  ==========  ============================================================
    offset  size        field
    ======  ==========  ============================================================
    0       4           length = 4 + headerLength + bodyLength (bytes after this word)
    4       4           (serializeType << 24) | headerLength  (type 0 JSON, 1 ROCKETMQ)
    8       headerLen   header (JSON text or ROCKETMQ binary header)
    8+hl    rest        body (absent when empty)
    ======  ==========  ============================================================

A reply is always encoded in the serialize type of its request: the C++ client and ali-ons read
the second word as a plain header length, so they only understand JSON replies.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pocketmq.remoting.protocol import header_binary, header_json
from pocketmq.remoting.protocol.codes import (
    CURRENT_VERSION,
    RPC_ONEWAY,
    RPC_TYPE_RESPONSE,
    LanguageCode,
    ResponseCode,
    SerializeType,
)
from pocketmq.remoting.protocol.errors import HeaderDecodeError, LocalProtocolError
from pocketmq.remoting.protocol.slots import SlotRecord

#: length word + header-length word.
PREFIX = struct.Struct(">ii")
_HEADER_WORD = struct.Struct(">i")
_MAX_HEADER_LEN = 0xFFFFFF
#: Enum members as plain ints: an enum attribute read costs ~80 ns on CPython 3.11.
_JAVA = int(LanguageCode.JAVA)
_CURRENT_VERSION = int(CURRENT_VERSION)
_RPC_ONEWAY = int(RPC_ONEWAY)
_RPC_TYPE_RESPONSE = int(RPC_TYPE_RESPONSE)
_SUCCESS = int(ResponseCode.SUCCESS)
_new = object.__new__
_pack_prefix = PREFIX.pack
_FAST_JSON = header_json.HAVE_ORJSON
_TPL_JSON = header_json.TPL_JSON
_TPL_EXT_JSON = header_json.TPL_EXT_JSON
_LANGUAGE_BYTES = header_json.LANGUAGE_BYTES
_dumps = header_json.dumps

#: Header templates with everything but the opaque (and the extFields object) filled in, per
#: (code, flag, language, version, no ext): a connection sends few distinct combinations, and
#: formatting one number instead of five saves ~60 ns per frame. Bounded: codes come from
#: handlers and callers, not from peers, but a cache must not grow without limit anyway.
_json_templates: dict[tuple[int, int, int, int, bool], bytes] = {}
_MAX_TEMPLATES = 4096


def _json_template(code: int, flag: int, language: int, version: int, no_ext: bool) -> bytes:
    lang = _LANGUAGE_BYTES.get(language, b"OTHER")
    # %% survives this formatting as the %d / %b the per-frame formatting fills in
    if no_ext:
        tpl = _TPL_JSON % (code, flag, lang, 0, version)
    else:
        tpl = _TPL_EXT_JSON % (code, b"%b", flag, lang, 0, version)
    tpl = tpl.replace(b'"opaque":0,', b'"opaque":%d,')
    if len(_json_templates) >= _MAX_TEMPLATES:
        _json_templates.clear()
    _json_templates[(code, flag, language, version, no_ext)] = tpl
    return tpl


@dataclass(slots=True, eq=False)
class RemotingCommand:
    """A decoded or to-be-encoded command. ``ext_fields`` values are always strings."""

    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes | None = None
    language: int = LanguageCode.JAVA
    version: int = CURRENT_VERSION
    serialize_type: int = SerializeType.JSON

    # ---------------------------------------------------------------- construction helpers
    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
        *,
        language: int = LanguageCode.PYTHON,
        oneway: bool = False,
    ) -> RemotingCommand:
        """A request; the transport assigns ``opaque`` when it is sent."""
        # Slots filled directly: one Python frame instead of the call through ``__init__``
        # (this and ``response_to`` run once per RPC).
        self = _new(cls)
        self.code = code
        self.opaque = 0
        self.flag = _RPC_ONEWAY if oneway else 0
        self.remark = None
        self.ext_fields = ext_fields
        self.body = body
        self.language = language
        self.version = _CURRENT_VERSION
        self.serialize_type = 0
        return self

    @classmethod
    def response_to(
        cls,
        request: RemotingCommand,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes | None = None,
    ) -> RemotingCommand:
        """A reply to ``request``: same opaque, response flag, same serialize type."""
        self = _new(cls)
        self.code = code
        self.opaque = request.opaque
        self.flag = _RPC_TYPE_RESPONSE
        self.remark = remark
        self.ext_fields = ext_fields
        self.body = body
        self.language = _JAVA
        self.version = _CURRENT_VERSION
        self.serialize_type = request.serialize_type
        return self

    # ------------------------------------------------------------------------ properties
    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def ext(self, key: str, default: str | None = None) -> str | None:
        fields = self.ext_fields
        if fields is None:
            return default
        return fields.get(key, default)

    # ------------------------------------------------------------------------ encoding
    def encode_header(self) -> bytes:
        """The length prefix, header-length word and header: everything but the body.

        Write it followed by ``body`` with ``transport.writelines`` so the body is never copied.

        Raises:
            LocalProtocolError: the header or frame would exceed the protocol's limits.
        """
        stype = self.serialize_type
        remark = self.remark
        if stype == 0 and remark is None and _FAST_JSON:
            # The common case (every hot request and reply): fastjson's key order from a
            # template, only the extFields object through orjson (header_json.encode_header
            # renders the same bytes; this skips its call and branches).
            ext = self.ext_fields
            key = (self.code, self.flag, self.language, self.version, not ext)
            tpl = _json_templates.get(key)
            if tpl is None:
                tpl = _json_template(*key)
            header = tpl % (_dumps(ext), self.opaque) if ext else tpl % self.opaque
        elif stype == 1:
            header = header_binary.encode_header(
                self.code, self.language, self.version, self.opaque, self.flag, remark, self.ext_fields
            )
        else:
            header = header_json.encode_header(
                self.code,
                self.language,
                self.version,
                self.opaque,
                self.flag,
                remark,
                self.ext_fields,
                stype,
            )
        hlen = len(header)
        body = self.body
        total = 4 + hlen + (len(body) if body else 0)
        if hlen > _MAX_HEADER_LEN or total > 0x7FFFFFFF:
            if hlen > _MAX_HEADER_LEN:
                raise LocalProtocolError(f"header of {hlen} bytes exceeds the 24-bit header length field")
            raise LocalProtocolError(f"frame of {total} bytes exceeds the 31-bit length field")
        return _pack_prefix(total, (stype << 24) | hlen) + header

    def encode(self) -> bytes:
        """The whole frame as one bytes object (tests, small frames)."""
        head = self.encode_header()
        return head + self.body if self.body else head

    def __repr__(self) -> str:
        kind = "response" if self.is_response else "request"
        body = len(self.body) if self.body else 0
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"remark={self.remark!r} ext={self.ext_fields!r} body={body}B)"
        )


#: ``RemotingCommand``'s own ext_fields slot (``SendV2Request`` reads and writes it behind a property)
_T = TypeVar("_T", bound="TypedCommand")
_EXT_SLOT: Any = RemotingCommand.ext_fields  # type: ignore[misc]  # (the descriptor itself)


class SendV2Request(RemotingCommand):
    """A SEND_MESSAGE_V2 request as the frame decoder builds it from a header
    ``header_json.send_v2_decode`` accepts: ``v2_fields`` (``header_json.SendV2Fields``) for the
    send processor. Its ``ext_fields`` are left unset: decoded from ``raw_header`` when first
    asked for (hooks, ACL, tests), the same dict the decoder builds for other frames. (Costly
    then: worth it only where, as here, the hot path never asks.)"""

    __slots__ = ("raw_header", "v2_fields")
    raw_header: bytes | bytearray
    v2_fields: Any

    @property
    def ext_fields(self) -> dict[str, str] | None:
        try:
            return _EXT_SLOT.__get__(self, SendV2Request)  # type: ignore[no-any-return]
        except AttributeError:
            ext = header_json.decode_header(self.raw_header)[6]
            _EXT_SLOT.__set__(self, ext)
            return ext

    @ext_fields.setter
    def ext_fields(self, value: dict[str, str] | None) -> None:
        _EXT_SLOT.__set__(self, value)


class TypedCommand(SlotRecord, RemotingCommand):
    """A command whose fixed-shape JSON header one msgspec call decoded (:func:`typed_command`):
    ``fields`` is its extFields struct, values only; ``ext_fields`` is decoded from
    ``raw_header`` when first asked for (hooks, tests), as ``SendV2Request``'s."""

    __slots__ = ("fields", "raw_header")
    fields: Any
    raw_header: bytes | bytearray

    ext_fields = SendV2Request.ext_fields


def typed_command(
    decode: Callable[[bytes | bytearray], Any] | None, cls: type[_T]
) -> Callable[[bytes | bytearray, bytes | None], _T | None]:
    """The decoder of one fixed-shape JSON header (``decode``: a msgspec decoder of
    ``header_json._Header`` with its extFields typed) into a ``cls``. It returns None when
    msgspec is missing or refuses the header (another key, a credential, a null or number
    value, a missing field) or the language is unknown: the general path then decides, with
    its codes and remarks. (A closure per kind: the same cost as a module function written
    out for it, END_TRANSACTION's and SEND_OK's alike.)"""
    languages = header_json.LANGUAGE_BY_NAME

    def command(header: bytes | bytearray, body: bytes | None) -> _T | None:
        if decode is None:
            return None
        try:
            h = decode(header)
        except Exception:  # (another key, a null value, bad JSON...): the general path
            return None
        language = languages.get(h.language)
        if language is None:
            return None
        cmd = cls()
        cmd.code = h.code
        cmd.language = language
        cmd.version = h.version
        cmd.opaque = h.opaque
        cmd.flag = h.flag
        cmd.remark = h.remark
        cmd.fields = h.extFields
        cmd.raw_header = header
        cmd.body = body
        cmd.serialize_type = 0
        return cmd

    return command


class RenderedReply(RemotingCommand):
    """A JSON reply whose frame head (length words and header) was rendered when it was built,
    from a :func:`reply_template` with the few changing values filled in (no extFields dump,
    no header formatting in ``encode_header``). Its other fields are what the head was
    rendered from and are not changed afterwards (the dispatcher only sets the same opaque and
    the response flag it has); a changed opaque or flag is encoded the general way."""

    __slots__ = ("head", "head_opaque")
    head: bytes
    head_opaque: int

    def encode_header(self) -> bytes:
        if self.opaque == self.head_opaque and self.flag == _RPC_TYPE_RESPONSE:
            return self.head
        return RemotingCommand.encode_header(self)


class EncodedReply(SlotRecord, RenderedReply):
    """The common SEND_OK as a :class:`RenderedReply` whose ``extFields`` dict is built only
    when asked for."""

    __slots__ = ()
    # What every such reply is (``reply_template``'s header): class attributes, read-only on an
    # instance, so a SEND_OK fills six slots fewer (~0.4k instructions); opaque and flag
    # stay slots (the dispatcher may set them)
    code = _SUCCESS
    remark = None
    body = None
    language = LanguageCode.JAVA
    version = _CURRENT_VERSION
    serialize_type = 0

    @property
    def ext_fields(self) -> dict[str, str] | None:
        """As set; if never set, decoded from ``head`` when first asked for (hooks, tests): the
        send path renders the head and leaves the dict unbuilt (most replies are only written)."""
        try:
            return _EXT_SLOT.__get__(self, EncodedReply)  # type: ignore[no-any-return]
        except AttributeError:
            ext = header_json.decode_header(self.head[PREFIX.size :])[6]
            _EXT_SLOT.__set__(self, ext)
            return ext

    @ext_fields.setter
    def ext_fields(self, value: dict[str, str] | None) -> None:
        _EXT_SLOT.__set__(self, value)


_SLOT = "@@pocketmq-slot-%d@@"


def reply_template(
    ext: dict[str, str | None], code: int = _SUCCESS, remark: str | None = None
) -> tuple[str, ...] | None:
    """The header of a JSON reply (JAVA, the current version, the response flag; SUCCESS and no
    remark unless given) with extFields ``ext`` in its order, cut where its changing values go:
    each None value of ``ext`` (one that needs no JSON escaping: hex digits, decimals), then
    the opaque. Joined with those values in between (an f-string), it is byte-identical to the
    reply's ``encode_header``, which renders it here. None if a given value or the remark holds
    the cut marker."""
    filled = {key: _SLOT % i if value is None else value for i, (key, value) in enumerate(ext.items())}
    head = header_json.encode_header(
        code, _JAVA, _CURRENT_VERSION, 0, _RPC_TYPE_RESPONSE, remark, filled
    ).decode()
    slots = [_SLOT % i for i, value in enumerate(ext.values()) if value is None]
    if head.count("@@pocketmq-slot-") != len(slots) or head.count('"opaque":0,') != 1:
        return None
    parts = []
    for slot in slots:
        part, head = head.split(slot, 1)
        parts.append(part)
    part, head = head.split('"opaque":0,', 1)
    return (*parts, part + '"opaque":', "," + head)


def decode_command(frame: bytes | memoryview, *, json_loads: Any = None) -> RemotingCommand:
    """Decode one frame *without* its 4-byte length prefix.

    Raises:
        HeaderDecodeError: the header length word or the header itself is invalid.
    """
    size = len(frame)
    if size < 4:
        raise HeaderDecodeError(f"frame of {size} bytes has no header-length word")
    (word,) = _HEADER_WORD.unpack_from(frame, 0)
    hlen = word & 0xFFFFFF
    if hlen > size - 4:
        raise HeaderDecodeError(f"header length {hlen} exceeds the frame ({size - 4} bytes after the word)")
    data = bytes(frame)
    body = data[4 + hlen :] if size > 4 + hlen else None
    return command_from_header(data[4 : 4 + hlen], (word >> 24) & 0xFF, body, json_loads)


def command_from_header(
    header: bytes | bytearray, serialize_type: int, body: bytes | None, json_loads: Any = None
) -> RemotingCommand:
    """Build a command from its header bytes, serialize type and body.

    Raises:
        HeaderDecodeError: unknown serialize type or invalid header.
    """
    if serialize_type == 0:
        code, language, version, opaque, flag, remark, ext = header_json.decode_header(header, json_loads)
    elif serialize_type == 1:
        code, language, version, opaque, flag, remark, ext = header_binary.decode_header(header)
    else:
        raise HeaderDecodeError(f"unknown serialize type {serialize_type}")
    return RemotingCommand(code, opaque, flag, remark, ext, body, language, version, serialize_type)
