"""RocketMQ 4.x's HA frames (``HAService`` / ``HAConnection``), sans-IO.

The HA link is a raw TCP stream, not remoting frames. All integers are big-endian.

Slave → master, a *report* (8 bytes)::

    0       8
    +-------+
    | int64 |  the slave's max CommitLog offset: "I hold every byte below this"
    +-------+

Reports are sent on connect, after applied data and at least every ``haSendHeartbeatInterval``;
the master reads whole 8-byte groups only and uses the last complete one of a read.

Master → slave, a *transfer* (12-byte header + body)::

    0              8          12            12 + size
    +--------------+----------+-------------+
    | int64 offset | int32    | size bytes  |  CommitLog bytes [offset, offset + size):
    |              | size     | of raw data |  records may be cut anywhere, BLANKs included
    +--------------+----------+-------------+

``size == 0`` is a heartbeat (the master had nothing new for ``haSendHeartbeatInterval``). A
slave whose CommitLog is not empty requires ``offset`` == its max offset (else the logs diverge
and it closes the connection). Bodies are at most ``haTransferBatchSize`` (32 KiB by default);
:data:`MAX_TRANSFER_BODY` is how much a pocketmq slave buffers before calling a frame garbage.
"""

from __future__ import annotations

import struct

__all__ = [
    "HEADER",
    "MAX_TRANSFER_BODY",
    "MIN_READ",
    "READ_BUFFER_SIZE",
    "REPORT",
    "HAFrameError",
    "ReportDecoder",
    "TransferDecoder",
    "encode_report",
    "encode_transfer_header",
    "transfer_start",
]

REPORT = struct.Struct(">q")
HEADER = struct.Struct(">qi")
#: the slave's read buffer (Java HAClient READ_MAX_BUFFER_SIZE): up to this much is read per call
READ_BUFFER_SIZE = 4 * 1024 * 1024
#: free space a read is offered at least (the buffer is compacted below it)
MIN_READ = 256 * 1024
#: the largest transfer body a slave accepts (a 4.x master sends ≤ haTransferBatchSize, 32 KiB
#: by default; operators raise it to a few MiB at most): a bigger size is garbage, not a frame
MAX_TRANSFER_BODY = 64 * 1024 * 1024

_REPORT_SIZE = REPORT.size
_HEADER_SIZE = HEADER.size
_unpack_report = REPORT.unpack_from
_unpack_header = HEADER.unpack_from


class HAFrameError(ValueError):
    """Bytes that cannot be an HA frame (negative offset or size, oversized body)."""


def encode_report(offset: int) -> bytes:
    return REPORT.pack(offset)


def encode_transfer_header(offset: int, size: int) -> bytes:
    return HEADER.pack(offset, size)


def transfer_start(report: int, master_max: int, segment_size: int) -> int:
    """Where the master starts transferring after a slave's first report.

    A report of 0 (an empty slave) starts at the beginning of the master's last CommitLog
    segment, as RocketMQ does: a new slave copies recent data, not the whole history. Any
    other report is resumed exactly.
    """
    if report != 0:
        return report
    return max(0, master_max - master_max % segment_size)


class ReportDecoder:
    """The master's side: slave reports out of a byte stream, keeping a partial group."""

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial = b""

    @property
    def buffered(self) -> int:
        return len(self._partial)

    def feed(self, data: bytes) -> int | None:
        """The last complete report in what has arrived so far (None if no group completed).

        Raises:
            HAFrameError: a report is negative (no CommitLog offset is).
        """
        buf = self._partial + data if self._partial else data
        whole = len(buf) - len(buf) % _REPORT_SIZE
        self._partial = bytes(buf[whole:])
        if whole == 0:
            return None
        # every group is checked, not only the last: a negative one is garbage wherever it is
        offsets = struct.unpack_from(f">{whole // _REPORT_SIZE}q", buf)
        if min(offsets) < 0:
            raise HAFrameError(f"negative offset report {min(offsets)}")
        return int(offsets[-1])


class TransferDecoder:
    """The slave's side: ``(offset, body)`` transfers out of a byte stream, parsed in place.

    It is the slave's read buffer (Java ``HAClient.byteBufferRead``, 4 MiB): the transport
    receives straight into :meth:`get_buffer` (``asyncio.BufferedProtocol``) and
    :meth:`received` parses what arrived, so a transfer's body is copied once, from the socket
    into this buffer, before the slave writes it to its CommitLog. Bodies are memoryviews into
    the buffer, valid until the next :meth:`get_buffer` or :meth:`feed`.
    """

    __slots__ = ("_buf", "_end", "_start", "max_body")

    def __init__(self, max_body: int = MAX_TRANSFER_BODY, capacity: int = READ_BUFFER_SIZE) -> None:
        self._buf = bytearray(capacity)
        self._start = 0  # the first byte not parsed yet
        self._end = 0  # the end of the received bytes
        self.max_body = max_body

    @property
    def buffered(self) -> int:
        return self._end - self._start

    def get_buffer(self, min_free: int = MIN_READ) -> memoryview:
        """Free space after the received bytes: at least ``min_free`` bytes and room for the
        whole transfer whose header has arrived (the unparsed bytes move to the front, or to
        a bigger buffer, only when that space is missing)."""
        buf, start, end = self._buf, self._start, self._end
        if start == end:
            start = end = self._start = self._end = 0
        need = max(min_free, self._pending_frame() - (end - start))
        if len(buf) - end < need:
            pending = end - start
            if pending + need > len(buf):
                grown = bytearray(pending + need)
                grown[:pending] = buf[start:end]
                self._buf = buf = grown
            else:
                buf[:pending] = buf[start:end]
            self._start, self._end = 0, pending
        return memoryview(buf)[self._end :]

    def _pending_frame(self) -> int:
        """The size of the incomplete transfer at the parse position (a header's if unknown)."""
        if self._end - self._start < _HEADER_SIZE:
            return _HEADER_SIZE
        size = int(_unpack_header(self._buf, self._start)[1])
        # a bad size is refused by received(); never allocate for it
        return _HEADER_SIZE + size if 0 <= size <= self.max_body else _HEADER_SIZE

    def received(self, nbytes: int) -> list[tuple[int, memoryview]]:
        """``nbytes`` arrived in the :meth:`get_buffer` space: every complete transfer so far,
        in order (heartbeats have empty bodies).

        Raises:
            HAFrameError: a negative offset or size, or a size above ``max_body``.
        """
        self._end += nbytes
        buf, end = self._buf, self._end
        pos = self._start
        view = memoryview(buf)
        out: list[tuple[int, memoryview]] = []
        while end - pos >= _HEADER_SIZE:
            offset, size = _unpack_header(buf, pos)
            if offset < 0 or size < 0 or size > self.max_body:
                raise HAFrameError(f"bad transfer header: offset {offset}, size {size}")
            body_end = pos + _HEADER_SIZE + size
            if body_end > end:
                break
            out.append((offset, view[pos + _HEADER_SIZE : body_end]))
            pos = body_end
        self._start = pos
        return out

    def feed(self, data: bytes | memoryview) -> list[tuple[int, memoryview]]:
        """:meth:`received` for bytes read elsewhere (tests, tools): copies them in first."""
        n = len(data)
        self.get_buffer(n)[:n] = data
        return self.received(n)
