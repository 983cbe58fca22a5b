"""A batch send's body split into ``(flag, body, properties)`` items for ``MessageStore.put_batch``.

Body layout (Java ``MessageDecoder.encodeMessages``; items back to back, big-endian):

======  =====  ==============================================================
offset  bytes  field
======  =====  ==============================================================
0       4      TOTALSIZE: this item's size, header included
4       4      MAGICCODE (0, ignored)
8       4      BODYCRC (0, ignored)
12      4      FLAG
16      4      BODYLENGTH
20      n      BODY
20+n    2      PROPERTIESLENGTH (== TOTALSIZE - 22 - BODYLENGTH)
22+n    m      PROPERTIES (``k\\x01v\\x02...``, UTF-8)
======  =====  ==============================================================

Every message of the batch shares topic, queue, sysFlag, born time/host and reconsume times
(the request header's); its stored properties are its own with the header's appended
(``MessageExtBatchEncoder``: one ``\\x02`` between them). Inconsistent items raise
:class:`MessageIllegalError` with RocketMQ's MESSAGE_ILLEGAL code, and so does a stored record
longer than ``maxMessageSize``, or all of them together longer than it (the encoder's one
buffer in RocketMQ).
"""

from __future__ import annotations

import struct

from pocketmq.remoting.protocol.errors import MessageIllegalError
from pocketmq.remoting.protocol.message import PROPERTY_SEPARATOR, HostAddress
from pocketmq.store import BatchBody, BatchItem, MessageInner

ITEM_HEAD = struct.Struct(
    ">"
    "i"  # TOTALSIZE
    "i"  # MAGICCODE
    "i"  # BODYCRC
    "i"  # FLAG
    "i"  # BODYLENGTH
)
_HEAD = ITEM_HEAD.size
#: header + the 2-byte properties length: the smallest item
_MIN_ITEM = _HEAD + 2
_MAX_PROPS = 32767
#: a stored record's bytes besides body, topic and properties (``send_checks.STORED_FIXED``)
_STORED_FIXED = 91
#: an item's TOTALSIZE, FLAG and BODYLENGTH (MAGICCODE and BODYCRC skipped)
_ITEM_SIZES = struct.Struct(">i8xii").unpack_from
#: a NUL byte, which no properties in a record end with: joins the items' properties for one
#: decode (an item whose properties hold one is taken by ``batch_items``)
_NUL = b"\x00"


def _illegal(detail: str) -> MessageIllegalError:
    return MessageIllegalError(f"the batch body is illegal: {detail}")


def batch_messages(
    data: bytes,
    topic: str,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: HostAddress,
    store_host: HostAddress,
    reconsume_times: int,
    header_props: str,
    max_body: int,
    body_too_long: str,
) -> list[MessageInner]:
    """The batch's messages as :class:`MessageInner` objects (tools, tests; the send path
    uses :func:`batch_items` with ``MessageStore.put_batch``). Raises as ``batch_items``."""
    return [
        MessageInner(
            topic,
            bytes(body),
            queue_id,
            flag,
            props,
            sys_flag,
            born_timestamp,
            born_host,
            store_host,
            reconsume_times,
        )
        for flag, body, props in batch_items(data, header_props, max_body, body_too_long, topic)
    ]


