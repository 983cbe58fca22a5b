"""SEND_MESSAGE_V2 (310) frames read by their shape: no JSON parse for a producer's steady sends.

A producer's SEND_MESSAGE_V2 headers to one queue differ only in a few values: the born
timestamp (``g``), the UNIQ_KEY inside the properties (``i``), the opaque, and, across the
queues of a topic, the queue id (``e``). The typed decode (``header_json.send_v2_decode``, one
msgspec call: ~9k instructions with its struct's dealloc) and the field parse of its struct
(``SendMessageRequestHeader.from_v2_attrs``) redo per send what the previous send's header
already gave. Here, as END_TRANSACTION's :mod:`.end_raw`, the frame decoder's loop
(``frame.FrameDecoder._split``) cuts a header with a :class:`struct.Struct` at the places a
*shape* learnt from an earlier header gives (the changing values only), compares its constant
pieces by putting the values back into the shape's (one %-format, one compare), checks the
values (ASCII digits, the UNIQ_KEY ASCII letters and digits), and puts the three values that
differ per send (queue id, born timestamp, properties) on the request beside the shape's one
parsed header (:class:`SendRawRequest`: no header object per send).

Why a header a shape takes reads as the typed decode reads it: the shape is learnt from a
header the typed decode accepted (every key known, once; string values) where each changing
value was found in the raw bytes as written, without escapes (``"e":"`` + its digits + ``"``
and ``"g":"`` alike, ``"opaque":`` + its digits, and the UNIQ_KEY at the place JSON's escaping
of the properties' text before it ends). A later header of the same length whose bytes outside
those places are the learnt one's, and whose values there are ASCII letters and digits (no
quote, backslash or control character: the JSON tokens keep their bounds), decodes to the learnt
header's values with those substituted; the digits are then read by ``int()`` as
``from_v2_attrs`` reads them (no sign, space or ``_``; ``e`` at most 9 digits and ``g`` at most
18, so in range), the opaque has no leading zero (JSON) and at most 9 digits (an int32). Any
other header -- another length or layout, a value that needs escaping, a header the typed
decode refuses, a frame alone in its read (``frame._json_command``), an empty or odd UNIQ_KEY
-- takes the typed decode (and may teach a shape) or the general path, as before. Key orders
and escapes are not assumed: our SDK's (a..n, ``l`` last), fastjson's (sorted) or any other
producer whose header passes the typed decode and these finds is learnt.

Shapes are kept per header length (bounded): one producer's headers to one topic change length
only when a value gains a digit. Producers whose headers share a length but not their constant
parts (another group or topic of the same length) each keep theirs: a length holds up to
``PER_LENGTH`` shapes, the first learnt in ``SHAPES`` (the one tried first, at the cost of one
%-format and compare when it is not the header's) and the others in ``OTHER_SHAPES``, tried in
turn only when the first's constant pieces differ (one keyed shape alone thrashed: each of two
alternating producers was read typed, plus a failed try, ~1k instructions, at every send). A
header of the same constants as a kept shape (a value the shape read refuses), or of a full
length, teaches nothing before ``RELEARN_AFTER`` more typed reads of that length (a full
length's oldest other shape is then replaced), and a length whose header could not be learnt
is tried again only after as many typed reads.
"""

from __future__ import annotations

import copy
import struct
from collections.abc import Callable
from typing import Any

from pocketmq.remoting.protocol import header_json
from pocketmq.remoting.protocol.command import SendV2Request
from pocketmq.remoting.protocol.headers import SendMessageRequestHeader
from pocketmq.remoting.protocol.message import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, MessageConst
from pocketmq.remoting.protocol.slots import SlotRecord

__all__ = [
    "DIGITS",
    "OTHER_SHAPES",
    "PER_LENGTH",
    "QUEUE_IDS",
    "SHAPES",
    "SendRawRequest",
    "full_header",
    "learn",
]

#: header lengths kept (all are dropped when one more is learnt)
_MAX_SHAPES = 256
#: shapes kept per header length (producers of equal-length headers: module docstring)
PER_LENGTH = 4
#: headers of a length not read by its shape (or not learnable) before it is learnt again
RELEARN_AFTER = 64
_OPAQUE_MAX = 10**9  # (9 digits at most: any is an int32)
#: a digit's value by its one-byte bytes (the cached one-byte objects: their hashes are kept)
DIGITS = {bytes((48 + i,)): i for i in range(10)}
_UNIQ = "UNIQ_KEY\x01"
_new = object.__new__
#: a queue id's digits -> its value, as ``int()`` reads them (any queue a topic has: RocketMQ
#: caps a topic's queues at 1024 by default); the shape read takes no other
QUEUE_IDS = {str(i).encode(): i for i in range(1024)}
_json = header_json.dumps  # (orjson's, or the stdlib's with the same escapes for our check)
#: the property keys the send processor looks for in a send's properties (WAIT, CLUSTER, DELAY,
#: TRAN_MSG, each with its separator: broker.processor.message_props), decided once per shape
_SEND_KEYS = tuple(
    f"{name}{NAME_VALUE_SEPARATOR}"
    for name in (MessageConst.WAIT, MessageConst.CLUSTER, MessageConst.DELAY, MessageConst.TRAN_MSG)
)


