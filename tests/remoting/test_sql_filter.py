"""The SQL92 compiler and evaluator (pocketmq.remoting.protocol.filter), without sockets."""

from __future__ import annotations

import itertools
import tracemalloc

import pytest

from pocketmq.remoting.protocol.filter import MAX_DEPTH, EvalError, SqlFilterError, compile_sql, ops
from pocketmq.remoting.protocol.filter.values import (
    JLong,
    java_compare,
    java_equal,
    parse_double,
    parse_int,
    parse_long,
)
from tests.remoting.sql_cases import CASES


def outcome(expression: str, props: dict[str, str]) -> object:
    try:
        expr = compile_sql(expression)
    except SqlFilterError:
        return "invalid"
    try:
        return expr.evaluate(props)
    except EvalError:
        return "error"


@pytest.mark.parametrize(("expression", "props", "expected"), CASES)
def test_case_table(expression: str, props: dict[str, str], expected: object) -> None:
    assert outcome(expression, props) == expected
    if expected != "invalid":
        assert compile_sql(expression).matches(props) is (expected is True)


def test_table_covers_every_operator_and_rule() -> None:
    exprs = " ".join(c[0] for c in CASES).upper()
    for word in ("=", "<>", ">", ">=", "<", "<=", " AND ", " OR ", "NOT ", "BETWEEN", " IN ",
                 "IS NULL", "IS NOT NULL", "TRUE", "FALSE", "NULL", "(", "'", "L ", "."):  # fmt: skip
        assert word in exprs + " ", word
    kinds = {repr(c[2]) for c in CASES}
    assert kinds == {"True", "False", "None", "'error'", "'invalid'"}
    assert len(CASES) >= 200


# -- errors carry a position and a reason ---------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "line", "column", "reason"),
    [
        ("a > 1 b", 1, 7, 'Encountered "b"'),  # RocketMQ ignores the tail; pocketmq refuses it
        ("a > 1)", 1, 6, 'Encountered ")"'),
        ("a >", 1, 4, "end of expression"),
        ("(a > 1", 1, 7, '")"'),
        ("a = 'x", 1, 5, "unclosed string"),
        ("région = 'x'", 1, 2, "U+00E9"),
        ("a > 1 &&\n b = 2", 1, 7, "unexpected character '&'"),
        ("a > 1 AND\n  b = NULL", 2, 5, "'NULL' cannot be compared"),
        ("a > 'x'", 1, 3, "cannot be compared"),
        ("a BETWEEN 5 AND 1", 1, 3, "must less than or equal"),
        ("a > 0.0", 1, 5, "less than 4.9E-324"),
        ("a = 9223372036854775808", 1, 5, "out of range of a long"),
        ("5 IN ('x')", 1, 3, "Expected a property"),
        ("a AND 5", 1, 7, "will not result in a boolean value"),
        ("a IS 5", 1, 6, "NULL or NOT NULL"),
    ],
)
def test_errors_have_position_and_reason(expression: str, line: int, column: int, reason: str) -> None:
    with pytest.raises(SqlFilterError) as info:
        compile_sql(expression)
    err = info.value
    assert (err.line, err.column) == (line, column), str(err)
    assert reason in str(err)
    assert f"line {line}, column {column}" in str(err)


def test_empty_expression_is_an_error() -> None:
    for bad in ("", "   ", None):
        with pytest.raises(SqlFilterError):
            compile_sql(bad)


def test_trailing_line_comment_without_newline_is_a_comment() -> None:
    assert compile_sql("a > 1 -- big ones").matches({"a": "2"})
    assert compile_sql("a > 1 -- big\n AND b = 'x'").matches({"a": "2", "b": "x"})
    assert not compile_sql("a > 1 /* c */ AND b = 'x'").matches({"a": "2"})


# -- bad input: depth, size, non-ASCII ------------------------------------------------------


def test_ten_thousand_parentheses_is_a_clear_error() -> None:
    for text in ("(" * 10_000 + "a > 1" + ")" * 10_000, "NOT " * 10_000 + "a", "-" * 10_000 + "a > 1",
                 "a = 1" + " = TRUE" * 10_000):  # fmt: skip
        with pytest.raises(SqlFilterError, match=f"nested deeper than {MAX_DEPTH} levels"):
            compile_sql(text)


def test_nesting_up_to_the_limit_works() -> None:
    depth = 60
    expr = compile_sql("(" * depth + "a > 1" + ")" * depth)
    assert expr.matches({"a": "2"}) and not expr.matches({"a": "0"})
    nots = compile_sql("NOT " * 50 + "(a > 1)")
    assert nots.evaluate({"a": "2"}) is True  # an even number of NOTs


def test_64_kib_expressions() -> None:
    # a long OR chain (flattened: no recursion per clause) and a long IN list both work
    clauses = [f"a = {i}" for i in range(5000)]
    text = " OR ".join(clauses)
    assert len(text) > 64 * 1024 - 20_000
    big_or = compile_sql(text)
    assert big_or.matches({"a": "4999"}) and not big_or.matches({"a": "5000"})
    values = ", ".join(f"'v{i:05d}'" for i in range(8000))
    big_in = compile_sql(f"a IN ({values})")
    assert len(big_in.expression) > 64 * 1024
    assert big_in.matches({"a": "v07999"}) and not big_in.matches({"a": "v8000"})
    # and a 64 KiB one with an error at the end reports where
    with pytest.raises(SqlFilterError) as info:
        compile_sql(text + " OR")
    assert info.value.position == len(text) + 3


