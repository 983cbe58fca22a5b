"""ROCKETMQ binary header codec (serialize type 1, ``RocketMQSerializable``).

Only Java peers started with ``rocketmq.serialize.type=ROCKETMQ`` use it. Layout, big-endian:

    ========  ======  ==============================================
    field     size    meaning
    ========  ======  ==============================================
    code      int16   request or response code
    language  int8    LanguageCode byte (JAVA 0, CPP 1, ... RUST 12)
    version   int16   MQVersion ordinal
    opaque    int32   request id
    flag      int32   bit 0 response, bit 1 oneway
    remarkLen int32   0 = no remark
    remark    bytes   UTF-8, remarkLen bytes
    extLen    int32   byte length of the entries that follow
    entries   bytes   repeated: keyLen int16, key UTF-8, valLen int32, value UTF-8
    ========  ======  ==============================================

The fixed part is 21 bytes. A zero-length string decodes as absent (Java reads it as null).
"""

from __future__ import annotations

import struct

from pocketmq.remoting.protocol.errors import HeaderDecodeError, LocalProtocolError
from pocketmq.remoting.protocol.header_json import MAX_EXT_FIELDS

_FIXED = struct.Struct(
    ">h"  # code
    "b"  # language
    "h"  # version
    "i"  # opaque
    "i"  # flag
    "i"  # remark length
)
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
FIXED_SIZE = _FIXED.size + _I32.size  # + extLen word = 21


def decode_header(
    data: bytes | bytearray | memoryview,
) -> tuple[int, int, int, int, int, str | None, dict[str, str] | None]:
    """Decode ``(code, language, version, opaque, flag, remark, ext_fields)``.

    Raises:
        HeaderDecodeError: truncated header, lengths pointing outside it, invalid UTF-8, more
            than ``MAX_EXT_FIELDS`` entries (checked per entry, so a bomb costs no more than that).
    """
    # Parsed from bytes: ``bytes_slice.decode()`` costs half of ``str(memoryview_slice, "utf-8")``
    # (twice per ext entry, 13 entries in a send).
    if type(data) is not bytes:
        data = bytes(data)
    end = len(data)
    if end < FIXED_SIZE:
        raise HeaderDecodeError(f"binary header of {end} bytes is shorter than {FIXED_SIZE}")
    code, language, version, opaque, flag, remark_len = _FIXED.unpack_from(data, 0)
    pos = _FIXED.size
    try:
        remark: str | None = None
        if remark_len < 0 or pos + remark_len + 4 > end:
            raise HeaderDecodeError(f"remark length {remark_len} outside the header", opaque=opaque)
        if remark_len:
            remark = data[pos : pos + remark_len].decode()
        pos += remark_len
        (ext_len,) = _I32.unpack_from(data, pos)
        pos += 4
        if ext_len < 0 or pos + ext_len > end:
            raise HeaderDecodeError(f"ext length {ext_len} outside the header", opaque=opaque)
        ext: dict[str, str] | None = None
        stop = pos + ext_len
        if ext_len:
            ext = {}
            i32 = _I32.unpack_from
            # every entry takes at least 6 bytes: a shorter blob cannot exceed the limit
            count_entries = ext_len > 6 * MAX_EXT_FIELDS
            while pos < stop:
                if pos + 2 > stop:
                    raise HeaderDecodeError("truncated ext key length", opaque=opaque)
                klen = data[pos] << 8 | data[pos + 1]  # int16 without a struct call
                if klen & 0x8000:
                    klen -= 0x10000
                pos += 2
                kend = pos + klen
                if klen < 0 or kend + 4 > stop:
                    raise HeaderDecodeError(f"ext key length {klen} outside the header", opaque=opaque)
                key = data[pos:kend].decode()
                (vlen,) = i32(data, kend)
                pos = kend + 4
                vend = pos + vlen
                if vlen < 0 or vend > stop:
                    raise HeaderDecodeError(f"ext value length {vlen} outside the header", opaque=opaque)
                value = data[pos:vend].decode()
                pos = vend
                if key and value:
                    ext[key] = value
                    if count_entries and len(ext) > MAX_EXT_FIELDS:  # checked while parsing
                        raise HeaderDecodeError(
                            f"more than {MAX_EXT_FIELDS} extFields in binary header", opaque=opaque
                        )
    except UnicodeDecodeError as exc:
        raise HeaderDecodeError(f"invalid UTF-8 in binary header: {exc}", opaque=opaque) from None
    return code, language, version, opaque, flag, remark, ext


#: key -> its int16 length word and UTF-8 bytes: a connection sends the same few keys over and
#: over (a..n in every send). Bounded like command.py's templates.
_key_parts: dict[str, bytes] = {}
_MAX_KEYS = 4096


def _key_part(key: str) -> bytes:
    kb = key.encode()
    part = _I16.pack(len(kb)) + kb
    if len(_key_parts) >= _MAX_KEYS:
        _key_parts.clear()
    _key_parts[key] = part
    return part


def encode_header(
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, str] | None,
) -> bytes:
    """Encode the binary header.

    Raises:
        LocalProtocolError: a value does not fit its field (e.g. code beyond int16).
    """
    remark_bytes = remark.encode() if remark else b""
    ext_parts: list[bytes] = []
    if ext_fields:
        get_key = _key_parts.get
        pack_len = _I32.pack
        for key, value in ext_fields.items():
            vb = value.encode()
            ext_parts += (get_key(key) or _key_part(key), pack_len(len(vb)), vb)
    ext_blob = b"".join(ext_parts)
    try:
        fixed = _FIXED.pack(code, language, version, opaque, flag, len(remark_bytes))
    except struct.error as exc:
        raise LocalProtocolError(f"header value out of range for the binary codec: {exc}") from None
    return b"".join((fixed, remark_bytes, _I32.pack(len(ext_blob)), ext_blob))