#: A shape: (unpack: the changing values, the header as a %-format of them, the indexes of
#: e, g, the UNIQ_KEY (-1: none changes) and the opaque among them, the properties before and
#: after the UNIQ_KEY, the header of the learnt values (``SendRawRequest.shape_header``: its
#: fields but the queue id, born timestamp and properties are every header's of the shape),
#: language code, version, flag, whether every header of the shape has plain properties:
#: ``SendRawRequest.plain``). The opaque is unpacked as two values: its digits but the last
#: (maybe empty) and the last, so the frame loop converts it with ``int()`` only when its
#: leading digits change (every 10 requests; g, when it changes: every millisecond): ~0.65k
#: instructions an ``int()`` of bytes (3.11's type call, PyNumber_Long, PyLong_FromString)
_Shape = tuple[
    Callable[[Any], tuple[bytes, ...]], bytes, int, int, int, int, str, str,
    SendMessageRequestHeader, int, int, int, bool,
]  # fmt: skip
#: header length -> its first shape (read by the frame decoder's loop: ``frame.FrameDecoder._split``)
SHAPES: dict[int, _Shape] = {}
_shapes = SHAPES
#: header length -> its other shapes, oldest first (at most ``PER_LENGTH - 1``), tried when
#: the first's constant pieces are not the header's (emptied in place, never rebound: frame)
OTHER_SHAPES: dict[int, list[_Shape]] = {}
_others = OTHER_SHAPES
#: header length -> typed reads of that length since a try taught nothing or filled it
_misses: dict[int, int] = {}


class SendRawRequest(SlotRecord, SendV2Request):
    """A SEND_MESSAGE_V2 read by its shape (module docstring). ``shape_header`` is the shape's
    one header (the learnt header's, shared by every send of the shape: never written): its
    fields are this send's but for the three a shape's headers differ in, which are this
    request's own ``queue_id``, ``born_timestamp`` and ``properties`` (no header object made and
    eight fields copied per send: ~1.1k instructions in the frame loop, plus its allocation
    and free). ``send_header`` is the send's full header, made when first asked for (a batch,
    a topic's first checks, a retry topic, tests). ``v2_fields`` (the typed decode's struct)
    and ``ext_fields`` are decoded from ``raw_header`` when asked for (hooks, ACL, tests). Made
    as ``SendRawRequest()`` (object's ``__init__``: :class:`SlotRecord`), its slots filled by
    the frame decoder.

    ``plain``: the header's properties are non-empty, hold none of the keys WAIT, CLUSTER,
    DELAY and TRAN_MSG and do not end with a separator, so the broker stores them as they are
    plus its cluster's entry (``broker.processor.send``: no search of them per send). Decided
    once per shape (:func:`_plain`): only the UNIQ_KEY value varies between a shape's headers."""

    __slots__ = ("_send_header", "born_timestamp", "plain", "properties", "queue_id", "shape_header")
    plain: bool
    shape_header: SendMessageRequestHeader
    queue_id: int
    born_timestamp: int
    properties: str | None
    # what every such request has (class attributes: fewer slots to fill per frame)
    code = 310
    remark = None
    serialize_type = 0

    @property
    def send_header(self) -> SendMessageRequestHeader:
        """The send's header: the shape's with this send's queue id, born timestamp and
        properties (one object per request, made on the first read)."""
        try:
            return _SEND_HEADER.__get__(self, SendRawRequest)  # type: ignore[no-any-return]
        except AttributeError:
            header = copy.copy(self.shape_header)
            header.queue_id = self.queue_id
            header.born_timestamp = self.born_timestamp
            header.properties = self.properties
            _SEND_HEADER.__set__(self, header)
            return header

    @property
    def v2_fields(self) -> Any:
        return header_json.send_v2_decode(self.raw_header).extFields  # type: ignore[misc]


_SEND_HEADER = SendRawRequest.__dict__["_send_header"]


def full_header(request: object, header: SendMessageRequestHeader) -> SendMessageRequestHeader:
    """The send's whole header where ``header`` was read from ``request``: a shape-read send's
    own (``header`` is its shape's: :class:`SendRawRequest`), else ``header`` itself."""
    return request.send_header if request.__class__ is SendRawRequest else header


def _find_once(header: bytes, needle: bytes) -> int:
    """Where ``needle`` ends in ``header`` when it is there once, else -1."""
    at = header.find(needle)
    if at < 0 or header.find(needle, at + 1) >= 0:
        return -1
    return at + len(needle)


def _plain(pre: str, post: str) -> bool:
    """Whether every properties text ``pre + uniq + post`` (``uniq``: any non-empty run of ASCII
    letters and digits, ``pre`` ending with ``UNIQ_KEY`` and its separator) is plain
    (``SendRawRequest.plain``); for a shape without UNIQ_KEY, whether ``pre`` is (``post``
    empty: no ``uniq`` either).

    Exact for every ``uniq``: a key ends with the name/value separator (\x01) and holds no
    property separator (\x02); ``uniq`` holds neither, and ``post`` is empty or starts with
    \x02, so a key in the joined text lies wholly in ``pre`` or wholly in ``post``. The text
    ends with ``post``'s last character, or a letter or digit of ``uniq`` (or ``pre``'s last)."""
    if not pre:
        return False
    for key in _SEND_KEYS:
        if key in pre or key in post:
            return False
    return not (post or pre).endswith(PROPERTY_SEPARATOR)


