"""JSON header codec (serialize type 0), the form every C++/ali-ons client speaks.

The header is fastjson's rendering of ``RemotingCommand``::

    {"code":0,"extFields":{"k":"v"},"flag":1,"language":"JAVA","opaque":12,
     "remark":"...","serializeTypeCurrentRPC":"JSON","version":409}

Quirks honoured:

* clients send extFields values as JSON numbers and booleans (C++ for ints, ali-ons for
  everything): they are coerced to Java's string forms (``1`` → ``"1"``, ``true`` → ``"true"``);
  ``null`` values are dropped;
* C++ always sends empty ``Signature``/``AccessKey``/``OnsChannel``: empty ones are treated as absent;
* C++ appends ``\\n`` to the header text (it is inside the header length; JSON ignores it);
* every value we emit is a JSON string, because C++ reads only string values.

orjson is used when importable (~15x faster than ``json`` on this path, docs/development.md, hot paths); the
stdlib fallback keeps the codec usable without it. Both are exercised by the tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pocketmq.remoting.protocol.codes import LanguageCode
from pocketmq.remoting.protocol.errors import HeaderDecodeError

try:  # pragma: no cover - exercised through the module-level switch in tests
    import orjson

    _loads: Callable[[Any], Any] = orjson.loads
    _dumps: Callable[[Any], bytes] = orjson.dumps
    HAVE_ORJSON = True
except ImportError:  # pragma: no cover
    HAVE_ORJSON = False

    def _loads(data: bytes) -> Any:
        return json.loads(bytes(data))  # the stdlib reads neither memoryviews nor slices of them

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


#: Defence against absurd headers: more ext fields than this is a protocol error.
MAX_EXT_FIELDS = 4096

try:  # pragma: no cover - exercised through the module-level switch in tests
    from typing import Annotated

    import msgspec

    # The range checks in the types: msgspec checks them in C, while it decodes (a value
    # outside them is refused, and the orjson path then decides as it does for any refusal).
    _Int32 = Annotated[int, msgspec.Meta(ge=-0x80000000, le=0x7FFFFFFF)]
    _Int64 = Annotated[int, msgspec.Meta(ge=-0x8000000000000000, le=0x7FFFFFFFFFFFFFFF)]
    _Ext = Annotated[dict[str, str], msgspec.Meta(max_length=MAX_EXT_FIELDS)]

    class _Header(msgspec.Struct, gc=False, forbid_unknown_fields=True):
        """The header of every well-behaved peer, typed: decoded and checked in one C call."""

        code: _Int32
        flag: _Int64
        language: str
        opaque: _Int32
        version: _Int64
        extFields: _Ext | None = None
        remark: str | None = None
        serializeTypeCurrentRPC: str | None = None

    class SendV2Fields(msgspec.Struct, gc=False, forbid_unknown_fields=True):
        """SEND_MESSAGE_V2's extFields as our SDK and the Java client send them (short names,
        string values; ``SendMessageRequestHeader``'s V2 table): the send processor parses its
        header from these attributes (``from_v2_attrs``) instead of from a dict."""

        a: str
        b: str
        c: str
        d: str
        e: str
        f: str
        g: str
        h: str
        i: str | None = None
        j: str | None = None
        k: str | None = None
        l: str | None = None  # noqa: E741  (the wire's name)
        m: str | None = None
        n: str | None = None

    class _SendV2Header(_Header, gc=False, forbid_unknown_fields=True):
        """``_Header`` with SEND_MESSAGE_V2's extFields typed (no dict, no key strings built)."""

        extFields: SendV2Fields  # type: ignore[assignment]

    _typed_decode: Callable[[Any], _Header] | None = msgspec.json.Decoder(_Header).decode
    #: None without msgspec; raises on whatever it refuses (an unknown or credential key, a
    #: number or null value, a missing a..h): such a header takes ``typed_decode``'s path
    send_v2_decode: Callable[[Any], _SendV2Header] | None = msgspec.json.Decoder(_SendV2Header).decode
except ImportError:  # pragma: no cover
    _typed_decode = None
    send_v2_decode = None

#: How fastjson (sorted keys) and our encoder start a SEND_MESSAGE_V2 request's header with
#: extFields: only such a header is tried with ``send_v2_decode``.
SEND_V2_START = b'{"code":310,"extFields":{'

#: The typed decode for :mod:`~pocketmq.remoting.protocol.frame`'s per-frame loop (None without
#: msgspec): raises on whatever it refuses; a result is the header when its ``language`` is in
#: ``LANGUAGE_BY_NAME`` and its extFields pass ``credentials_kept`` (else ``decode_untyped``).
typed_decode = _typed_decode


def _std_loads(data: bytes) -> Any:
    return json.loads(data)


def _std_dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


