"""RocketMQ's expression factories (``ComparisonExpression.create*``, ``LogicExpression``,
``UnaryExpression``) as compile-time checks plus evaluator closures.

Every :class:`Expr` carries ``fn(properties) -> True | False | None | value``, built once when
the expression is compiled; evaluating a message is one call of the root closure, no tree walk.
``fn`` raises :class:`~.values.EvalError` where RocketMQ's evaluation throws (the message then
does not match). Common shapes get fused closures (a property against a number, a string, an
``IN`` list, ``IS NULL``, ``BETWEEN`` on one property; ``AND``/``OR`` chains flattened); every
other shape takes the generic closures, which follow :mod:`.values` literally. The fused ones
are checked against the generic ones in the tests.

Three-valued logic (Java's ``LogicExpression``): AND is FALSE as soon as one operand is FALSE
(later operands are not evaluated), else NULL if one is NULL, else TRUE; OR likewise with TRUE.
NOT NULL is NULL. Only TRUE matches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import isnan
from typing import Any

from pocketmq.remoting.protocol.filter.values import (
    INT_MAX,
    EvalError,
    JLong,
    double_compare,
    java_compare,
    java_equal,
    parse_boolean,
    parse_double,
    parse_int,
    parse_long,
)

__all__ = ["CompileError", "Expr", "Kind"]

Props = Mapping[str, str]
Fn = Callable[[Props], Any]


class CompileError(Exception):
    """A RocketMQ compile-time refusal; the parser adds the position."""


class Kind:
    CONST = 0  # ConstantExpression: a number or string literal
    BCONST = 1  # BooleanConstantExpression: TRUE, FALSE, NULL
    PROP = 2  # PropertyExpression
    NEG = 3  # unary minus (not a ConstantExpression, even of a literal)
    BOOL = 4  # any other BooleanExpression (comparison, NOT, IN, cast)
    AND = 5
    OR = 6


_BOOLEAN_KINDS = frozenset({Kind.BCONST, Kind.BOOL, Kind.AND, Kind.OR})
_NUMBER_TYPES = (int, JLong, float)
_UNKNOWN = object()


@dataclass(frozen=True, slots=True)
class Expr:
    kind: int
    fn: Fn
    #: the source text (error messages)
    text: str
    #: nesting depth of closures (bounded by the parser)
    depth: int = 1
    #: CONST/BCONST: the value; PROP: the name; NEG: the folded number or _UNKNOWN
    value: Any = None
    #: AND/OR: the operands' closures, flattened
    operands: tuple[Fn, ...] = ()

    @property
    def is_boolean(self) -> bool:
        return self.kind in _BOOLEAN_KINDS

    @property
    def number(self) -> Any:
        """A number known at compile time (a literal or a negated one), else _UNKNOWN."""
        if self.kind == Kind.CONST and type(self.value) in _NUMBER_TYPES:
            return self.value
        if self.kind == Kind.NEG:
            return self.value
        return _UNKNOWN


def _quote(text: str) -> str:
    """Source text in an error message, cut short (an operand may be most of a 64 KiB expression)."""
    return text if len(text) <= 60 else text[:57] + "..."


def _depth(*parts: Expr) -> int:
    return 1 + max(p.depth for p in parts)


# --------------------------------------------------------------------------------------------
# leaves


def constant(value: Any, text: str) -> Expr:
    kind = Kind.BCONST if value is None or type(value) is bool else Kind.CONST
    return Expr(kind, lambda p: value, text, value=value)


def prop(name: str) -> Expr:
    def f(p: Props) -> Any:
        return p.get(name)

    return Expr(Kind.PROP, f, name, value=name)


def negate(e: Expr, text: str) -> Expr:
    """``UnaryExpression.createNegate``: a number keeps its type; anything else is NULL."""
    n = e.number
    if n is not _UNKNOWN:
        v = JLong(-n) if type(n) is JLong else -n
        return Expr(Kind.NEG, lambda p: v, text, e.depth, value=v)
    inner = e.fn

    def f(p: Props) -> Any:
        v = inner(p)
        t = type(v)
        if t is int or t is float:
            return -v
        if t is JLong:
            return JLong(-v)
        return None

    return Expr(Kind.NEG, f, text, _depth(e), value=_UNKNOWN)


def as_boolean(e: Expr) -> Expr:
    """``SelectorParser.asBooleanExpression``: a property used as a condition is cast (a string
    is never a Boolean: FALSE, or NULL when absent); a number or string is refused."""
    if e.is_boolean:
        return e
    if e.kind == Kind.PROP:
        name = e.value

        def f(p: Props) -> Any:
            v: Any = p.get(name)
            if v is None:
                return None
            return v if type(v) is bool else False

        return Expr(Kind.BOOL, f, e.text, _depth(e))
    raise CompileError(f"Expression will not result in a boolean value: {_quote(e.text)}")


# --------------------------------------------------------------------------------------------
# logic


def logic(kind: int, parts: Sequence[Expr], text: str) -> Expr:
    """AND / OR over boolean operands, nested chains flattened (same result and evaluation
    order as Java's left-deep tree, without its depth)."""
    fns: list[Fn] = []
    for part in parts:
        fns.extend(part.operands if part.kind == kind else (part.fn,))
    stop = kind == Kind.OR  # the value that decides the chain
    depth = 1 + max(p.depth - 1 if p.kind == kind else p.depth for p in parts)
    return Expr(kind, _chain(tuple(fns), stop), text, depth, operands=tuple(fns))


def _chain(fns: tuple[Fn, ...], stop: bool) -> Fn:
    if len(fns) == 2:
        f1, f2 = fns

        def two(p: Props) -> Any:
            a = f1(p)
            if a is stop:
                return stop
            b = f2(p)
            if b is stop:
                return stop
            if a is None or b is None:
                return None
            return not stop

        return two
    if len(fns) == 3:
        g1, g2, g3 = fns

        def three(p: Props) -> Any:
            a = g1(p)
            if a is stop:
                return stop
            b = g2(p)
            if b is stop:
                return stop
            c = g3(p)
            if c is stop:
                return stop
            if a is None or b is None or c is None:
                return None
            return not stop

        return three

    def many(p: Props) -> Any:
        unknown = False
        for f in fns:
            v = f(p)
            if v is stop:
                return stop
            if v is None:
                unknown = True
        return None if unknown else not stop

    return many


def not_(e: Expr, text: str) -> Expr:
    inner = e.fn

    def f(p: Props) -> Any:
        v = inner(p)
        if v is None:
            return None
        return not v

    return Expr(Kind.BOOL, f, text, _depth(e))


# --------------------------------------------------------------------------------------------
# comparisons


def _check_orderable(e: Expr) -> None:
    """``checkLessThanOperand``: a literal must be a number; no boolean expression."""
    if e.kind == Kind.CONST and type(e.value) in _NUMBER_TYPES:
        return
    if e.kind in (Kind.CONST, Kind.BCONST) or e.is_boolean:
        raise CompileError(f"Value '{_quote(e.text)}' cannot be compared.")


_TESTS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}
_MIRROR = {">": "<", ">=": "<=", "<": ">", "<=": ">="}