def batch_items(
    data: bytes, header_props: str, max_body: int, body_too_long: str, topic: str = ""
) -> list[BatchItem]:
    """The batch's ``(flag, body, properties)`` items; ``header_props`` (non-empty) is appended
    to each one's properties. Bodies are memoryviews into ``data`` (copied once, by the store).

    Raises:
        MessageIllegalError: a truncated or inconsistent item, properties that are not UTF-8,
            or a stored record (``topic``'s) or all of them longer than ``max_body``
            (``maxMessageSize``; remark ``body_too_long``).
    """
    n = len(data)
    if n == 0:
        raise _illegal("empty batch body")
    out: list[BatchItem] = []
    append = out.append
    unpack = ITEM_HEAD.unpack_from
    sep = PROPERTY_SEPARATOR
    view = memoryview(data)
    pos = 0
    # stored size of each record but its own properties and body; the total is checked as it grows
    fixed = _STORED_FIXED + len(topic.encode())
    header_len = len(header_props.encode())
    stored_total = 0
    while pos < n:
        if n - pos < _MIN_ITEM:
            raise _illegal(f"truncated batch item at {pos}")
        total, _, _, flag, body_len = unpack(data, pos)
        if total < _MIN_ITEM or total > n - pos:
            raise _illegal(f"batch item at {pos}: total size {total} out of range")
        props_len = total - _MIN_ITEM - body_len
        if body_len < 0 or props_len < 0:
            raise _illegal(f"batch item at {pos}: body length {body_len} out of range")
        p = pos + _HEAD + body_len
        # the 2-byte length must say what TOTALSIZE implies (a Java short: at most 32767)
        if props_len > _MAX_PROPS or (data[p] << 8 | data[p + 1]) != props_len:
            raise _illegal(f"batch item at {pos}: properties length inconsistent")
        end = pos + total
        if props_len:
            try:
                props = data[p + 2 : end].decode()
            except UnicodeDecodeError:
                raise _illegal(f"batch item at {pos}: properties are not UTF-8") from None
            if props[-1] != sep:
                props = f"{props}{sep}{header_props}"
                props_len += 1
            else:
                props += header_props
        else:
            props = header_props
        stored = fixed + body_len + props_len + header_len
        stored_total += stored
        if stored > max_body or stored_total > max_body:
            raise MessageIllegalError(body_too_long)
        append((flag, view[pos + _HEAD : p], props))
        pos = end
    return out


def checked_body(
    data: bytes, header_props: str, max_body: int, body_too_long: str, topic: str
) -> BatchBody | list[BatchItem]:
    """The batch for ``MessageStore.put_batch``: a :class:`BatchBody` (the request body, its
    items' sizes and properties bytes, no item per message) when every item has properties
    that all end with a separator or none does, else, and for anything :func:`batch_items`
    refuses, :func:`batch_items`' list (or its exception): the same stored bytes and errors.
    Every item's properties are decoded in one call (joined with NULs): the UTF-8 check and
    reput's strings."""
    n = len(data)
    tail = header_props.encode()
    if n < _MIN_ITEM or not tail or not tail[-1]:  # (a NUL last: the store refuses the records)
        return batch_items(data, header_props, max_body, body_too_long, topic)
    # the first item's properties say whether the items end with a separator: the stored ones
    # are then the item's bytes and the header's, else with a separator between (every item
    # must do as the first)
    total = int.from_bytes(data[:4])
    trailing = 0 < total <= n and data[total - 1] == 2
    if not trailing:
        tail = b"\x02" + tail
    limit = _MAX_PROPS - len(tail)  # (the store's MAX_PROPERTIES_LENGTH: 32767)
    heads: list[tuple[int, int, int]] = []
    props: list[bytes]
    equal: tuple[int, int, tuple[int, ...], tuple[bytes, ...]] | None = None
    # a body of equal items is read in one unpack (its heads in ``equal``); the loop reads
    # any other item by item
    uniform = _uniform_items(data, n, total, trailing, limit)
    if uniform is not None:
        props, equal = uniform
    else:
        props = []
    add_head = heads.append
    add_props = props.append
    pos = n if uniform is not None else 0
    try:
        while pos < n:
            head = _ITEM_SIZES(data, pos)
            total, _, blen = head
            end = pos + total
            plen = total - blen - _MIN_ITEM
            p = end - plen
            # (a short or negative length, one past the body, a properties length other than
            # TOTALSIZE's, or a last byte unlike the first item's: batch_items decides)
            if blen < 0 or plen <= 0 or plen > limit or end > n or (data[p - 2] << 8 | data[p - 1]) != plen or (data[end - 1] == 2) is not trailing:  # fmt: skip
                return batch_items(data, header_props, max_body, body_too_long, topic)
            add_head(head)
            add_props(data[p:end])
            pos = end
    except struct.error:  # (a truncated last item)
        return batch_items(data, header_props, max_body, body_too_long, topic)
    count = len(props)
    # every stored record's size summed (batch_items checks them as they grow): the body and
    # properties bytes of the items are the request's minus the items' heads and lengths
    if count * (_STORED_FIXED + len(topic.encode()) + len(tail) - _MIN_ITEM) + n > max_body:
        return batch_items(data, header_props, max_body, body_too_long, topic)
    # the stored properties' strings: the items' with the tail, one decode, one split
    props.append(b"")
    try:
        strings = (tail + _NUL).join(props).decode().split("\x00")
    except UnicodeDecodeError:
        return batch_items(data, header_props, max_body, body_too_long, topic)
    props.pop()
    strings.pop()
    if len(strings) != count:  # (a NUL inside some properties)
        return batch_items(data, header_props, max_body, body_too_long, topic)
    return BatchBody(data, heads, props, strings, tail, equal)


