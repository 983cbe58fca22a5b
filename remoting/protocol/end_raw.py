"""END_TRANSACTION (37) frames read by their shape: no JSON parse for what producers send.

A producer sends one END_TRANSACTION per transaction, and its headers differ only in a few
values: the two offsets, the msgId and transactionId, the opaque. The typed decode
(:mod:`.end_fields`, one msgspec call: ~8k instructions, ~11k with its command) gives them as
strings, which the END_TRANSACTION processor then converts and checks (``int()`` is ~1.2k
instructions in CPython 3.11). Here the frame decoder's loop (``frame.FrameDecoder._split``)
cuts a header with a :class:`struct.Struct` at the places a *shape* learnt from an earlier
header gives (its changing values only), compares its constant pieces by putting the values
back into the shape's (one %-format, one compare), and checks the values as ASCII digits and
letters: about the typed decode's cost with its command, but the request it makes
(:class:`EndRawRequest`) carries the fields the processor needs, read (offsets as ints), and
no opaque is converted. In all, ~4k instructions less per transaction
(``bench/transaction_bench.py --callgrind-offline``).

A shape is learnt from a header the typed decode accepted when that header is byte for byte
what this module renders from the decoded values (our SDK's key order or fastjson's sorted one,
no spaces, no escapes, no remark, oneway, a commit or a rollback, ``serializeTypeCurrentRPC``
JSON): so a header a shape takes differs from that one only in the bytes of its changing values,
each of which is then a valid JSON string or number with the value the general path reads (the
offsets by ``int()``, digits only; the opaque digits with no leading zero, fewer than 10).
Anything else -- another length or layout, a value that needs escaping, a header the typed
decode refuses, a frame alone in its read (``frame._json_command``) -- takes the typed decode
(:func:`end_typed`) or the general path, as before. One shape per header length (bounded):
headers of one producer change length only when a value gains a digit. Producers whose headers
have the same length but not the same constant parts (two groups with names of one length) would
otherwise take the length's shape from each other at every END (the loser's END a failed shape
read, the typed decode and a new shape: more than the typed decode alone did); so a length's
shape is replaced only after ``RELEARN_AFTER`` headers of that length were not read by it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from pocketmq.remoting.protocol import header_json
from pocketmq.remoting.protocol.codes import RPC_ONEWAY
from pocketmq.remoting.protocol.command import RemotingCommand, SendV2Request, TypedCommand
from pocketmq.remoting.protocol.end_fields import END_START, EndTxRequest, end_command, end_decode

__all__ = ["SHAPES", "EndRawRequest", "end_typed"]

#: the extFields orders a shape is learnt in: our SDK's (``EndTransactionRequestHeader``'s
#: fields) and fastjson's (sorted)
_SDK_ORDER = (
    "producerGroup",
    "tranStateTableOffset",
    "commitLogOffset",
    "commitOrRollback",
    "fromTransactionCheck",
    "msgId",
    "transactionId",
)
_ORDERS = (_SDK_ORDER, tuple(sorted(_SDK_ORDER)))
#: the extFields whose value changes per transaction (the rest is part of the shape)
_CHANGING = frozenset(("tranStateTableOffset", "commitLogOffset", "msgId", "transactionId"))
_KINDS = {"8": True, "12": False}
_ONEWAY = int(RPC_ONEWAY)
_OPAQUE_MAX = 10**9  # (9 digits at most: any is an int32)
_LANGUAGE_NAMES = {code: name for name, code in header_json.LANGUAGE_BY_NAME.items()}
_MAX_SHAPES = 256
#: headers of a length not read by its shape before another of them may replace it
RELEARN_AFTER = 64
_new = object.__new__

#: A shape: (unpack: the changing values, the header as a %-format of them, index of
#: commitLogOffset / tranStateTableOffset / opaque / msgId / transactionId (msgId's when absent)
#: among them, whether the opaque has several digits, producerGroup, commit, language code,
#: version)
_Shape = tuple[Callable[[Any], tuple[bytes, ...]], bytes, int, int, int, int, int, bool, str, bool, int, int]
#: header length -> its shape (read by the frame decoder's loop: ``frame.FrameDecoder._split``)
SHAPES: dict[int, _Shape] = {}
_shapes = SHAPES
#: header length -> headers of that length the typed decode read since its shape was learnt
_misses: dict[int, int] = {}
#: ``RemotingCommand``'s own opaque slot (:class:`EndRawRequest` reads the header's when unset)
_OPAQUE_SLOT: Any = RemotingCommand.opaque  # type: ignore[misc]  # (the descriptor itself)


class EndRawRequest(TypedCommand):
    """An END_TRANSACTION read by its shape (module docstring): ``end`` is (commitLogOffset,
    tranStateTableOffset, producerGroup, commit) as ints, str and bool; always oneway, no
    remark, no body. ``fields`` (the typed decode's struct), ``ext_fields`` and ``opaque``
    (its digits checked, not converted: nothing reads it for a oneway request without hooks)
    are read from ``raw_header`` when asked for."""

    __slots__ = ("end",)
    end: tuple[int, int, str, bool]
    # what every such request has (class attributes: four slots fewer to fill per frame)
    code = 37
    flag = _ONEWAY
    remark = None
    body = None
    serialize_type = 0

    @property
    def fields(self) -> Any:
        return end_decode(self.raw_header).extFields  # type: ignore[misc]

    @property
    def opaque(self) -> int:
        try:
            return _OPAQUE_SLOT.__get__(self, EndRawRequest)  # type: ignore[no-any-return]
        except AttributeError:
            raw = self.raw_header
            at = raw.rindex(b'"opaque":') + 9  # (no value holds a quote: the shape's check)
            opaque = int(raw[at : raw.index(b",", at)])
            _OPAQUE_SLOT.__set__(self, opaque)
            return opaque

    @opaque.setter
    def opaque(self, value: int) -> None:
        _OPAQUE_SLOT.__set__(self, value)

    ext_fields = SendV2Request.ext_fields


def end_typed(header: bytes | bytearray, body: bytes | None) -> EndTxRequest | None:
    """The typed decode's command of an END_TRANSACTION header not read by a shape (its header
    may teach one); None: the general path decodes it (not END_TRANSACTION, or refused)."""
    if not header.startswith(END_START):
        return None
    cmd = end_command(header, body)
    if cmd is not None and body is None:
        _learn(header, cmd)
    return cmd


def _learn(header: bytes | bytearray, cmd: EndTxRequest) -> None:
    """Keep the shape of ``header`` (decoded typed as ``cmd``) when it is one, unless its
    length has a shape that fewer than ``RELEARN_AFTER`` headers missed (module docstring)."""
    hlen = len(header)
    if hlen in _shapes:
        missed = _misses.get(hlen, 0) + 1
        if missed < RELEARN_AFTER:
            _misses[hlen] = missed
            return
    f = cmd.fields
    commit = _KINDS.get(f.commitOrRollback)
    opaque = cmd.opaque
    if (
        commit is None
        or cmd.flag != _ONEWAY
        or cmd.remark is not None
        or not 0 <= opaque < _OPAQUE_MAX
        or f.fromTransactionCheck not in (None, "false", "true")
        # (the changing values as the fast path checks them: the same in every later header)
        or not f.tranStateTableOffset.isdigit()
        or not f.commitLogOffset.isdigit()
        or not (f.msgId + (f.transactionId or "x")).isalnum()
        or not (f.tranStateTableOffset + f.commitLogOffset + f.msgId + (f.transactionId or "")).isascii()
    ):
        return
    tail = (
        f'}},"flag":{cmd.flag},"language":"{_LANGUAGE_NAMES[cmd.language]}","opaque":',
        f',"serializeTypeCurrentRPC":"JSON","version":{cmd.version}}}',
    )
    for order in _ORDERS:
        # pieces alternate: constant, changing, constant, ..., constant
        pieces: list[str] = ['{"code":37,"extFields":{']
        names: list[str] = []  # (the changing ones, in order)
        for name in order:
            value = getattr(f, name)
            if value is None:
                continue
            pieces[-1] += f'{"," if pieces[-1][-1] != "{" else ""}"{name}":"'
            if name in _CHANGING:
                pieces += (value, '"')
                names.append(name)
            else:
                pieces[-1] += f'{value}"'
        pieces[-1] += tail[0]
        pieces += (str(opaque), tail[1])
        names.append("opaque")
        raw = [p.encode() for p in pieces]
        if b"".join(raw) != header:
            continue
        if len(_shapes) >= _MAX_SHAPES:
            _shapes.clear()
            _misses.clear()
        _misses.pop(hlen, None)
        _shapes[hlen] = (
            # constant pieces as pad bytes, the changing values as bytes
            struct.Struct("".join(f"{len(p)}{'s' if k % 2 else 'x'}" for k, p in enumerate(raw))).unpack,
            b"%s".join(p.replace(b"%", b"%%") for p in raw[0::2]),
            names.index("commitLogOffset"),
            names.index("tranStateTableOffset"),
            len(names) - 1,
            names.index("msgId"),
            names.index("transactionId" if "transactionId" in names else "msgId"),
            len(raw[-2]) > 1,
            f.producerGroup,
            commit,
            cmd.language,
            cmd.version,
        )
        return
