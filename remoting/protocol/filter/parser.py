"""The recursive-descent parser of RocketMQ 4.9's ``SelectorParser.jj``, building evaluator
closures as it goes (:mod:`.ops`).

Grammar, loosest binding first (every binary level is a left-to-right loop)::

    expression  := or
    or          := and ( OR and )*
    and         := equality ( AND equality )*
    equality    := comparison ( "=" comparison | "<>" comparison | IS NULL | IS NOT NULL )*
    comparison  := unary ( (">" | ">=" | "<" | "<=") unary
                         | [NOT] BETWEEN unary AND unary
                         | [NOT] IN "(" string ( "," string )* ")" )*
    unary       := "+" unary | "-" unary | NOT unary | primary
    primary     := literal | property | "(" or ")"

``NOT`` therefore binds tighter than any comparison, exactly as in RocketMQ: ``NOT a = 1`` is
``(NOT a) = 1``; write ``NOT (a = 1)`` or ``a <> 1``.

Differences from RocketMQ, on purpose: RocketMQ stops parsing after the first complete
expression and ignores what follows (``a > 1 b = 2`` filters on ``a > 1`` alone; ``a > 1)``
compiles); here any leftover token is an error. Nesting (parentheses, NOT, signs, chained
``=``) deeper than :data:`MAX_DEPTH` levels is an error, where RocketMQ's parser overflows its
stack a few thousand levels down.
"""

from __future__ import annotations

from collections.abc import Callable

from pocketmq.remoting.protocol.filter import ops
from pocketmq.remoting.protocol.filter.lexer import SqlFilterError, Token, tokenize
from pocketmq.remoting.protocol.filter.ops import CompileError, Expr, Kind
from pocketmq.remoting.protocol.filter.values import JLong

__all__ = ["MAX_DEPTH", "parse"]

#: deepest nesting accepted (parentheses, NOT, unary signs, chained comparisons)
MAX_DEPTH = 100
_DOUBLE_MAX = 1.7976931348623157e308
_DOUBLE_MIN = 5e-324  # Double.MIN_VALUE, the smallest positive double
_ORDERING = frozenset({">", ">=", "<", "<="})


def parse(text: str) -> tuple[Expr, frozenset[str]]:
    """The boolean expression of ``text`` and the property names it reads; raises SqlFilterError."""
    parser = _Parser(text)
    return parser.expression(), frozenset(parser.names)