_LANGUAGE_BY_NAME = {lang.name: int(lang) for lang in LanguageCode}
LANGUAGE_BY_NAME = _LANGUAGE_BY_NAME
_LANGUAGE_NAMES = {int(lang): lang.name for lang in LanguageCode}
_LANGUAGE_BYTES = {int(lang): lang.name.encode() for lang in LanguageCode}
_OTHER = int(LanguageCode.OTHER)
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
#: The header's keys in fastjson's (alphabetical) order; ``%d`` renders ints as JSON does.
_TPL = b'{"code":%d,"flag":%d,"language":"%b","opaque":%d,"serializeTypeCurrentRPC":"%b","version":%d}'
_TPL_EXT = (
    b'{"code":%d,"extFields":%b,"flag":%d,"language":"%b","opaque":%d,'
    b'"serializeTypeCurrentRPC":"%b","version":%d}'
)
_TPL_EXT_REMARK = (
    b'{"code":%d%b,"flag":%d,"language":"%b","opaque":%d,"remark":%b,'
    b'"serializeTypeCurrentRPC":"%b","version":%d}'
)
_SERIALIZE_NAMES = ("JSON", "ROCKETMQ")
#: The same two templates with serializeTypeCurrentRPC JSON already filled in, for
#: ``RemotingCommand.encode_header``'s inline fast path (no remark, JSON, orjson present).
TPL_JSON = _TPL.replace(b'"%b","version"', b'"JSON","version"')
TPL_EXT_JSON = _TPL_EXT.replace(b'"%b","version"', b'"JSON","version"')
LANGUAGE_BYTES = _LANGUAGE_BYTES
dumps = _dumps
#: Credential keys the C++ client always sends, empty when no ACL is configured.
_EMPTY_MEANS_ABSENT = frozenset(("Signature", "AccessKey", "OnsChannel"))


def java_string(value: Any) -> str | None:
    """Java's ``String.valueOf`` of a JSON scalar as fastjson would coerce it (None = drop)."""
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # Java prints doubles with a trailing ".0" for integral values.
        return repr(value) if not value.is_integer() else f"{value:.1f}"
    # Nested arrays/objects: fastjson would render them back to JSON text.
    return _std_dumps(value).decode()


def decode_header(
    data: bytes | bytearray | memoryview,
    loads: Callable[[Any], Any] | None = None,
) -> tuple[int, int, int, int, int, str | None, dict[str, str] | None]:
    """Decode a JSON header into ``(code, language, version, opaque, flag, remark, ext_fields)``.

    Raises:
        HeaderDecodeError: invalid UTF-8/JSON, wrong types, too many fields. ``opaque`` is set
            on the error whenever it could be read, so the server can answer SYSTEM_ERROR.
    """
    if loads is None and _typed_decode is not None:
        # The common header, typed by msgspec in C (every extFields value a str, ints ints in
        # range, no other key): ~1/3 of orjson.loads plus the checks below. Whatever it refuses
        # (a number where a string goes, an unknown key, invalid JSON, or anything orjson would
        # read differently: ints past int64, which orjson makes floats) takes the orjson path
        # below, which decides and words the outcome as before.
        try:
            h = _typed_decode(data)
        except Exception:
            pass
        else:
            ext = h.extFields
            if h.language in _LANGUAGE_BY_NAME and (ext is None or credentials_kept(ext)):
                return h.code, _LANGUAGE_BY_NAME[h.language], h.version, h.opaque, h.flag, h.remark, ext
    return decode_untyped(data, loads)


def credentials_kept(ext: dict[str, str]) -> bool:
    """False when ``ext`` holds an *empty* credential key (it means "absent": the orjson path
    drops it); ``in`` first: no method call when none is sent (no ACL)."""
    if not ("Signature" in ext or "AccessKey" in ext or "OnsChannel" in ext):
        return True
    get = ext.get
    return get("Signature") != "" and get("AccessKey") != "" and get("OnsChannel") != ""


def decode_untyped(
    data: bytes | bytearray | memoryview,
    loads: Callable[[Any], Any] | None = None,
) -> tuple[int, int, int, int, int, str | None, dict[str, str] | None]:
    """``decode_header`` without the typed decode (for a header it refused)."""
    try:
        # orjson reads bytearrays and memoryviews directly; a given ``loads`` gets bytes.
        obj = _loads(data) if loads is None else loads(bytes(data))
    except (ValueError, TypeError, RecursionError) as exc:
        raise HeaderDecodeError(f"invalid JSON header: {exc}") from None
    # Fast path: what every well-behaved peer sends, checked in as few operations as possible
    # (this runs for every frame on both sides). Anything unusual (a missing key, a non-object,
    # an unknown or numeric language, C++/ali-ons value quirks, a bad type) takes the
    # field-by-field path for its precise error or coercion.
    try:
        code = obj["code"]
        opaque = obj["opaque"]
        flag = obj["flag"]
        version = obj["version"]
        language = _LANGUAGE_BY_NAME[obj["language"]]  # subscript: no .get call per frame
    except (KeyError, TypeError):
        return _decode_checked(obj)
    # ``in`` + subscript: no bound-method call (remark is absent from every hot frame)
    remark = obj["remark"] if "remark" in obj else None  # noqa: SIM401
    raw_ext = obj["extFields"] if "extFields" in obj else None  # noqa: SIM401
    if (
        type(code) is int
        and type(opaque) is int
        and type(flag) is int
        and type(version) is int
        and (remark is None or type(remark) is str)
        and -0x80000000 <= opaque <= 0x7FFFFFFF  # int32, as literals: no global lookups
        and -0x80000000 <= code <= 0x7FFFFFFF
    ):
        if raw_ext is None:
            return code, language, version, opaque, flag, remark, None
        if type(raw_ext) is dict and len(raw_ext) <= MAX_EXT_FIELDS:
            for value in raw_ext.values():
                if type(value) is not str:
                    break
            else:
                # only an *empty* credential key needs the checked path (it means "absent");
                # signed requests (ACL) stay on this one
                # (``in`` first: no method call when no credential key is sent, without ACL)
                if not ("Signature" in raw_ext or "AccessKey" in raw_ext or "OnsChannel" in raw_ext):
                    return code, language, version, opaque, flag, remark, raw_ext
                get = raw_ext.get
                if get("Signature") != "" and get("AccessKey") != "" and get("OnsChannel") != "":
                    return code, language, version, opaque, flag, remark, raw_ext
    return _decode_checked(obj)