def _to_int(v: str) -> int:
    if v.isdigit() and v.isascii():
        x = int(v)
        if x <= INT_MAX:
            return x
    return parse_int(v)


def _to_long(v: str) -> int:
    if v.isdigit() and v.isascii() and len(v) < 19:
        return int(v)
    return parse_long(v)


_CONVERT: dict[type, Callable[[str], Any]] = {int: _to_int, JLong: _to_long, float: parse_double}


def ordering(op: str, left: Expr, right: Expr, text: str) -> Expr:
    """``>``, ``>=``, ``<``, ``<=`` (``ComparisonExpression.evaluate``): NULL on either side is
    NULL; two strings are compared as Doubles (error when one is not a number)."""
    _check_orderable(left)
    _check_orderable(right)
    depth = _depth(left, right)
    if left.kind == Kind.PROP and right.number is not _UNKNOWN:
        return Expr(Kind.BOOL, _prop_vs_number(op, left.value, right.number), text, depth)
    if right.kind == Kind.PROP and left.number is not _UNKNOWN:
        return Expr(Kind.BOOL, _prop_vs_number(_MIRROR[op], right.value, left.number), text, depth)
    lf, rf, test = left.fn, right.fn, _TESTS[op]

    def f(p: Props) -> Any:
        lv = lf(p)
        if lv is None:
            return None
        rv = rf(p)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            return test(double_compare(parse_double(lv), parse_double(rv)))
        return test(java_compare(lv, rv))

    return Expr(Kind.BOOL, f, text, depth)


def _prop_vs_number(op: str, name: str, c: Any) -> Fn:
    """``name op c`` for a property and a number known at compile time: the property converts
    to the number's type (Integer.valueOf / Long.valueOf / Double.valueOf)."""
    conv = _CONVERT[type(c)]
    if type(c) is float:
        # c is finite and non-zero (the parser refuses other float literals), so
        # Double.compare only differs from Python for NaN, which sorts above everything
        if op == ">":
            return lambda p: None if (v := p.get(name)) is None else ((x := conv(v)) > c or isnan(x))
        if op == ">=":
            return lambda p: None if (v := p.get(name)) is None else ((x := conv(v)) >= c or isnan(x))
    if op == ">":
        return lambda p: None if (v := p.get(name)) is None else conv(v) > c
    if op == ">=":
        return lambda p: None if (v := p.get(name)) is None else conv(v) >= c
    if op == "<":
        return lambda p: None if (v := p.get(name)) is None else conv(v) < c
    return lambda p: None if (v := p.get(name)) is None else conv(v) <= c


