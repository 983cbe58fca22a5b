"""Java value semantics of RocketMQ 4.9's SQL92 filter (``ComparisonExpression.__compare``).

A filter sees five Java types. Here they are: ``int`` (Java ``Integer``), :class:`JLong`
(``Long``), ``float`` (``Double``), ``str`` (``String``: every message property is one) and
``bool`` (``Boolean``); ``None`` is SQL NULL. Literals get their type from the parser: a decimal
literal is an Integer when it fits 32 bits, else a Long; a floating literal is a Double.

Two values of different types are compared as ``__compare(lv, rv)`` with string conversion on
(RocketMQ's parser always turns it on), reading the left type down this table:

========  ==================================================  ===========================
left      right                                               then
========  ==================================================  ===========================
Integer   Long / Double                                       left widened
Integer   String                                              right = ``Integer.valueOf``
Long      Integer / Double                                    the Integer widened / left to Double
Long      String                                              right = ``Long.valueOf``
Double    Integer / Long                                      right to Double
Double    String                                              right = ``Double.valueOf``
String    Boolean / Integer / Long / Double                   left = ``Boolean.valueOf`` /
                                                              ``Integer.valueOf`` / ...
Boolean   String                                              error (Java's cast fails)
other     other                                               -1 ("less")
========  ==================================================  ===========================

A conversion that fails (``"abc"`` or ``"5.5"`` or ``"3000000000"`` as an Integer) raises
:class:`EvalError`: RocketMQ throws there, and the broker counts a message whose evaluation
threw as not matching. ``Double`` compares like ``Double.compareTo`` (NaN above everything,
-0.0 below 0.0).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "EvalError",
    "JLong",
    "java_compare",
    "java_equal",
    "parse_boolean",
    "parse_double",
    "parse_int",
    "parse_long",
    "type_name",
]

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class EvalError(Exception):
    """An evaluation that RocketMQ aborts with an exception (the message does not match)."""


class JLong(int):
    """A Java ``Long`` (a literal that does not fit an ``Integer``, or one with an ``L``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}L"


# Double.valueOf after trim(): decimal (with optional exponent and f/d suffix), NaN, Infinity
_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_JAVA_HEX_DOUBLE = re.compile(
    r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?"
)


def _parse_integral(s: str, lo: int, hi: int) -> int:
    try:
        v = int(s)
    except ValueError:
        raise EvalError(f"For input string: {s!r}") from None
    # int() also takes surrounding blanks and "1_000"; Java does not
    if not lo <= v <= hi or "_" in s or len(s.strip()) != len(s):
        raise EvalError(f"For input string: {s!r}")
    return v


def parse_int(s: str) -> int:
    """``Integer.valueOf(s)``; raises EvalError."""
    return _parse_integral(s, INT_MIN, INT_MAX)


def parse_long(s: str) -> JLong:
    """``Long.valueOf(s)``; raises EvalError."""
    return JLong(_parse_integral(s, LONG_MIN, LONG_MAX))


def parse_double(s: str) -> float:
    """``Double.valueOf(s)`` (leading and trailing control characters and blanks trimmed);
    raises EvalError."""
    t = s.strip("".join(map(chr, range(33))))
    if _JAVA_DOUBLE.fullmatch(t):
        if t[-1] in "fFdD":
            t = t[:-1]
        return float(t)
    m = _JAVA_HEX_DOUBLE.fullmatch(t)
    if m is not None:
        try:
            return float.fromhex(m.group(1) + "0x" + m.group(2))
        except OverflowError:
            return -math.inf if m.group(1) == "-" else math.inf
    raise EvalError(f"For input string: {s!r}")


def parse_boolean(s: str) -> bool:
    """``Boolean.valueOf(s)``: true only for "true" in any case."""
    return len(s) == 4 and s.lower() == "true"


def double_compare(a: float, b: float) -> int:
    """``Double.compare``: NaN is greater than everything (and equal to itself), -0.0 < 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    if a == b:
        if a == 0.0:
            return int(math.copysign(1, a) > 0) - int(math.copysign(1, b) > 0)
        return 0
    return int(math.isnan(a)) - int(math.isnan(b))  # at least one is NaN


def _same_type_compare(lv: object, rv: object) -> int:
    if type(lv) is float:
        return double_compare(lv, rv)  # type: ignore[arg-type]
    if lv == rv:
        return 0
    return -1 if lv < rv else 1  # type: ignore[operator]


#: (left type, right type) -> (left conversion, right conversion): the module table, as data
_CONVERSIONS: dict[tuple[type, type], tuple[Callable[[Any], Any] | None, Callable[[Any], Any] | None]] = {
    (int, JLong): (None, None),  # Python compares int with int subclasses exactly
    (int, float): (float, None),
    (int, str): (None, parse_int),
    (JLong, int): (None, None),
    (JLong, float): (float, None),
    (JLong, str): (None, parse_long),
    (float, int): (None, float),
    (float, JLong): (None, float),
    (float, str): (None, parse_double),
    (str, bool): (parse_boolean, None),
    (str, int): (parse_int, None),
    (str, JLong): (parse_long, None),
    (str, float): (parse_double, None),
}


def java_compare(lv: Any, rv: Any) -> int:
    """``ComparisonExpression.__compare(lv, rv, true)`` of two non-null values (module table)."""
    tl = type(lv)
    tr = type(rv)
    if tl is not tr:
        conv = _CONVERSIONS.get((tl, tr))
        if conv is None:
            if tl is bool and tr is str:
                raise EvalError("a Boolean cannot be compared with a String")
            return -1
        left, right = conv
        if left is not None:
            lv = left(lv)
        if right is not None:
            rv = right(rv)
    return _same_type_compare(lv, rv)


def java_equal(lv: object, rv: object) -> bool | None:
    """The ``=`` of ``ComparisonExpression.doCreateEqual``: NULL = NULL is TRUE, NULL = x is
    NULL, x = NULL is FALSE; equal values of one type are TRUE; else ``__compare`` == 0."""
    if lv is None:
        return True if rv is None else None
    if rv is None:
        return False
    if type(lv) is type(rv) and type(lv) is not float:
        return lv == rv
    return java_compare(lv, rv) == 0


def type_name(v: object) -> str:
    """The Java type name of a value (error messages)."""
    if v is None:
        return "NULL"
    return {bool: "Boolean", int: "Integer", JLong: "Long", float: "Double", str: "String"}.get(
        type(v), type(v).__name__
    )