class _Parser:
    __slots__ = ("i", "names", "nesting", "text", "tokens")

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.nesting = 0
        self.names: set[str] = set()

    # -- token helpers
    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def at(self, kind: str, text: str, ahead: int = 0) -> bool:
        t = self.peek(ahead)
        return t.kind == kind and t.text == text

    def take(self) -> Token:
        t = self.tokens[self.i]
        self.i += 1
        return t

    def expect(self, kind: str, text: str, what: str) -> Token:
        if not self.at(kind, text):
            raise self.unexpected(what)
        return self.take()

    def unexpected(self, what: str) -> SqlFilterError:
        t = self.peek()
        if t.kind == "ERR":
            return SqlFilterError(t.text, self.text, t.start)
        token = self.text[t.start : t.end]
        token = token if len(token) <= 60 else token[:57] + "..."
        found = "end of expression" if t.kind == "EOF" else f'"{token}"'
        return SqlFilterError(f"Encountered {found}, was expecting {what}", self.text, t.start)

    def fail(self, exc: CompileError, at: int) -> SqlFilterError:
        return SqlFilterError(str(exc), self.text, at)

    def span(self, start: int) -> str:
        return self.text[start : self.tokens[self.i - 1].end]

    def check_depth(self, e: Expr, at: int) -> Expr:
        if e.depth > MAX_DEPTH:
            raise SqlFilterError(f"expression nested deeper than {MAX_DEPTH} levels", self.text, at)
        return e

    def enter(self, at: int) -> None:
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            raise SqlFilterError(f"expression nested deeper than {MAX_DEPTH} levels", self.text, at)

    # -- grammar
    def expression(self) -> Expr:
        first = self.peek()
        e = self.or_()
        rest = self.text[self.peek().start :]
        # a final "-- comment" without a line break: RocketMQ ignores it with the rest of the tail
        if rest and not (rest.startswith("--") and "\n" not in rest and "\r" not in rest):
            raise self.unexpected("AND, OR or the end of the expression")
        try:
            return ops.as_boolean(e)
        except CompileError as exc:
            raise self.fail(exc, first.start) from None

    def or_(self) -> Expr:
        return self.logic("OR", Kind.OR, self.and_)

    def and_(self) -> Expr:
        return self.logic("AND", Kind.AND, self.equality)

    def logic(self, word: str, kind: int, operand: Callable[[], Expr]) -> Expr:
        start = self.peek().start
        parts = [operand()]
        while self.at("KW", word):
            self.take()
            at = self.peek().start
            parts.append(operand())
            if len(parts) == 2:
                parts[0] = self.boolean(parts[0], start)
            parts[-1] = self.boolean(parts[-1], at)
        if len(parts) == 1:
            return parts[0]
        return self.check_depth(ops.logic(kind, parts, self.span(start)), start)

    def boolean(self, e: Expr, at: int) -> Expr:
        try:
            return ops.as_boolean(e)
        except CompileError as exc:
            raise self.fail(exc, at) from None

    def equality(self) -> Expr:
        start = self.peek().start
        left = self.comparison()
        while True:
            t = self.peek()
            try:
                if self.at("OP", "=") or self.at("OP", "<>"):
                    self.take()
                    right = self.comparison()
                    eq = ops.equal(left, right, self.span(start))
                    left = ops.not_(eq, eq.text) if t.text == "<>" else eq
                elif self.at("KW", "IS"):
                    self.take()
                    negated = self.at("KW", "NOT")
                    if negated:
                        self.take()
                    self.expect("KW", "NULL", "NULL" if negated else "NULL or NOT NULL")
                    left = ops.is_null(left, self.span(start), negated=negated)
                else:
                    return left
            except CompileError as exc:
                raise self.fail(exc, t.start) from None
            self.check_depth(left, t.start)

    def comparison(self) -> Expr:
        start = self.peek().start
        left = self.unary()
        while True:
            t = self.peek()
            negated = t.kind == "KW" and t.text == "NOT"
            nxt = self.peek(1) if negated else t
            try:
                if t.kind == "OP" and t.text in _ORDERING:
                    self.take()
                    right = self.unary()
                    left = ops.ordering(t.text, left, right, self.span(start))
                elif nxt.kind == "KW" and nxt.text == "BETWEEN":
                    self.i += 2 if negated else 1
                    low = self.unary()
                    self.expect("KW", "AND", "AND")
                    high = self.unary()
                    left = ops.between(left, low, high, self.span(start), negated=negated)
                elif nxt.kind == "KW" and nxt.text == "IN":
                    self.i += 2 if negated else 1
                    self.expect("OP", "(", '"("')
                    values = [self.string()]
                    while self.at("OP", ","):
                        self.take()
                        values.append(self.string())
                    self.expect("OP", ")", '"," or ")"')
                    left = ops.in_list(left, values, self.span(start), negated=negated)
                else:
                    return left
            except CompileError as exc:
                raise self.fail(exc, t.start) from None
            self.check_depth(left, t.start)

    def string(self) -> str:
        if self.peek().kind != "STR":
            raise self.unexpected("a string literal ('...')")
        return self.take().text

    def unary(self) -> Expr:
        t = self.peek()
        if (t.kind == "OP" and t.text in "+-") or (t.kind == "KW" and t.text == "NOT"):
            self.take()
            self.enter(t.start)
            inner = self.unary()
            self.nesting -= 1
            text = self.span(t.start)
            if t.text == "+":
                return inner
            if t.text == "-":
                return self.check_depth(ops.negate(inner, text), t.start)
            try:
                return self.check_depth(ops.not_(ops.as_boolean(inner), text), t.start)
            except CompileError as exc:
                raise self.fail(exc, t.start) from None
        return self.primary()

    def primary(self) -> Expr:
        t = self.peek()
        if t.kind == "OP" and t.text == "(":
            self.take()
            self.enter(t.start)
            e = self.or_()
            self.nesting -= 1
            self.expect("OP", ")", '")"')
            return e
        if t.kind == "ID":
            self.take()
            self.names.add(t.text)
            return ops.prop(t.text)
        if t.kind == "STR":
            self.take()
            return ops.constant(t.text, self.text[t.start : t.end])
        if t.kind == "INT":
            self.take()
            return ops.constant(self.decimal(t), t.text)
        if t.kind == "FLOAT":
            self.take()
            return ops.constant(self.floating(t), t.text)
        if t.kind == "KW" and t.text in ("TRUE", "FALSE", "NULL"):
            self.take()
            return ops.constant({"TRUE": True, "FALSE": False, "NULL": None}[t.text], t.text)
        raise self.unexpected('a literal, a property name, NOT, a sign or "("')

    def decimal(self, t: Token) -> int:
        """``ConstantExpression.createFromDecimal``: an Integer when it fits, else a Long."""
        digits = t.text.rstrip("lL")
        v = int(digits)
        if v > 2**63 - 1:
            raise SqlFilterError(f"number {t.text} is out of range of a long", self.text, t.start)
        return v if v <= 2**31 - 1 else JLong(v)

    def floating(self, t: Token) -> float:
        """``ConstantExpression.createFloat``: a Double in [Double.MIN_VALUE, Double.MAX_VALUE]
        (so ``0.0`` is refused, as in RocketMQ: write ``a < 0.000001`` or compare with 0)."""
        v = float(t.text)
        if v > _DOUBLE_MAX:
            raise SqlFilterError(f"{t.text} is greater than {_DOUBLE_MAX!r}", self.text, t.start)
        if v < _DOUBLE_MIN:
            raise SqlFilterError(f"{t.text} is less than 4.9E-324", self.text, t.start)
        return v