#: one unpack of a body of ``count`` equal items (TOTALSIZE, BODYLENGTH) -> its Struct
_UNIFORM: dict[tuple[int, int, int], struct.Struct] = {}
#: Structs kept, and the most items a body read so may have: a Struct costs ~175 bytes an
#: item (a client's 4 MiB of 22-byte items would have made one of ~33 MB)
_UNIFORM_MAX = 32
_UNIFORM_MAX_ITEMS = 512


def _uniform_items(
    data: bytes, n: int, total: int, trailing: bool, limit: int
) -> tuple[list[bytes], tuple[int, int, tuple[int, ...], tuple[bytes, ...]]] | None:
    """``checked_body``'s properties bytes and ``BatchBody.equal`` (TOTALSIZE, BODYLENGTH, each
    item's flag, each one's body as bytes) of a body whose items all have the first item's
    TOTALSIZE and BODYLENGTH (an SDK batch of equal-sized messages), read by one
    ``unpack_from``; None for any other body (``checked_body``'s loop decides). Each item's
    checks are the loop's: a properties length in (0, ``limit``], the 2-byte length TOTALSIZE
    implies, a last byte that is a separator exactly when the first item's is. Every item's
    TOTALSIZE, BODYLENGTH and 2-byte length are checked as the first item's bytes, a C-level
    count over a strided slice of the body per byte (no int made per item and field)."""
    if total < _MIN_ITEM or n % total:
        return None
    blen = int.from_bytes(data[16:20], signed=True)
    plen = total - blen - _MIN_ITEM
    if blen < 0 or plen <= 0 or plen > limit:
        return None
    count = n // total
    if count > _UNIFORM_MAX_ITEMS:
        return None
    at = _HEAD + blen  # (the first item's 2-byte properties length)
    if (data[at] << 8 | data[at + 1]) != plen:
        return None
    for off in (0, 1, 2, 3, 16, 17, 18, 19, at, at + 1):
        if data[off::total].count(data[off]) != count:
            return None
    if data[total - 1 :: total].count(2) != (count if trailing else 0):
        return None
    key = (count, total, blen)
    unpack = _UNIFORM.get(key)
    if unpack is None:
        if len(_UNIFORM) >= _UNIFORM_MAX:
            _UNIFORM.clear()
        # each item: (TOTALSIZE, MAGICCODE, BODYCRC), FLAG, (BODYLENGTH), body, (the 2-byte
        # properties length), the properties (the body as bytes: encode_body packs the whole
        # batch's records in one call, which takes no memoryview)
        unpack = _UNIFORM[key] = struct.Struct(">" + f"12xi4x{blen}s2x{plen}s" * count)
    values = unpack.unpack_from(data)
    return list(values[2::3]), (total, blen, values[0::3], values[1::3])