def _decode_checked(obj: Any) -> tuple[int, int, int, int, int, str | None, dict[str, str] | None]:
    """The field-by-field path: precise errors, C++/ali-ons value coercion."""
    if type(obj) is not dict:
        raise HeaderDecodeError("JSON header is not an object")
    opaque = obj.get("opaque", 0)
    if type(opaque) is not int or not _INT32_MIN <= opaque <= _INT32_MAX:
        raise HeaderDecodeError(f"invalid opaque {opaque!r}")
    code = obj.get("code")
    if type(code) is not int or not _INT32_MIN <= code <= _INT32_MAX:
        raise HeaderDecodeError(f"invalid code {code!r}", opaque=opaque)
    flag = obj.get("flag", 0)
    if type(flag) is not int:
        raise HeaderDecodeError(f"invalid flag {flag!r}", opaque=opaque)
    version = obj.get("version", 0)
    if type(version) is not int:
        raise HeaderDecodeError(f"invalid version {version!r}", opaque=opaque)
    lang = obj.get("language", "JAVA")
    if type(lang) is str:
        language = _LANGUAGE_BY_NAME.get(lang, _OTHER)
    elif type(lang) is int:  # some clients write the ordinal
        language = lang
    else:
        raise HeaderDecodeError(f"invalid language {lang!r}", opaque=opaque)
    remark = obj.get("remark")
    if remark is not None and type(remark) is not str:
        raise HeaderDecodeError(f"invalid remark {remark!r}", opaque=opaque)
    raw_ext = obj.get("extFields")
    ext: dict[str, str] | None = None
    if raw_ext is not None:
        if type(raw_ext) is not dict:
            raise HeaderDecodeError("extFields is not an object", opaque=opaque)
        if len(raw_ext) > MAX_EXT_FIELDS:
            raise HeaderDecodeError(
                f"{len(raw_ext)} extFields exceed the limit of {MAX_EXT_FIELDS}", opaque=opaque
            )
        # Coerce numbers/booleans (C++, ali-ons), drop nulls.
        ext = raw_ext
        for value in raw_ext.values():
            if type(value) is not str:
                ext = _coerce(raw_ext)
                break
        for key in _EMPTY_MEANS_ABSENT:
            if ext.get(key) == "":
                if ext is raw_ext:
                    ext = dict(raw_ext)
                del ext[key]
    return code, language, version, opaque, flag, remark, ext


def _coerce(raw: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in raw.items():
        text = value if type(value) is str else java_string(value)
        if text is not None:
            out[key] = text
    return out


def encode_header(
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, str] | None,
    serialize_type: int = 0,
    dumps: Callable[[Any], bytes] | None = None,
) -> bytes:
    """Encode a header the way fastjson does: keys in alphabetical order, nulls omitted."""
    if dumps is None and HAVE_ORJSON:
        # Fast path (every frame): the fixed keys come from a template, only the extFields
        # object and the remark go through orjson. Byte-identical to dumping the whole dict.
        lang = _LANGUAGE_BYTES.get(language, b"OTHER")
        stype = b"ROCKETMQ" if serialize_type == 1 else b"JSON"
        if remark is None:
            if ext_fields:
                return _TPL_EXT % (code, _dumps(ext_fields), flag, lang, opaque, stype, version)
            return _TPL % (code, flag, lang, opaque, stype, version)
        return _TPL_EXT_REMARK % (
            code,
            b',"extFields":' + _dumps(ext_fields) if ext_fields else b"",
            flag,
            lang,
            opaque,
            _dumps(remark),
            stype,
            version,
        )
    obj: dict[str, Any] = {"code": code}
    if ext_fields:
        obj["extFields"] = ext_fields
    obj["flag"] = flag
    obj["language"] = _LANGUAGE_NAMES.get(language, "OTHER")
    obj["opaque"] = opaque
    if remark is not None:
        obj["remark"] = remark
    obj["serializeTypeCurrentRPC"] = _SERIALIZE_NAMES[serialize_type] if 0 <= serialize_type <= 1 else "JSON"
    obj["version"] = version
    return (dumps or _dumps)(obj)
