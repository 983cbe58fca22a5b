"""Sans-IO frame splitter: bytes in, complete ``RemotingCommand``s out.

Modelled on h2's ``FrameBuffer`` and h11's ``ReceiveBuffer``: the decoder owns a bytearray,
parses every complete frame available in one ``feed`` call, and keeps the remainder. It never
allocates what a length prefix claims: a prefix is checked against ``max_frame_size`` before
any of its bytes are awaited, so a 2 GiB claim fails at once.

Errors:

* ``FrameError`` / ``FrameTooLargeError``: the stream is unusable; the caller closes the
  connection. Later ``feed`` calls keep raising.
* ``HeaderDecodeError``: the frame was well delimited but its header is bad. The frame has been
  consumed; ``error.decoded`` holds the commands decoded before it, and ``error.opaque`` says
  which request to answer with SYSTEM_ERROR (``None``: close instead). Calling ``feed(b"")``
  continues with whatever follows.
"""

from __future__ import annotations

import struct

from pocketmq.remoting.protocol import header_json
from pocketmq.remoting.protocol.command import RemotingCommand, command_from_header
from pocketmq.remoting.protocol.errors import FrameError, FrameTooLargeError, HeaderDecodeError

#: RocketMQ's default ``com.rocketmq.remoting.frameMaxLength`` (16 MiB, prefix included).
DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024
_LENGTH = struct.Struct(">i")
#: length word + (serializeType << 24 | headerLength) word
_WORDS = struct.Struct(">ii")


class FrameDecoder:
    """Split a byte stream into commands. One instance per connection."""

    __slots__ = ("_broken", "_buf", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._broken: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """Add ``data`` and return every command that is now complete.

        Raises:
            FrameError: broken framing (negative or oversize length); close the connection.
            HeaderDecodeError: a bad header in an intact frame (see module docstring).
        """
        if self._broken is not None:
            raise self._broken
        buf = self._buf
        # Frames are cut straight out of ``data`` when nothing is buffered (the common case on
        # a busy connection: a read holds whole frames), so the bytes are not first appended to
        # the buffer and then deleted from it; only a trailing partial frame is kept.
        src: bytes | bytearray
        if buf:
            if data:
                buf += data
            src = buf
        else:
            src = data
        out: list[RemotingCommand] = []
        append = out.append
        pos = 0
        end = len(src)
        unpack = _WORDS.unpack_from
        limit = self.max_frame_size - 4
        json_decode = header_json.decode_header
        view = memoryview(src) if src is buf else None
        try:
            while end - pos >= 4:
                if end - pos >= 8:
                    length, word = unpack(src, pos)
                else:
                    length, word = _LENGTH.unpack_from(src, pos)[0], 0
                if length < 4 or length > limit:
                    if length > limit:
                        err: FrameError = FrameTooLargeError(
                            f"frame length {length} exceeds max frame size {self.max_frame_size}"
                        )
                    else:
                        err = FrameError(f"invalid frame length {length}")
                    self._broken = err
                    raise err
                stop = pos + 4 + length
                if stop > end:
                    break
                hstart = pos + 8
                bstart = hstart + (word & 0xFFFFFF)
                pos = stop
                if bstart > stop:
                    raise HeaderDecodeError(
                        f"header length {word & 0xFFFFFF} exceeds the frame ({length - 4} bytes)"
                    )
                # Header and body are copied out (the body once, as bytes): no view of the
                # buffer outlives this loop, so the buffer can be resized below.
                header = src[hstart:bstart]
                body: bytes | None
                if stop == bstart:
                    body = None
                elif view is None:
                    body = data[bstart:stop]  # src is data: one copy, straight to bytes
                else:
                    body = view[bstart:stop].tobytes()
                try:
                    if word >> 24 == 0:  # JSON, the common case: skip one call layer
                        code, language, version, opaque, flag, remark, ext = json_decode(header)
                        append(RemotingCommand(code, opaque, flag, remark, ext, body, language, version, 0))
                    else:
                        append(command_from_header(header, (word >> 24) & 0xFF, body))
                except HeaderDecodeError as exc:
                    exc.decoded = out
                    raise
        finally:
            if view is not None:
                view.release()
            if self._broken is not None:
                buf.clear()
            elif src is buf:
                if pos:
                    del buf[:pos]
            elif pos < end:
                buf += src[pos:] if pos else src
        return out
