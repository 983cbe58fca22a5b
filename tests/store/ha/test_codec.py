"""HA frames: RocketMQ 4.x's byte layout, decoded whole, one byte at a time and with trailing bytes."""

from __future__ import annotations

import random
import struct

import pytest

from pocketmq.store.ha.codec import (
    MAX_TRANSFER_BODY,
    MIN_READ,
    HAFrameError,
    ReportDecoder,
    TransferDecoder,
    encode_report,
    encode_transfer_header,
    transfer_start,
)


def test_layouts_are_rocketmqs():
    assert encode_report(0x0102030405060708) == bytes(range(1, 9))
    assert encode_transfer_header(1 << 30, 32768) == struct.pack(">qi", 1 << 30, 32768)
    assert len(encode_transfer_header(0, 0)) == 12


def test_report_whole_bytewise_and_trailing():
    stream = encode_report(100) + encode_report(250) + encode_report(4096)
    assert ReportDecoder().feed(stream) == 4096  # the last complete report wins
    d = ReportDecoder()
    seen = [d.feed(stream[i : i + 1]) for i in range(len(stream))]
    assert [s for s in seen if s is not None] == [100, 250, 4096]
    assert all(s is None for i, s in enumerate(seen) if (i + 1) % 8)
    d = ReportDecoder()
    assert d.feed(stream + b"\x00\x00\x00") == 4096 and d.buffered == 3
    assert d.feed(b"\x00\x00\x00\x00\x07") == 7  # the trailing bytes complete the next report


def test_negative_report_is_garbage():
    with pytest.raises(HAFrameError):
        ReportDecoder().feed(encode_report(-1) + encode_report(10))
    with pytest.raises(HAFrameError):
        ReportDecoder().feed(b"\xff" * 8)


def _frames(chunks: list[tuple[int, bytes]]) -> bytes:
    return b"".join(encode_transfer_header(o, len(b)) + b for o, b in chunks)


def test_transfer_whole_bytewise_and_trailing():
    chunks = [(1 << 30, b"abc" * 100), (1 << 30 | 300, b""), ((1 << 30) + 300, b"z" * 7)]
    stream = _frames(chunks)
    got = [(o, bytes(b)) for o, b in TransferDecoder().feed(stream)]
    assert got == chunks
    d = TransferDecoder()
    out: list[tuple[int, bytes]] = []
    for i in range(len(stream)):
        out += [(o, bytes(b)) for o, b in d.feed(stream[i : i + 1])]
    assert out == chunks and d.buffered == 0
    d = TransferDecoder()
    trailing = encode_transfer_header(5, 10) + b"12345"
    assert [(o, bytes(b)) for o, b in d.feed(stream + trailing)] == chunks
    assert d.buffered == len(trailing)
    assert [(o, bytes(b)) for o, b in d.feed(b"67890")] == [(5, b"1234567890")]


@pytest.mark.parametrize(
    "header",
    [
        encode_transfer_header(-5, 0),
        encode_transfer_header(0, -1),
        encode_transfer_header(0, MAX_TRANSFER_BODY + 1),
    ],
)
def test_bad_transfer_headers(header):
    with pytest.raises(HAFrameError):
        TransferDecoder().feed(header)


def test_transfer_start_rule():
    seg = 1 << 30
    assert transfer_start(0, 0, seg) == 0
    assert transfer_start(0, 3 * seg + 12345, seg) == 3 * seg  # an empty slave: the last segment
    assert transfer_start(0, 3 * seg, seg) == 3 * seg
    assert transfer_start(777, 3 * seg, seg) == 777  # anything else resumes exactly


def test_transfer_buffer_received_in_place_in_odd_slices():
    """The slave's path: the socket reads into get_buffer(), received() parses in place; the
    unparsed tail moves to the front, and a transfer bigger than the buffer grows it."""
    rng = random.Random(3)
    chunks = [(i * 1000, rng.randbytes(rng.choice([0, 1, 700, 5000, 40_000]))) for i in range(60)]
    stream = _frames(chunks)
    d = TransferDecoder(capacity=16 * 1024)  # smaller than some transfers
    out: list[tuple[int, bytes]] = []
    pos = 0
    while pos < len(stream):
        space = d.get_buffer(min_free=1)
        n = min(len(space), rng.randrange(1, 9000), len(stream) - pos)
        space[:n] = stream[pos : pos + n]
        pos += n
        out += [(o, bytes(b)) for o, b in d.received(n)]
    assert out == chunks and d.buffered == 0


def test_a_bad_header_never_sizes_the_buffer():
    d = TransferDecoder(capacity=1024)
    d.get_buffer()[:12] = encode_transfer_header(0, MAX_TRANSFER_BODY + 1)
    with pytest.raises(HAFrameError):
        d.received(12)
    assert len(d.get_buffer()) <= MIN_READ + 1024  # no 64 MiB allocation for it