def between(value: Expr, low: Expr, high: Expr, text: str, *, negated: bool) -> Expr:
    """``createBetween`` (``value >= low AND value <= high``, literal bounds must be non-NULL and
    ordered) / ``createNotBetween`` (``value < low OR value > high``, no bound check)."""
    if not negated and low.kind in (Kind.CONST, Kind.BCONST) and high.kind in (Kind.CONST, Kind.BCONST):
        lo, hi = low.value, high.value
        if lo is None or hi is None:
            raise CompileError("Illegal values of between, values can not be null!")
        try:
            wrong_order = java_compare(hi, lo) < 0
        except EvalError as exc:
            raise CompileError(f"Illegal values of between: {exc}") from None
        if wrong_order:
            raise CompileError(
                f"Illegal values of between, left value({_quote(low.text)}) must less than or equal to "
                f"right value({_quote(high.text)})"
            )
    if negated:
        a, b = ordering("<", value, low, text), ordering(">", value, high, text)
        kind = Kind.OR
    else:
        a, b = ordering(">=", value, low, text), ordering("<=", value, high, text)
        kind = Kind.AND
    lo_n, hi_n = low.number, high.number
    if (
        value.kind == Kind.PROP
        and lo_n is not _UNKNOWN
        and type(lo_n) is type(hi_n)
        and type(lo_n) is not float
    ):
        # one conversion for both bounds (an integer property against integer bounds)
        conv, name = _CONVERT[type(lo_n)], value.value
        if negated:
            fused: Fn = lambda p: None if (v := p.get(name)) is None else not lo_n <= conv(v) <= hi_n  # noqa: E731
        else:
            fused = lambda p: None if (v := p.get(name)) is None else lo_n <= conv(v) <= hi_n  # noqa: E731
        return Expr(kind, fused, text, a.depth + 1, operands=(fused,))
    return logic(kind, (a, b), text)


def equal(left: Expr, right: Expr, text: str) -> Expr:
    """``createEqual``: no NULL literal on either side (``IS NULL`` is the way), no boolean
    literal compared with another literal."""
    for e in (left, right):
        if e.kind == Kind.BCONST and e.value is None:
            raise CompileError(f"'{_quote(e.text)}' cannot be compared.")
    if left.kind == Kind.BCONST and right.kind == Kind.CONST:
        raise CompileError(f"'{_quote(left.text)}' cannot be compared with '{_quote(right.text)}'")
    return raw_equal(left, right, text)


def raw_equal(left: Expr, right: Expr, text: str) -> Expr:
    """``doCreateEqual`` (also behind ``IS NULL``): see :func:`.values.java_equal`."""
    depth = _depth(left, right)
    if left.kind == Kind.PROP and right.kind in (Kind.CONST, Kind.BCONST, Kind.NEG):
        fast = _prop_equal(left.value, right, prop_first=True)
        if fast is not None:
            return Expr(Kind.BOOL, fast, text, depth)
    if right.kind == Kind.PROP and left.kind in (Kind.CONST, Kind.NEG):
        fast = _prop_equal(right.value, left, prop_first=False)
        if fast is not None:
            return Expr(Kind.BOOL, fast, text, depth)
    lf, rf = left.fn, right.fn
    return Expr(Kind.BOOL, lambda p: java_equal(lf(p), rf(p)), text, depth)


def _prop_equal(name: str, c: Expr, *, prop_first: bool) -> Fn | None:
    # an absent property: NULL when it is the left operand, FALSE when it is the right one
    absent = None if prop_first else False
    n = c.number
    if n is not _UNKNOWN:
        conv = _CONVERT[type(n)]
        return lambda p: absent if (v := p.get(name)) is None else conv(v) == n
    if c.kind == Kind.CONST and type(c.value) is str:
        s = c.value
        return lambda p: absent if (v := p.get(name)) is None else v == s
    if c.kind == Kind.BCONST and c.value is None:
        return lambda p: p.get(name) is None  # IS NULL
    if c.kind == Kind.BCONST and prop_first:
        b = c.value
        return lambda p: None if (v := p.get(name)) is None else parse_boolean(v) is b
    return None


def is_null(e: Expr, text: str, *, negated: bool) -> Expr:
    """``createIsNull`` / ``createIsNotNull``: always TRUE or FALSE (never NULL)."""
    eq = raw_equal(e, constant(None, "NULL"), text)
    if not negated:
        return eq
    if e.kind == Kind.PROP:
        name = e.value
        return Expr(Kind.BOOL, lambda p: p.get(name) is not None, text, eq.depth)
    return not_(eq, text)


def in_list(e: Expr, values: Sequence[str], text: str, *, negated: bool) -> Expr:
    """``createInFilter``: the left side must be a property; NULL when it is absent."""
    if e.kind != Kind.PROP:
        raise CompileError(f"Expected a property for In expression, got: {_quote(e.text)}")
    name = e.value
    choices = frozenset(values)
    if negated:
        return Expr(Kind.BOOL, lambda p: None if (v := p.get(name)) is None else v not in choices, text, 2)
    return Expr(Kind.BOOL, lambda p: None if (v := p.get(name)) is None else v in choices, text, 2)
