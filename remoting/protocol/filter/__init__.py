"""RocketMQ 4.9's SQL92 message filter (``MessageSelector.bySql``), pure and sans-IO, shared by
the broker (pull filtering), the SDK (validation) and the Spark source (executor filtering).

    expr = compile_sql("region IN ('eu', 'us') AND a > 50")
    expr.matches({"region": "eu", "a": "77"})   # True

Modules: :mod:`.lexer` (tokens, :class:`SqlFilterError`), :mod:`.parser` (grammar),
:mod:`.ops` (RocketMQ's expression factories: compile-time checks and evaluator closures),
:mod:`.values` (Java's types, conversions and comparisons). ``docs/sql-filter.md`` is the user
guide with the full semantics table.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from pocketmq.remoting.protocol.filter.lexer import SqlFilterError
from pocketmq.remoting.protocol.filter.parser import MAX_DEPTH, parse
from pocketmq.remoting.protocol.filter.values import EvalError

__all__ = ["MAX_DEPTH", "EvalError", "SqlExpression", "SqlFilterError", "compile_sql"]


class SqlExpression:
    """A compiled expression. ``evaluate(properties)`` gives RocketMQ's three-valued result
    (True, False, None for NULL) or raises :class:`EvalError` where RocketMQ's evaluation throws;
    ``matches(properties)`` is what the broker delivers on: only True matches. ``names`` are the
    property names the expression reads (the rest of a message's properties never matter)."""

    __slots__ = ("evaluate", "expression", "names")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        root, self.names = parse(expression)
        self.evaluate = root.fn

    def matches(self, properties: Mapping[str, str]) -> bool:
        try:
            return self.evaluate(properties) is True
        except EvalError:
            return False

    def __repr__(self) -> str:
        return f"SqlExpression({self.expression!r})"


_CACHE_MAX_CHARS = 4096


@lru_cache(maxsize=256)
def _compile(expression: str) -> SqlExpression | SqlFilterError:
    try:
        return SqlExpression(expression)
    except SqlFilterError as exc:
        return exc
    except RecursionError:
        return SqlFilterError(f"expression nested too deeply (limit {MAX_DEPTH})", expression, 0)


def compile_sql(expression: Any) -> SqlExpression:
    """Compile (cached by text: compiled expressions are immutable); raises SqlFilterError."""
    if not isinstance(expression, str) or not expression.strip():
        raise SqlFilterError("Encountered end of expression, was expecting an expression", "", 0)
    # long ones skip the shared cache: callers keep their own, and 256 of them would be large
    result = _compile(expression) if len(expression) <= _CACHE_MAX_CHARS else _compile.__wrapped__(expression)
    if isinstance(result, SqlFilterError):
        raise result
    return result
