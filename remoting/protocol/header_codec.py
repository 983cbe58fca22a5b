"""The codec behind typed custom headers (the ``extFields`` of requests and responses).

Each header is a slotted dataclass whose fields carry their wire name (the Java field name)
and, for SEND_MESSAGE_V2, their short name. ``@header`` reads that one field table and
generates, with ``exec``, a straight-line ``from_ext_fields`` / ``to_ext_fields`` pair for the
class: no per-field loop, dict lookups by constant keys (the send and pull headers sit on the
hot path).

Wire rules (Java ``RemotingCommand.decodeCommandCustomHeader``): values are strings; ints are
parsed as decimal (``Integer`` fields must fit int32); booleans follow ``Boolean.parseBoolean``
(only "true", any case, is true — plus "1": the C++ client of the ``rocketmq`` 0.4.4 wheel sends
``"batch":"1"``/``"unitMode":"0"``, and a batch it flags with "1" is a batch); a missing required field or an unparsable value is an error
(SYSTEM_ERROR, remark naming the field); unknown keys are ignored; ``None`` is never emitted.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from pocketmq.remoting.protocol.errors import HeaderFieldError

T = TypeVar("T", bound="CommandHeader")

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: Canonical decimal text of small ints -> value: exactly what int() returns for these strings,
#: all in range and without underscores, so the checks below are not needed for them.
_SMALL_INTS = {str(i): i for i in range(-1, 1024)}


def wire(
    name: str,
    *,
    default: Any = dataclasses.MISSING,
    v2: str | None = None,
    int32: bool = False,
    big: bool = False,
) -> Any:
    """Declare a header field: Java name ``name``, optional V2 short name, int32 range check;
    ``big``: an int field whose values are never small (a timestamp): parsed by ``int()`` only."""
    meta = {"wire": name, "v2": v2, "int32": int32, "big": big}
    return dataclasses.field(default=default, metadata=meta)


class CommandHeader:
    """Base of every custom header. Subclasses get fast generated codecs from ``@header``."""

    __slots__ = ()
    #: (attribute, wire name, v2 name, kind, required, int32) rows, set by ``@header``.
    FIELD_TABLE: ClassVar[tuple[tuple[str, str, str | None, str, bool, bool], ...]] = ()

    @classmethod
    def from_ext_fields(cls: type[T], ext: Mapping[str, str] | None) -> T:
        """Parse a header from ``extFields``.

        Raises:
            HeaderFieldError: a required field is missing or a value does not parse.
        """
        return _generic_parse(cls, ext or {}, v2=False)

    @classmethod
    def from_ext_fields_v2(cls: type[T], ext: Mapping[str, str] | None) -> T:
        """Parse from the short-name (SEND_MESSAGE_V2) form."""
        return _generic_parse(cls, ext or {}, v2=True)

    @classmethod
    def from_v2_attrs(cls: type[T], fields: Any) -> T:
        """Parse from an object whose attributes are the V2 short names (None: absent), as
        ``from_ext_fields_v2`` parses the same values from a dict."""
        values = {row[2]: getattr(fields, row[2], None) for row in cls.FIELD_TABLE if row[2]}
        return _generic_parse(cls, {k: v for k, v in values.items() if v is not None}, v2=True)

    def to_ext_fields(self) -> dict[str, str]:
        """Render as ``extFields`` (strings only, ``None`` fields omitted)."""
        return _generic_render(self, v2=False)

    def to_ext_fields_v2(self) -> dict[str, str]:
        """Render with the short (SEND_MESSAGE_V2) names."""
        return _generic_render(self, v2=True)


def _generic_render(obj: CommandHeader, *, v2: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for attr, name, v2name, kind, _req, _i32 in obj.FIELD_TABLE:
        value = getattr(obj, attr)
        if value is not None:
            out[v2name if v2 and v2name else name] = _render(value, kind)
    return out


def _render(value: Any, kind: str) -> str:
    if kind == "bool":
        return "true" if value else "false"
    return str(value)


def _parse_int(cls: type, name: str, raw: str, int32: bool) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise HeaderFieldError(f"{cls.__name__}: field {name}={raw!r} is not a number") from None
    if "_" in raw or not (_INT32_MIN if int32 else _INT64_MIN) <= value <= (
        _INT32_MAX if int32 else _INT64_MAX
    ):
        raise HeaderFieldError(f"{cls.__name__}: field {name}={raw!r} is out of range")
    return value


def _missing(cls: type, name: str) -> HeaderFieldError:
    return HeaderFieldError(f"the custom field <{name}> is null ({cls.__name__})")


def _generic_parse(cls: type[T], ext: Mapping[str, str], *, v2: bool) -> T:
    kwargs: dict[str, Any] = {}
    for attr, name, v2name, kind, required, int32 in cls.FIELD_TABLE:
        key = v2name if v2 and v2name else name
        raw = ext.get(key)
        if raw is None:
            if required:
                raise _missing(cls, key)
            continue
        if kind == "int":
            kwargs[attr] = _parse_int(cls, key, raw, int32)
        elif kind == "bool":
            kwargs[attr] = raw == "1" or raw.lower() == "true"
        else:
            kwargs[attr] = raw
    return cls(**kwargs)


def _kind_of(hint: Any) -> tuple[str, bool]:
    """Map a resolved annotation to (kind, optional)."""
    args = typing.get_args(hint)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), hint) if args else hint
    if base is bool:
        return "bool", optional
    if base is int:
        return "int", optional
    if base is str:
        return "str", optional
    raise TypeError(f"unsupported header field type {hint!r}")


def _gen_parser(
    cls: type,
    table: tuple[tuple[str, str, str | None, str, bool, bool], ...],
    v2: bool,
    attrs: bool = False,
) -> Callable[..., Any]:
    if attrs and not hasattr(cls, "__post_init__"):
        return _gen_attrs_parser(cls, table)
    # Required fields are read by subscript inside one try (a dict subscript is a single
    # specialised opcode; ``ext.get`` is a method call per field): the KeyError of the first
    # missing one, in table order, becomes the same error the per-field check raised.
    # ``attrs``: the V2 values are attributes of an object (a decoded SendV2Fields, None for
    # an absent one) instead of dict items
    lines = (
        ["def parse(cls, ext):"]
        if attrs
        else ["def parse(cls, ext):", "    if ext is None: ext = {}", "    g = ext.get"]
    )
    post_init = hasattr(cls, "__post_init__")
    # Without a __post_init__, each value goes straight into its slot of the new object (no
    # local and no keyword call: the generated __init__ only assigns them); an error drops it.
    lines.append("    try:" if post_init else "    obj = _new(cls)\n    try:")
    bigs = {f.name for f in dataclasses.fields(typing.cast(Any, cls)) if f.metadata.get("big")}
    for attr, name, v2name, kind, required, int32 in table:
        key = v2name if v2 and v2name else name
        big = attr in bigs
        dest = attr if post_init else f"obj.{attr}"
        if required and attrs:  # (the decoded struct has a str there: no None to refuse)
            lines.append(f"        v = ext.{key}")
        elif required:
            lines.append(f"        v = ext[{key!r}]")
            lines.append(f"        if v is None: raise _missing(cls, {key!r})")
        else:
            lines.append(f"        v = ext.{key}" if attrs else f"        v = g({key!r})")
            lines.append(f"        if v is None: {dest} = _default_{attr}")
            lines.append("        else:")
        ind = "        " if required else "            "
        if kind == "int":
            # int() first (the C parser, no extra checks on the happy path); what it accepts
            # beyond plain decimals (underscores) and out-of-range values go to the checked
            # parser, which raises. Same outcome as always calling _parse_int, at half the cost.
            lo, hi = (_INT32_MIN, _INT32_MAX) if int32 else (_INT64_MIN, _INT64_MAX)
            checked = [
                f"{ind}    try: x = int(v)",
                f"{ind}    except ValueError: x = _parse_int(cls, {key!r}, v, {int32!r})",
                f"{ind}    else:",
                f"{ind}        if not {lo} <= x <= {hi} or '_' in v: _parse_int(cls, {key!r}, v, {int32!r})",
            ]
            if big:  # (timestamps, offsets: the small-int table below would miss)
                lines += [f"{ind}if True:", *checked]
            else:
                # Small values (queue ids, flags, counts: most int fields of a send) come from
                # a table first: a dict lookup is a quarter of int()'s cost.
                lines += [f"{ind}x = _small(v)", f"{ind}if x is None:", *checked]
            lines.append(f"{ind}{dest} = x")
        elif kind == "bool":
            # "true"/"false" (what every client sends) decided by one comparison each
            lines.append(
                f"{ind}{dest} = True if v == 'true' else False if v == 'false' else v == '1' or v.lower() == 'true'"
            )
        else:
            lines.append(f"{ind}{dest} = v")
    if not table:
        lines.append("        pass")
    lines.append("    except KeyError as exc:")
    lines.append("        raise _missing(cls, exc.args[0]) from None")
    if post_init:
        lines.append(f"    return cls({', '.join(f'{row[0]}={row[0]}' for row in table)})")
    else:
        lines.append("    return obj")
    namespace: dict[str, Any] = {
        "_missing": _missing,
        "_parse_int": _parse_int,
        "_new": object.__new__,
        "_small": _SMALL_INTS.get,
    }
    for f in dataclasses.fields(typing.cast(Any, cls)):
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
    exec("\n".join(lines), namespace)
    return typing.cast(Callable[..., Any], namespace["parse"])


def _gen_attrs_parser(
    cls: type, table: tuple[tuple[str, str, str | None, str, bool, bool], ...]
) -> Callable[..., Any]:
    """``from_v2_attrs`` (the send processor's header of every SEND_MESSAGE_V2 the frame decoder
    typed): the values are str attributes (None: absent) of a decoded struct, so no missing-key
    path. Each value goes straight into its slot: a small int by one subscript of the table
    (``_SMALL_INTS``; a KeyError, any other text, takes ``int()`` and the checked parser), a
    str as is. Same values and errors as ``from_ext_fields_v2`` on the same fields, at about
    half the bytecodes of its per-field ``v = ...; x = _small(v)`` form (issue 21)."""
    bigs = {f.name for f in dataclasses.fields(typing.cast(Any, cls)) if f.metadata.get("big")}
    defaults = {f.name: f.default for f in dataclasses.fields(typing.cast(Any, cls))}
    lines = ["def parse(cls, ext):", "    obj = _new(cls)"]
    for attr, _name, v2name, kind, required, int32 in table:
        key = v2name or _name
        dest = f"obj.{attr}"
        ind = "    "
        if kind == "str" and (required or defaults[attr] is None):  # (None: absent, the default)
            lines.append(f"    {dest} = ext.{key}")
            continue
        if not required:
            lines += [f"    v = ext.{key}", f"    if v is None: {dest} = _default_{attr}", "    else:"]
            ind, src = "        ", "v"
        else:
            src = f"ext.{key}"
        if kind == "int":
            lo, hi = (_INT32_MIN, _INT32_MAX) if int32 else (_INT64_MIN, _INT64_MAX)
            checked = f"_int(cls, {key!r}, {src}, {int32!r}, {lo}, {hi})"
            if attr in bigs:  # (timestamps: the small-int table would miss; int() inline)
                if src != "v":
                    lines.append(f"{ind}v = {src}")
                lines += [
                    f"{ind}try: x = int(v)",
                    f"{ind}except ValueError: x = _int(cls, {key!r}, v, {int32!r}, {lo}, {hi})",
                    f"{ind}if not {lo} <= x <= {hi} or '_' in v: _int(cls, {key!r}, v, {int32!r}, {lo}, {hi})",
                    f"{ind}{dest} = x",
                ]
            else:
                lines += [f"{ind}try: {dest} = _SMALL[{src}]", f"{ind}except KeyError: {dest} = {checked}"]
        elif kind == "bool":
            if src != "v":
                lines.append(f"{ind}v = {src}")
            lines.append(
                f"{ind}{dest} = True if v == 'true' else False if v == 'false' else v == '1' or v.lower() == 'true'"
            )
        else:
            lines.append(f"{ind}{dest} = {src}")
    lines.append("    return obj")
    namespace: dict[str, Any] = {"_new": object.__new__, "_SMALL": _SMALL_INTS, "_int": _checked_int}
    for f in dataclasses.fields(typing.cast(Any, cls)):
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
    exec("\n".join(lines), namespace)
    return typing.cast(Callable[..., Any], namespace["parse"])


def _checked_int(cls: type, key: str, raw: str, int32: bool, lo: int, hi: int) -> int:
    """``int(raw)`` when it is in range and has no underscore (what the generated parsers take
    from ``int()``), else ``_parse_int``'s error."""
    try:
        x = int(raw)
    except ValueError:
        return _parse_int(cls, key, raw, int32)
    if not lo <= x <= hi or "_" in raw:
        return _parse_int(cls, key, raw, int32)
    return x


