"""Reading and writing the JSON dialect of Alibaba fastjson.

fastjson writes maps whose keys are not strings with *non-string keys*, which is not JSON:

====================================  =============================================================
Java type                             fastjson text
====================================  =============================================================
``HashMap<Long,String>`` brokerAddrs  ``{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}``
``Map<Integer,Long>`` offsets         ``{0:100,1:37}``
``Map<MessageQueue,X>``               ``{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}``
====================================  =============================================================

:func:`loads` tries orjson (or ``json``) first, which handles every valid-JSON body at C speed,
and falls back to a small recursive-descent parser only when that fails. The fallback accepts
any JSON value as an object key: unquoted numbers become ``int``/``float`` keys, object keys
become :class:`FrozenDict`, array keys tuples. Limits: ``max_size`` characters and
``max_depth`` nesting; every step consumes input, so garbage fails fast with ``ValueError``.

:func:`dumps`/:func:`dumpb` write fastjson-compatible text: keys sorted, integer keys quoted
(valid JSON, accepted by fastjson, jsoncpp and JSON2) or bare (``quote_int_keys=False``, the
form pre-4.9.4 Java namesrvs emit), and any key or value with a ``__fastjson__()`` method (e.g.
``MessageQueue``) written as the object that method returns -- fastjson's object-as-key form.

The module also holds the lenient field readers the body codecs share (:func:`get_str`,
:func:`get_int`, ...): numbers may arrive as strings, booleans as ``"true"``, and a missing
optional field takes its default. They raise :class:`BodyFormatError`, which names the field.
"""

from __future__ import annotations

import enum
import json
import json.decoder
import math
import re
from collections.abc import Callable, Iterator, Mapping
from json.encoder import encode_basestring
from typing import Any, TypeVar

try:
    import orjson

    HAVE_ORJSON = True
except ImportError:  # pragma: no cover - orjson is a hard dependency; the fallback is for safety
    HAVE_ORJSON = False

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_SIZE",
    "BodyFormatError",
    "FrozenDict",
    "as_object",
    "decode_object",
    "dumpb",
    "dumps",
    "get_bool",
    "get_dict",
    "get_enum",
    "get_float",
    "get_int",
    "get_list",
    "get_str",
    "loads",
]

#: 64 MiB of text: far above a 16 MiB frame, far below trouble.
DEFAULT_MAX_SIZE = 64 * 1024 * 1024
DEFAULT_MAX_DEPTH = 100

E = TypeVar("E", bound=enum.Enum)


