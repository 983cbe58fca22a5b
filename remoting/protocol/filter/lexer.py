"""Tokens of RocketMQ 4.9's SQL92 filter language (``SelectorParser.jj``), longest match first.

=================  ==========================================================================
token              text
=================  ==========================================================================
keyword            NOT AND OR BETWEEN IN TRUE FALSE NULL IS (any case; an identifier of the
                   same spelling is the keyword)
identifier         ``[a-zA-Z_$][a-zA-Z0-9_$]*`` (ASCII only, case kept: property names are
                   case-sensitive)
decimal            ``0`` or ``[1-9][0-9]*`` with an optional ``l``/``L``
floating           ``1.5``, ``1.``, ``.5``, ``1e5``, ``1.5E-3`` (exponent any case)
string             ``'...'`` with ``''`` standing for one quote
operator           ``= <> > >= < <= ( ) , + -``
skipped            blanks `` \\t\\n\\r\\f``, ``-- comment`` ended by a line break (without one,
                   ``--`` is two minus signs, as in RocketMQ: ``a > --3`` is ``a > 3``; the
                   parser accepts a final ``-- comment``), ``/* comment */``
=================  ==========================================================================

Anything else (``!``, ``&&``, ``"``, a non-ASCII letter, an unclosed string or comment) is a
lexical error with its position (an ``ERR`` token: the parser raises it when it gets there).
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["KEYWORDS", "SqlFilterError", "Token", "tokenize"]

KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"})


class SqlFilterError(ValueError):
    """An expression RocketMQ refuses to compile: ``reason`` at ``position`` (0-based offset into
    the expression; ``line`` and ``column`` are 1-based, as RocketMQ's parser reports them)."""

    def __init__(self, reason: str, expression: str, position: int) -> None:
        self.reason = reason
        self.position = position
        before = expression[:position]
        self.line = before.count("\n") + 1
        self.column = position - (before.rfind("\n") + 1) + 1
        super().__init__(f"{reason} at line {self.line}, column {self.column}")


class Token(NamedTuple):
    #: ``ID``, ``KW`` (``text`` upper-cased), ``INT``, ``FLOAT``, ``STR`` (``text`` decoded),
    #: ``OP``, ``EOF``, or ``ERR`` (a lexical error, ``text`` its message)
    kind: str
    text: str
    start: int
    end: int


_BLANKS = " \t\n\r\f"
_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
_BLOCK_COMMENT = re.compile(r"/\*[^*]*\*+(?:[^*/][^*]*\*+)*/")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*[lL]?)")
_FLOAT = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_STRING = re.compile(r"'(?:''|[^'])*'")
_IDENT = re.compile(r"[a-zA-Z_$][a-zA-Z0-9_$]*")
_OPERATORS = ("<>", ">=", "<=", "=", ">", "<", "(", ")", ",", "+", "-")
_IDENT_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$")


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with ``EOF``, or with ``ERR`` (``text`` = the message) at
    the first lexical error: like RocketMQ's lazy lexer, an error the parser never reaches (in a
    final ``-- comment``) is no error."""
    tokens: list[Token] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c in _BLANKS:
            i += 1
            continue
        if c == "-" and text.startswith("--", i):
            m = _LINE_COMMENT.match(text, i)
            if m is not None:
                i = m.end()
                continue
        if c == "/":
            m = _BLOCK_COMMENT.match(text, i)
            if m is None:
                return _error(tokens, "lexical error: unclosed comment or stray '/'", i)
            i = m.end()
            continue
        if c in _IDENT_START:
            m = _IDENT.match(text, i)
            assert m is not None
            word = m.group()
            upper = word.upper()
            if upper in KEYWORDS:
                tokens.append(Token("KW", upper, i, m.end()))
            else:
                tokens.append(Token("ID", word, i, m.end()))
            i = m.end()
            continue
        if c.isascii() and (c.isdigit() or c == "."):
            d = _DECIMAL.match(text, i)
            f = _FLOAT.match(text, i)
            if f is not None and (d is None or f.end() > d.end()):
                tokens.append(Token("FLOAT", f.group(), i, f.end()))
                i = f.end()
                continue
            if d is not None:
                tokens.append(Token("INT", d.group(), i, d.end()))
                i = d.end()
                continue
            return _error(tokens, "lexical error: '.' must start a number such as .5", i)
        if c == "'":
            m = _STRING.match(text, i)
            if m is None:
                return _error(tokens, "lexical error: unclosed string literal", i)
            tokens.append(Token("STR", m.group()[1:-1].replace("''", "'"), i, m.end()))
            i = m.end()
            continue
        for op in _OPERATORS:
            if text.startswith(op, i):
                tokens.append(Token("OP", op, i, i + len(op)))
                i += len(op)
                break
        else:
            return _error(tokens, f"lexical error: unexpected character {_show(c)}", i)
    tokens.append(Token("EOF", "", n, n))
    return tokens


def _error(tokens: list[Token], message: str, at: int) -> list[Token]:
    tokens.append(Token("ERR", message, at, at))
    return tokens


def _show(c: str) -> str:
    if c.isascii() and c.isprintable():
        return repr(c)
    hint = " (property names are ASCII letters, digits, '_' and '$')" if c.isalpha() else ""
    return f"{c!r} (U+{ord(c):04X}){hint}"
