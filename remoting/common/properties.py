"""Java ``.properties`` text: RocketMQ's ``.conf`` files and the UPDATE/GET_*_CONFIG bodies.

Reading follows ``java.util.Properties.load``:

* lines end with ``\\n``, ``\\r`` or ``\\r\\n``; a line whose first non-blank character is
  ``#`` or ``!`` is a comment; blank lines are skipped;
* a line ending in an odd number of backslashes continues on the next line, whose leading
  whitespace is dropped (a continuation line is never a comment);
* the key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace around the
  separator is skipped and at most one ``=``/``:`` is consumed;
* escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\<any>`` (= that character) work in keys and values.

One deliberate difference: trailing whitespace of values is trimmed (Java keeps it, and a stray
space after ``brokerRole=SYNC_MASTER`` is a classic cause of startup failures). A later
duplicate key wins, as in Java; :func:`parse_entries` keeps every occurrence with its line number
so config errors can point at the file and line.

Writing (:func:`dumps`) follows ``Properties.store``: ``key=value`` lines, with ``\\``, ``=``,
``:``, ``#``, ``!``, whitespace in keys, leading whitespace in values, control characters and
non-ASCII characters escaped so that any reader gets the exact strings back.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["PropertiesError", "PropertyEntry", "dump", "dumps", "load", "loads", "parse_entries"]


class PropertiesError(ValueError):
    """Malformed properties text (a bad ``\\uXXXX`` escape). ``line`` is 1-based."""

    def __init__(self, message: str, *, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclass(frozen=True, slots=True)
class PropertyEntry:
    key: str
    value: str
    #: 1-based number of the line the entry starts on.
    line: int


_WS = " \t\f"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Yield ``(first_line_number, logical_line)`` with continuations joined, comments dropped."""
    natural = text.splitlines()
    i = 0
    n = len(natural)
    while i < n:
        start = i
        line = natural[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts: list[str] = []
        while True:
            trailing = len(line) - len(line.rstrip("\\"))
            if trailing % 2 == 1:
                parts.append(line[:-1])
                if i >= n:
                    break
                line = natural[i].lstrip(_WS)
                i += 1
                continue
            parts.append(line)
            break
        yield start + 1, "".join(parts)


def _unescape(raw: str, line: int) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i = 0
    n = len(raw)
    while i < n:
        ch = raw[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        i += 1
        if i >= n:
            # A lone trailing backslash (only possible at end of input): Java drops it.
            break
        ch = raw[i]
        i += 1
        if ch == "u":
            digits = raw[i : i + 4]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesError(f"malformed \\uxxxx encoding: \\u{digits}", line=line)
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_SIMPLE_ESCAPES.get(ch, ch))
    return "".join(out)


def _split_key_value(logical: str) -> tuple[str, str]:
    """Split one logical line into raw (still escaped) key and value text."""
    n = len(logical)
    i = 0
    while i < n:
        ch = logical[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WS:
            break
        i += 1
    key = logical[: min(i, n)]
    j = i
    while j < n and logical[j] in _WS:
        j += 1
    if j < n and logical[j] in "=:":
        j += 1
        while j < n and logical[j] in _WS:
            j += 1
    return key, logical[j:]


def _rstrip_unescaped(raw: str) -> str:
    """Drop trailing whitespace unless it is escaped (``a\\ `` keeps its space)."""
    end = len(raw)
    while end > 0 and raw[end - 1] in _WS:
        backslashes = 0
        k = end - 2
        while k >= 0 and raw[k] == "\\":
            backslashes += 1
            k -= 1
        if backslashes % 2 == 1:
            break
        end -= 1
    return raw[:end]


def parse_entries(text: str) -> list[PropertyEntry]:
    """Every key/value occurrence in file order, with line numbers (duplicates kept).

    Raises:
        PropertiesError: a malformed ``\\uXXXX`` escape.
    """
    entries: list[PropertyEntry] = []
    for line_no, logical in _logical_lines(text):
        raw_key, raw_value = _split_key_value(logical)
        key = _join_surrogates(_unescape(raw_key, line_no))
        value = _join_surrogates(_unescape(_rstrip_unescaped(raw_value), line_no))
        entries.append(PropertyEntry(key, value, line_no))
    return entries


def loads(text: str | bytes) -> dict[str, str]:
    """Parse properties text into an ordered dict; a later duplicate key wins.

    ``bytes`` are decoded as UTF-8 (RocketMQ's ``string2Properties`` uses UTF-8 bodies).

    Raises:
        PropertiesError: a malformed escape.
        UnicodeDecodeError: ``bytes`` that are not UTF-8.
    """
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text).decode("utf-8")
    return {e.key: e.value for e in parse_entries(text)}


def loads_request_body(body: bytes | None) -> dict[str, str]:
    """The properties body of UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG ({} for none).

    Raises:
        ValueError: a malformed escape or a body that is not UTF-8; its text is RocketMQ's
            ``string2Properties error: ...`` remark, which both servers answer with.
    """
    if not body:
        return {}
    try:
        return loads(body)
    except (PropertiesError, UnicodeDecodeError) as exc:
        raise ValueError(f"string2Properties error: {exc}") from None


def load(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a ``.properties`` / ``.conf`` file (UTF-8; a BOM is ignored).

    Raises:
        OSError: the file cannot be read.
        PropertiesError: a malformed escape.
    """
    with open(path, encoding="utf-8-sig") as f:
        return loads(f.read())


def _escape(s: str, *, is_key: bool) -> str:
    out: list[str] = []
    last = len(s) - 1
    for i, ch in enumerate(s):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif ch == " ":
            # Spaces end a key; leading and trailing spaces of a value would be stripped.
            out.append("\\ " if is_key or i in (0, last) else " ")
        elif ch in "=:#!":
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            if ord(ch) > 0xFFFF:
                # \uXXXX holds one UTF-16 unit: write the surrogate pair, as Java does.
                b = ch.encode("utf-16-be")
                out.append(f"\\u{b[0]:02X}{b[1]:02X}\\u{b[2]:02X}{b[3]:02X}")
            else:
                out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def _join_surrogates(s: str) -> str:
    """Combine UTF-16 surrogate pairs produced by ``\\uD83D\\uDE00``-style escapes."""
    if not any("\ud800" <= c <= "\udfff" for c in s):
        return s
    return s.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "replace")


def dumps(props: Mapping[str, str], *, header: str | None = None) -> str:
    """Render ``key=value`` lines (``\\n`` endings) that :func:`loads` reads back exactly.

    ``header`` becomes ``#`` comment lines at the top.
    """
    lines: list[str] = []
    if header:
        lines.extend("#" + h for h in header.splitlines())
    for key, value in props.items():
        lines.append(f"{_escape(key, is_key=True)}={_escape(value, is_key=False)}")
    return "\n".join(lines) + ("\n" if lines else "")


def dump(props: Mapping[str, str], path: str | os.PathLike[str], *, header: str | None = None) -> None:
    """Write :func:`dumps` output to ``path`` (plain write; use ``persist`` for atomic files)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(dumps(props, header=header))