class BodyFormatError(ValueError):
    """A JSON body that does not have the expected shape; ``field`` names the culprit."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field

    @property
    def remark(self) -> str:
        """Text for a response remark."""
        return str(self)


class FrozenDict(Mapping[Any, Any]):
    """An immutable, hashable mapping: how a fastjson object-as-key is returned by :func:`loads`."""

    __slots__ = ("_d", "_hash")

    def __init__(self, items: Mapping[Any, Any] | Iterator[tuple[Any, Any]] | None = None) -> None:
        self._d: dict[Any, Any] = dict(items or {})
        self._hash: int | None = None

    def __getitem__(self, key: Any) -> Any:
        return self._d[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._d.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._d == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenDict({self._d!r})"

    def __fastjson__(self) -> Mapping[Any, Any]:
        return self._d


# --------------------------------------------------------------------------------------------
# parsing

# The C-accelerated string scanner of the stdlib json module (not in typeshed).
_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_WS_RE = re.compile(r"[ \t\n\r]*")
_NUMBER_RE = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


def _freeze(value: Any) -> Any:
    """Make a parsed value usable as a dict key."""
    if isinstance(value, dict):
        return FrozenDict((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


class _Parser:
    __slots__ = ("max_depth", "s")

    def __init__(self, s: str, max_depth: int) -> None:
        self.s = s
        self.max_depth = max_depth

    def fail(self, pos: int, what: str) -> ValueError:
        near = self.s[pos : pos + 20]
        return ValueError(f"fastjson: {what} at char {pos} (near {near!r})")

    def ws(self, pos: int) -> int:
        m = _WS_RE.match(self.s, pos)
        assert m is not None  # the pattern matches the empty string
        return m.end()

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        s = self.s
        pos = self.ws(pos)
        if pos >= len(s):
            raise self.fail(pos, "unexpected end of input")
        ch = s[pos]
        if ch == '"':
            try:
                return _scanstring(s, pos + 1, False)
            except json.JSONDecodeError as exc:
                raise self.fail(pos, f"bad string ({exc.msg})") from None
        if ch == "{":
            return self.obj(pos + 1, depth + 1)
        if ch == "[":
            return self.arr(pos + 1, depth + 1)
        m = _NUMBER_RE.match(s, pos)
        if m is not None:
            text = m.group()
            if m.group(1) or m.group(2):
                return float(text), m.end()
            return int(text), m.end()
        for word, val in _LITERALS.items():
            if s.startswith(word, pos):
                return val, pos + len(word)
        raise self.fail(pos, "unexpected character")

    def enter(self, pos: int, depth: int, close: str) -> tuple[int, bool]:
        """Start a container at ``depth``: the position of its first item, and True if it is
        empty (the position is then past ``close``)."""
        if depth > self.max_depth:
            raise self.fail(pos, f"nesting deeper than {self.max_depth}")
        pos = self.ws(pos)
        if pos < len(self.s) and self.s[pos] == close:
            return pos + 1, True
        return pos, False

    def after_item(self, pos: int, close: str) -> tuple[int, bool]:
        """After an item: past its ``,`` (False), or past ``close`` when the container ends (True)."""
        s = self.s
        pos = self.ws(pos)
        if pos < len(s):
            if s[pos] == ",":
                return pos + 1, False
            if s[pos] == close:
                return pos + 1, True
        raise self.fail(pos, f"expected ',' or '{close}'")

    def obj(self, pos: int, depth: int) -> tuple[dict[Any, Any], int]:
        s = self.s
        out: dict[Any, Any] = {}
        pos, done = self.enter(pos, depth, "}")
        while not done:
            key, pos = self.value(pos, depth)
            key = _freeze(key)
            pos = self.ws(pos)
            if pos >= len(s) or s[pos] != ":":
                raise self.fail(pos, "expected ':'")
            val, pos = self.value(pos + 1, depth)
            out[key] = val
            pos, done = self.after_item(pos, "}")
        return out, pos

    def arr(self, pos: int, depth: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        pos, done = self.enter(pos, depth, "]")
        while not done:
            val, pos = self.value(pos, depth)
            out.append(val)
            pos, done = self.after_item(pos, "]")
        return out, pos


def _fast_loads(data: bytes | str) -> Any:
    if HAVE_ORJSON:
        return orjson.loads(data)
    return json.loads(data)  # pragma: no cover


def loads(
    text: str | bytes | bytearray | memoryview,
    *,
    max_size: int = DEFAULT_MAX_SIZE,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """Parse JSON or fastjson's non-string-key dialect.

    Raises:
        ValueError: malformed text, not UTF-8, larger than ``max_size`` or nested deeper than
            ``max_depth``.
    """
    if isinstance(text, bytearray | memoryview):
        text = bytes(text)
    if len(text) > max_size:
        raise ValueError(f"fastjson: document of {len(text)} bytes exceeds the limit of {max_size}")
    try:
        return _fast_loads(text)
    except (ValueError, RecursionError):
        pass
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"fastjson: body is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    parser = _Parser(text, max_depth)
    value, pos = parser.value(0, 0)
    pos = parser.ws(pos)
    if pos != len(text):
        raise parser.fail(pos, "trailing data")
    return value


# --------------------------------------------------------------------------------------------
# writing

_ORJSON_OPTS = (orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS) if HAVE_ORJSON else 0


def _default(obj: Any) -> Any:
    hook = getattr(obj, "__fastjson__", None)
    if hook is not None:
        return hook()
    if isinstance(obj, set | frozenset):
        return sorted(obj, key=_sort_key)
    raise TypeError(f"fastjson: cannot serialise {type(obj).__name__}")


def _sort_key(key: Any) -> tuple[int, Any]:
    if isinstance(key, bool) or key is None:
        return (3, str(key))
    if isinstance(key, int | float):
        return (0, key)
    if isinstance(key, str):
        return (1, key)
    return (2, _render(key, True, None, 0))


def _render_float(x: float) -> str:
    if math.isnan(x) or math.isinf(x):
        return "null"
    return repr(x)


def _render_key(key: Any, quote_int_keys: bool) -> str:
    if isinstance(key, str):
        return encode_basestring(key)
    if isinstance(key, enum.Enum):
        return _render_key(key.value, quote_int_keys)
    if isinstance(key, bool) or key is None:
        return '"' + ("null" if key is None else "true" if key else "false") + '"'
    if isinstance(key, int):
        return f'"{key}"' if quote_int_keys else str(key)
    if isinstance(key, float):
        text = _render_float(key)
        return f'"{text}"' if quote_int_keys else text
    # Objects (MessageQueue, FrozenDict) and tuples: fastjson's object-as-key form.
    return _render(key, quote_int_keys, None, 0)


def _render(obj: Any, quote_int_keys: bool, indent: str | None, level: int) -> str:
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, str):
        return encode_basestring(obj)
    if isinstance(obj, enum.Enum):
        return _render(obj.value, quote_int_keys, indent, level)
    if isinstance(obj, int):
        return str(int(obj))
    if isinstance(obj, float):
        return _render_float(obj)
    hook = getattr(obj, "__fastjson__", None)
    if hook is not None:
        return _render(hook(), quote_int_keys, indent, level)
    if isinstance(obj, Mapping):
        if not obj:
            return "{}"
        keys = sorted(obj, key=_sort_key)
        parts = [
            _render_key(k, quote_int_keys) + ":" + _render(obj[k], quote_int_keys, indent, level + 1)
            for k in keys
        ]
        return _join(parts, "{", "}", indent, level)
    if isinstance(obj, list | tuple | set | frozenset):
        items = sorted(obj, key=_sort_key) if isinstance(obj, set | frozenset) else obj
        if not items:
            return "[]"
        parts = [_render(v, quote_int_keys, indent, level + 1) for v in items]
        return _join(parts, "[", "]", indent, level)
    raise TypeError(f"fastjson: cannot serialise {type(obj).__name__}")


def _join(parts: list[str], open_: str, close: str, indent: str | None, level: int) -> str:
    if indent is None:
        return open_ + ",".join(parts) + close
    inner = "\n" + indent * (level + 1)
    return open_ + inner + ("," + inner).join(parts) + "\n" + indent * level + close


def dumps(obj: Any, *, quote_int_keys: bool = True, pretty: bool = False) -> str:
    """fastjson-compatible text of ``obj`` (dicts, lists, scalars, ``__fastjson__`` objects).

    Keys are sorted (numbers numerically, then strings, then object keys). ``pretty`` indents
    with tabs like fastjson's ``PrettyFormat`` (RocketMQ's config files).

    Raises:
        TypeError: a value of a type with no JSON form.
    """
    return dumpb(obj, quote_int_keys=quote_int_keys, pretty=pretty).decode("utf-8")


def dumpb(obj: Any, *, quote_int_keys: bool = True, pretty: bool = False) -> bytes:
    """:func:`dumps` as UTF-8 bytes (orjson fast path when the document allows it)."""
    if HAVE_ORJSON and quote_int_keys and not pretty:
        try:
            return orjson.dumps(obj, default=_default, option=_ORJSON_OPTS)
        except TypeError:
            pass  # object-as-key maps: orjson cannot write them
    return _render(obj, quote_int_keys, "\t" if pretty else None, 0).encode("utf-8")


# --------------------------------------------------------------------------------------------
# lenient field readers shared by the body codecs

_MISSING: Any = object()


def _lookup(obj: Mapping[str, Any], key: str, aliases: tuple[str, ...]) -> Any:
    if key in obj:
        return obj[key]
    for alias in aliases:
        if alias in obj:
            return obj[alias]
    return _MISSING


def _absent(key: str, default: Any) -> Any:
    """What a missing or null field reads as: ``default``, or BodyFormatError if it has none."""
    if default is _MISSING:
        raise BodyFormatError("required field is missing", field=key)
    return default


def _read_scalar(
    obj: Mapping[str, Any],
    key: str,
    default: Any,
    convert: Callable[[Any, str], Any],
    aliases: tuple[str, ...] = (),
) -> Any:
    """``key``'s value through ``convert`` (which raises BodyFormatError), or :func:`_absent`."""
    value = _lookup(obj, key, aliases)
    if value is _MISSING or value is None:
        return _absent(key, default)
    return convert(value, key)