def learn(header: bytes | bytearray, v2: Any) -> None:
    """Keep the shape of ``header`` (decoded typed as ``v2``, a ``send_v2_decode`` result whose
    language is known) when it is one (module docstring), unless a try of its length taught
    nothing or filled it fewer than ``RELEARN_AFTER`` typed reads ago."""
    hlen = len(header)
    missed = _misses.get(hlen)
    if missed is not None and missed + 1 < RELEARN_AFTER:
        _misses[hlen] = missed + 1
        return
    if (hlen not in _shapes and len(_shapes) >= _MAX_SHAPES) or len(_misses) >= _MAX_SHAPES:
        _shapes.clear()
        _others.clear()
        _misses.clear()
    _misses[hlen] = 0  # (a failed try waits as long as a full length)
    header = bytes(header)
    f = v2.extFields
    opaque = v2.opaque
    if v2.remark is not None or not 0 <= opaque < _OPAQUE_MAX:
        return
    e, g, props = f.e, f.g, f.i
    if not (e.isascii() and e.isdigit() and len(e) <= 9 and g.isascii() and g.isdigit() and len(g) <= 18):
        return
    try:  # the header this one reads as (None: it raises, and the typed path decides)
        parsed = SendMessageRequestHeader.from_v2_attrs(f)
    except Exception:
        return
    # the changing values: (where, raw bytes, whether split: its digits but the last, then the
    # last, see _Shape)
    cuts: list[tuple[int, bytes, bool]] = []
    for key, value in ((b'"e":"', e), (b'"g":"', g)):
        at = _find_once(header, key)
        raw = value.encode()
        if at < 0 or header[at : at + len(raw) + 1] != raw + b'"':
            return
        cuts.append((at, raw, False))
    pre = post = ""
    has_uniq = False
    plain = _plain(props or "", "")  # (no UNIQ_KEY: the properties are the shape's constant)
    if props is not None and _UNIQ in props:
        pre, rest = props.split(_UNIQ, 1)
        pre += _UNIQ
        end = rest.find("\x02")
        uniq, post = (rest, "") if end < 0 else (rest[:end], rest[end:])
        at = _find_once(header, b'"i":"')
        if not uniq or not (uniq.isascii() and uniq.isalnum()) or at < 0:
            return
        raw_props = _json(props)
        if header[at - 1 : at - 1 + len(raw_props)] != raw_props:
            return  # escaped otherwise than orjson's: not located
        at += len(_json(pre)) - 2
        if header[at : at + len(uniq)] != uniq.encode():
            return
        cuts.append((at, uniq.encode(), False))
        has_uniq = True
        plain = _plain(pre, post)
    at = _find_once(header, b'"opaque":')
    raw = str(opaque).encode()
    if at < 0 or header[at : at + len(raw)] != raw or header[at + len(raw) : at + len(raw) + 1] not in (b",", b"}"):  # fmt: skip
        return
    cuts.append((at, raw, True))
    fmt: list[str] = []
    render: list[bytes] = []
    pos = values = 0
    index: dict[int, int] = {}  # cut -> the index of its (first) value
    for k in sorted(range(len(cuts)), key=lambda k: cuts[k][0]):
        at, raw, split = cuts[k]
        if at < pos:
            return  # overlapping (cannot happen for a typed header: defensive)
        index[k] = values
        fmt.append(f"{at - pos}x{len(raw) - 1}s1s" if split else f"{at - pos}x{len(raw)}s")
        render += (header[pos:at].replace(b"%", b"%%"), b"%s%s" if split else b"%s")
        pos = at + len(raw)
        values += 2 if split else 1
    fmt.append(f"{hlen - pos}x")
    render.append(header[pos:].replace(b"%", b"%%"))
    # (cuts: e, g, [uniq,] opaque)
    shape: _Shape = (
        struct.Struct("".join(fmt)).unpack,
        b"".join(render),
        index[0],
        index[1],
        index[2] if has_uniq else -1,
        index[len(cuts) - 1],
        pre,
        post,
        parsed,
        header_json.LANGUAGE_BY_NAME[v2.language],
        v2.version,
        v2.flag,
        plain,
    )
    first = _shapes.get(hlen)
    if first is None:
        _shapes[hlen] = shape
        del _misses[hlen]
        return
    others = _others.get(hlen, [])
    if any(shape[1] == kept[1] for kept in (first, *others)):
        return  # (its constants are a kept shape's: a value its read refuses; wait)
    if len(others) + 2 >= PER_LENGTH:  # full now: the next try waits
        del others[: len(others) + 2 - PER_LENGTH]
    else:
        del _misses[hlen]
    others.append(shape)
    _others[hlen] = others
