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
_new = object.__new__


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
        out: list[RemotingCommand] = []
        if not buf:
            # The common case on a busy connection: frames are cut straight out of ``data``
            # (one copy per body) and only a trailing partial frame is kept.
            self._split(data, 0, out)
            return out
        if len(buf) < 4 or not data:  # rare: a split length word, or feed(b"") after a bad header
            buf += data
            self._split(buf, 0, out)
            return out
        # A frame left partial by the previous read (its length was checked when buffered):
        # complete it with just the bytes it lacks, then go on in ``data`` itself, so a large
        # read is never copied into the buffer and shifted out of it again.
        (length,) = _LENGTH.unpack_from(buf)
        if length < 4 or length > self.max_frame_size - 4:  # only after a HeaderDecodeError
            buf.clear()
            self._fail(length)
        need = 4 + length - len(buf)
        if need <= 0:  # whole frames already buffered (a HeaderDecodeError stopped the scan)
            buf += data
            self._split(buf, 0, out)
            return out
        if need > len(data):
            buf += data
            return out
        buf += memoryview(data)[:need]
        try:
            self._split(buf, 0, out)
        except HeaderDecodeError:
            buf += memoryview(data)[need:]  # what follows the bad frame, for ``feed(b"")``
            raise
        self._split(data, need, out)
        return out

    def _split(self, src: bytes | bytearray, pos: int, out: list[RemotingCommand]) -> None:
        """Append every complete frame of ``src[pos:]`` to ``out``; keep the rest in the buffer."""
        buf = self._buf
        end = len(src)
        append = out.append
        unpack = _WORDS.unpack_from
        limit = self.max_frame_size - 4
        json_decode = header_json.decode_header
        new = _new
        command = RemotingCommand
        # Bodies are copied out of a bytearray through a view (one copy, straight to bytes);
        # no view outlives this call, so the buffer can be resized below.
        view = memoryview(src) if src is buf else None
        try:
            while end - pos >= 8:
                length, word = unpack(src, pos)
                if length < 4 or length > limit:
                    self._fail(length)
                stop = pos + 4 + length
                if stop > end:
                    break
                bstart = pos + 8 + (word & 0xFFFFFF)
                if bstart > stop:
                    pos = stop
                    raise HeaderDecodeError(
                        f"header length {word & 0xFFFFFF} exceeds the frame ({length - 4} bytes)"
                    )
                header = src[pos + 8 : bstart]
                body: bytes | None
                if stop == bstart:
                    body = None
                elif view is None:
                    body = src[bstart:stop]  # type: ignore[assignment]  # src is bytes here
                else:
                    body = view[bstart:stop].tobytes()
                pos = stop
                try:
                    if word >> 24 == 0:  # JSON, the common case: no call layers, slots filled directly
                        cmd = new(command)
                        (
                            cmd.code,
                            cmd.language,
                            cmd.version,
                            cmd.opaque,
                            cmd.flag,
                            cmd.remark,
                            cmd.ext_fields,
                        ) = json_decode(header)
                        cmd.body = body
                        cmd.serialize_type = 0
                        append(cmd)
                    else:
                        append(command_from_header(header, (word >> 24) & 0xFF, body))
                except HeaderDecodeError as exc:
                    exc.decoded = out
                    raise
            if 4 <= end - pos < 8:  # a split prefix: check the length before buffering it
                (length,) = _LENGTH.unpack_from(src, pos)
                if length < 4 or length > limit:
                    self._fail(length)
        finally:
            if view is not None:
                view.release()
            if self._broken is not None:
                buf.clear()
            elif src is buf:
                if pos:
                    del buf[:pos]
            elif pos < end:
                buf += memoryview(src)[pos:] if pos else src

    def _fail(self, length: int) -> None:
        """Mark the stream broken by an impossible length prefix and raise."""
        err: FrameError
        if length > self.max_frame_size - 4:
            err = FrameTooLargeError(f"frame length {length} exceeds max frame size {self.max_frame_size}")
        else:
            err = FrameError(f"invalid frame length {length}")
        self._broken = err
        raise err