def get_str(
    obj: Mapping[str, Any], key: str, default: Any = _MISSING, *, aliases: tuple[str, ...] = ()
) -> Any:
    """A string field; numbers are turned into their decimal text (C++/JS send either).

    Raises:
        BodyFormatError: missing without a default, or not a string/number.
    """
    return _read_scalar(obj, key, default, _to_str, aliases)


def _to_str(value: Any, key: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise BodyFormatError(f"expected a string, got {type(value).__name__}", field=key)


def _to_int(value: Any, key: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise BodyFormatError(f"expected an integer, got {value!r:.40}", field=key)


def get_int(
    obj: Mapping[str, Any],
    key: str,
    default: Any = _MISSING,
    *,
    aliases: tuple[str, ...] = (),
    min_value: int | None = None,
    max_value: int | None = None,
) -> Any:
    """An integer field; ``"12"`` and ``12.0`` are accepted.

    Raises:
        BodyFormatError: missing without a default, not an integer, or out of range.
    """
    value = _lookup(obj, key, aliases)
    if value is _MISSING or value is None:
        return _absent(key, default)
    result = _to_int(value, key)
    if (min_value is not None and result < min_value) or (max_value is not None and result > max_value):
        raise BodyFormatError(f"{result} is outside [{min_value}, {max_value}]", field=key)
    return result


def get_float(obj: Mapping[str, Any], key: str, default: Any = _MISSING) -> Any:
    """A floating-point field (``double`` in Java); numbers or numeric strings.

    Raises:
        BodyFormatError: missing without a default, or not a number.
    """
    return _read_scalar(obj, key, default, _to_float)


def _to_float(value: Any, key: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise BodyFormatError(f"expected a number, got {value!r:.40}", field=key)


def get_bool(obj: Mapping[str, Any], key: str, default: Any = _MISSING) -> Any:
    """A boolean field; ``true``/``"true"``/``1`` (case-insensitive strings).

    Raises:
        BodyFormatError: missing without a default, or not a boolean.
    """
    return _read_scalar(obj, key, default, _to_bool)


def _to_bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise BodyFormatError(f"expected a boolean, got {value!r:.40}", field=key)


def get_list(obj: Mapping[str, Any], key: str, *, aliases: tuple[str, ...] = ()) -> list[Any]:
    """An array field; missing or null → ``[]`` (C++ omits empty sets).

    Raises:
        BodyFormatError: present but not an array.
    """
    value = _lookup(obj, key, aliases)
    if value is _MISSING or value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    raise BodyFormatError(f"expected an array, got {type(value).__name__}", field=key)


def get_dict(obj: Mapping[str, Any], key: str, *, aliases: tuple[str, ...] = ()) -> Mapping[Any, Any]:
    """An object field; missing or null → ``{}``.

    Raises:
        BodyFormatError: present but not an object.
    """
    value = _lookup(obj, key, aliases)
    if value is _MISSING or value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    raise BodyFormatError(f"expected an object, got {type(value).__name__}", field=key)


def get_enum(obj: Mapping[str, Any], key: str, enum_cls: type[E], default: Any = _MISSING) -> Any:
    """An enum field given by name (Java) or by ordinal, as int or digit string (C++).

    Raises:
        BodyFormatError: missing without a default, or no such member.
    """
    value = _lookup(obj, key, ())
    if value is _MISSING or value is None or value == "":
        if default is _MISSING:
            raise BodyFormatError("required field is missing", field=key)
        return default
    members = list(enum_cls)
    if isinstance(value, str):
        if value in enum_cls.__members__:
            return enum_cls[value]
        if value.strip().lstrip("-").isdigit():
            value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(members):
        return members[value]
    names = ", ".join(enum_cls.__members__)
    raise BodyFormatError(f"{value!r:.40} is not one of {names} (or their ordinals)", field=key)


def as_object(value: Any, what: str) -> Mapping[Any, Any]:
    """``value`` if it is a JSON object.

    Raises:
        BodyFormatError: anything else.
    """
    if isinstance(value, Mapping):
        return value
    raise BodyFormatError(f"expected an object, got {type(value).__name__}", field=what)


def decode_object(data: bytes | str, what: str) -> Mapping[Any, Any]:
    """Parse a body that must be a JSON object.

    Raises:
        BodyFormatError: not parseable, or not an object.
    """
    try:
        value = loads(data)
    except ValueError as exc:
        raise BodyFormatError(f"unparseable body: {exc}", field=what) from None
    return as_object(value, what)