def _gen_render(
    table: tuple[tuple[str, str, str | None, str, bool, bool], ...], v2: bool
) -> Callable[..., Any]:
    lines = ["def render(self):", "    out = {}"]
    for attr, name, v2name, kind, _required, _int32 in table:
        key = v2name if v2 and v2name else name
        expr = "('true' if v else 'false')" if kind == "bool" else ("v" if kind == "str" else "str(v)")
        lines.append(f"    v = self.{attr}")
        lines.append(f"    if v is not None: out[{key!r}] = {expr}")
    lines.append("    return out")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)
    return typing.cast(Callable[..., Any], namespace["render"])


@typing.dataclass_transform(kw_only_default=True, field_specifiers=(wire,))
def header(cls: type[T]) -> type[T]:
    """Class decorator: dataclass(slots, kw_only) + generated codecs from the field table."""
    dc = dataclasses.dataclass(slots=True, kw_only=True)(cls)
    hints = typing.get_type_hints(dc)
    rows = []
    for f in dataclasses.fields(typing.cast(Any, dc)):
        kind, optional = _kind_of(hints[f.name])
        if optional and f.default is dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: optional header fields need a default")
        required = f.default is dataclasses.MISSING
        rows.append(
            (
                f.name,
                f.metadata.get("wire", f.name),
                f.metadata.get("v2"),
                kind,
                required,
                bool(f.metadata.get("int32")),
            )
        )
    table = tuple(rows)
    dc.FIELD_TABLE = table
    dc.from_ext_fields = classmethod(_gen_parser(dc, table, v2=False))  # type: ignore[assignment]
    dc.to_ext_fields = _gen_render(table, v2=False)  # type: ignore[method-assign]
    if any(row[2] for row in table):
        dc.from_ext_fields_v2 = classmethod(_gen_parser(dc, table, v2=True))  # type: ignore[assignment]
        dc.to_ext_fields_v2 = _gen_render(table, v2=True)  # type: ignore[method-assign]
        dc.from_v2_attrs = classmethod(_gen_parser(dc, table, v2=True, attrs=True))  # type: ignore[assignment]
    return dc