def test_big_expressions_compile_in_bounded_memory() -> None:
    text = " AND ".join(f"(p{i} IS NULL OR p{i} <> 'x')" for i in range(2000))
    tracemalloc.start()
    try:
        compile_sql(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024


def test_non_ascii_values_and_literals() -> None:
    expr = compile_sql("city IN ('Zürich', '東京') AND note = 'it''s ok'")
    assert expr.matches({"city": "東京", "note": "it's ok"})
    assert not expr.matches({"city": "Zurich", "note": "it's ok"})
    with pytest.raises(SqlFilterError, match="ASCII"):
        compile_sql("東京 = 'x'")


# -- the fused closures agree with the generic ones -----------------------------------------

_VALUES = ["5", "-5", "0", "10", "abc", "5.5", "NaN", "-0.0", "3000000000", "9223372036854775808",
           " 5", "+5", "1e1", "true", "TRUE", "", "٣"]  # fmt: skip
_LITERALS = ["5", "-5", "3000000000", "5L", "2.5", "-2.5", "'5'", "TRUE", "FALSE"]


def _generic(op: str, left: str, right: str) -> ops.Expr:
    """The same comparison with the property hidden behind ``+(...)`` so no fast path fires."""
    return compile_sql(f"{left} {op} {right}")


@pytest.mark.parametrize("op", ["=", "<>", ">", ">=", "<", "<="])
def test_fast_paths_match_generic_java_semantics(op: str) -> None:
    for lit, value in itertools.product(_LITERALS, [None, *_VALUES]):
        props = {} if value is None else {"a": value}
        for left, right in (("a", lit), (lit, "a")):
            try:
                fast = compile_sql(f"{left} {op} {right}")
            except SqlFilterError:
                continue
            want = _reference(op, left, right, props)
            try:
                got: object = fast.evaluate(props)
            except EvalError:
                got = "error"
            assert got == want, (left, op, right, props)


def _reference(op: str, left: str, right: str, props: dict[str, str]) -> object:
    """Java's generic evaluation, straight from the value functions."""

    def val(side: str) -> object:
        if side == "a":
            return props.get("a")
        return compile_sql(f"{side} = {side}").evaluate({}) and _literal(side)

    try:
        lv = val(left)
        if op in ("=", "<>"):
            rv = val(right)
            eq = java_equal(lv, rv)
            return eq if op == "=" or eq is None else not eq
        if lv is None:
            return None
        rv = val(right)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:
            c = java_compare(parse_double(lv), parse_double(rv))
        else:
            c = java_compare(lv, rv)
        return {">": c > 0, ">=": c >= 0, "<": c < 0, "<=": c <= 0}[op]
    except EvalError:
        return "error"


def _literal(text: str) -> object:
    if text.startswith("'"):
        return text[1:-1]
    if text in ("TRUE", "FALSE"):
        return text == "TRUE"
    if "." in text:
        return float(text)
    v = int(text.rstrip("L"))  # 5L is an Integer: the suffix only allows a Long
    return v if -(2**31) <= v < 2**31 else JLong(v)


def test_between_fused_matches_two_comparisons() -> None:
    for value in [None, *_VALUES]:
        props = {} if value is None else {"a": value}
        for neg in ("", "NOT "):
            fused = outcome(f"a {neg}BETWEEN 1 AND 7", props)
            pair = outcome("a < 1 OR a > 7" if neg else "a >= 1 AND a <= 7", props)
            assert fused == pair, (neg, props)


# -- Java conversions -----------------------------------------------------------------------


def test_java_number_parsing() -> None:
    assert parse_int("+5") == 5 and parse_int("-2147483648") == -(2**31)
    for bad in ("2147483648", " 5", "5 ", "1_0", "5.0", "", "+", "0x10"):
        with pytest.raises(EvalError):
            parse_int(bad)
    assert parse_long("9223372036854775807") == 2**63 - 1
    with pytest.raises(EvalError):
        parse_long("9223372036854775808")
    assert parse_double(" 1.5 ") == 1.5 and parse_double("2.5d") == 2.5 and parse_double("1e1") == 10.0
    assert parse_double("0x1p3") == 8.0 and parse_double("-Infinity") == float("-inf")
    for bad in ("inf", "nan", "1_0", "abc", "1.5x", ""):
        with pytest.raises(EvalError):
            parse_double(bad)


def test_double_ordering_is_javas() -> None:
    nan = float("nan")
    assert java_compare(nan, 1.0) == 1 and java_compare(1.0, nan) == -1 and java_compare(nan, nan) == 0
    assert java_compare(-0.0, 0.0) == -1
    assert java_equal(nan, nan) is True and java_equal(-0.0, 0.0) is False


def test_final_dash_dash_comment_and_double_minus() -> None:
    # without a line break "--" lexes as two minus signs (RocketMQ), yet a final one is a comment
    assert compile_sql("a > --3").matches({"a": "4"}) and not compile_sql("a > --3").matches({"a": "3"})
    assert compile_sql("a > 1 -- it's a comment & more").matches({"a": "2"})
    with pytest.raises(SqlFilterError, match="unclosed string"):
        compile_sql("a > 1 AND b = 'x")


def test_error_messages_quote_operands_briefly() -> None:
    values = ", ".join(f"'v{i}'" for i in range(5000))
    with pytest.raises(SqlFilterError) as info:
        compile_sql(f"(a IN ({values})) > 5")
    assert "cannot be compared" in str(info.value) and len(str(info.value)) < 200
    with pytest.raises(SqlFilterError) as info:
        compile_sql("a = 'x' '" + "y" * 70_000 + "'")
    assert "Encountered \"'yyy" in str(info.value) and len(str(info.value)) < 200
