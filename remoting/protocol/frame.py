"""Sans-IO frame splitter: bytes in, complete ``RemotingCommand``s out.

Modelled on h2's ``FrameBuffer`` and h11's ``ReceiveBuffer``: the decoder owns a bytearray,
parses every complete frame available in one ``feed`` call, and keeps the remainder. It never
allocates what a length prefix claims: a prefix is checked against ``max_frame_size`` before
any of its bytes are awaited, so a 2 GiB claim fails at once.

``feed`` never raises for what the peer sent. It returns the commands that are complete (an
empty list: need more data) and records each problem, in stream order, in ``errors`` (the
local kind of protocol error; the transport turns them into ``RemoteProtocolError`` at its one
receive point and empties the list):

* ``HeaderDecodeError`` with an ``opaque``: a well delimited frame whose header is bad. The
  frame is skipped and the scan goes on, so the frames after it are still returned; the caller
  answers that opaque with SYSTEM_ERROR.
* ``FrameError`` / ``FrameTooLargeError`` (broken framing: negative or oversize length, or a
  header length above ``max_header_size``, refused from the frame's first 8 bytes, before the
  header is buffered or parsed) or a
  ``HeaderDecodeError`` without an opaque (the peer speaks something else): the stream cannot
  go on. The commands before it are returned, ``broken`` is set to the error (always the last
  one in ``errors``), the buffer is dropped, and later ``feed`` calls return nothing.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from itertools import repeat

from pocketmq.remoting.protocol import header_json
from pocketmq.remoting.protocol.command import RemotingCommand, SendV2Request, command_from_header
from pocketmq.remoting.protocol.end_fields import END_START
from pocketmq.remoting.protocol.end_raw import SHAPES, EndRawRequest, end_typed
from pocketmq.remoting.protocol.errors import (
    FrameError,
    FrameTooLargeError,
    HeaderDecodeError,
    LocalProtocolError,
)
from pocketmq.remoting.protocol.send_ok import SEND_OK_START, send_ok_command
from pocketmq.remoting.protocol.send_raw import DIGITS, QUEUE_IDS, SendRawRequest, learn
from pocketmq.remoting.protocol.send_raw import OTHER_SHAPES as OTHER_SEND_SHAPES
from pocketmq.remoting.protocol.send_raw import SHAPES as SEND_SHAPES

#: RocketMQ's default ``com.rocketmq.remoting.frameMaxLength`` (16 MiB, prefix included).
DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024
#: ``serverHeaderMaxLength``: a longer header is refused from its length word (a real client's
#: largest is a send's properties, which RocketMQ caps at 32 KiB); the JSON parse of a larger
#: one would stall every other connection of the loop (a 14.7 MiB header: ~0.4 s).
DEFAULT_MAX_HEADER_SIZE = 256 * 1024
_LENGTH = struct.Struct(">i")
#: length word + (serializeType << 24 | headerLength) word
_WORDS = struct.Struct(">ii")
_unpack_words = _WORDS.unpack_from
_repeat = repeat
#: the frame loop's iterator when it takes every frame (never runs out: shared)
_FOREVER = repeat(None)
_new = object.__new__
_typed = header_json.typed_decode
_send_v2 = header_json.send_v2_decode
_SEND_V2_START = header_json.SEND_V2_START
_LANGUAGES = header_json.LANGUAGE_BY_NAME
_shape_of = SHAPES.get  # (end_raw empties SHAPES in place, never rebinds it)
_send_shape_of = SEND_SHAPES.get  # (send_raw's, likewise)
_other_send_shapes_of = OTHER_SEND_SHAPES.get
_queue_id_of = QUEUE_IDS.get
_learn_send = learn
#: A header longer than this holds the bytes :func:`_json_command` dispatches on (the 9th and
#: the 25th); a shorter one is no typed kind (SEND_OK_START is 37 bytes).
_KIND_MIN = 24
assert len(SEND_OK_START) > _KIND_MIN and SEND_OK_START[8] == 48 and SEND_OK_START[24] == 77
assert _SEND_V2_START[8] == END_START[8] == 51 and _SEND_V2_START[9] == 49 != END_START[9]


class FrameDecoder:
    """Split a byte stream into commands. One instance per connection."""

    __slots__ = (
        "_buf", "_numbers", "broken", "errors", "held", "max_frame_size", "max_header_size", "server",
        "stopped",
    )  # fmt: skip

    def __init__(
        self,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
        *,
        server: bool = True,
    ) -> None:
        self.max_frame_size = max_frame_size
        self.max_header_size = max_header_size
        #: False: a client's decoder, which reads replies; the frame loop does not test each
        #: frame for a producer's SEND_MESSAGE_V2 first (a prefix test, ~0.5k instructions,
        #: that fails on every reply); one would be decoded by the general path, as the same
        #: command (its ``ext_fields`` a dict at once).
        self.server = server
        #: The bytes received but not yet part of a complete frame (read-only for callers; the
        #: same object for the decoder's life): ``len(held)`` is :attr:`buffered` without a
        #: property call (~0.6k instructions in CPython 3.11), for a per-read check.
        self._buf = self.held = bytearray()
        #: Problems found since the caller last emptied this list, in stream order (see the
        #: module docstring); only the last one can be fatal (it is then ``broken`` too).
        self.errors: list[LocalProtocolError] = []
        #: Set once the stream cannot be resynchronised; ``feed`` returns nothing from then on.
        self.broken: LocalProtocolError | None = None
        #: A shape-read send's born time and opaque (``_split``), from the last ones converted:
        #: (g's digits, its value, the opaque's digits but the last, their value times ten):
        #: kept from read to read (one send a read at one in flight; g changes every
        #: millisecond, the opaque's leading digits every 10 requests)
        self._numbers: tuple[bytes | None, int, bytes | None, int] = (None, 0, None, 0)
        #: Where :meth:`feed_head` stopped in its data after its ``most`` frames (0: it took all
        #: of it); the caller keeps the rest and resets this.
        self.stopped = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """Add ``data`` and return every command that is now complete (see the module docstring)."""
        if self.broken is not None:
            return []
        buf = self._buf
        # (a producer's send goes straight to ``_split``, told by the 31 of 310 where a JSON
        # header's code is: an index each, ~0.2k instructions, where the checks and unpack
        # below cost ~1k more; ``_split`` reads it by its shape, with every check, and decodes
        # anything else with these bytes, rare (another code 31x), as the same command. Only
        # a server's decoder asks: a client's reads replies, which all take the block below)
        if (
            not buf
            and len(data) >= 8
            and (not self.server or len(data) < 18 or data[16] != 51 or data[17] != 49)
        ):
            # One whole JSON frame per read: a request or reply when few are in flight. Decoded
            # here with the checks of ``_split`` (which this skips with its setup, ~0.3 us);
            # anything else, or a header that does not decode, takes ``_split``.
            length, word = _unpack_words(data, 0)
            size = len(data)
            if (
                length == size - 4
                and length <= self.max_frame_size - 4
                and 0 <= word < 0x1000000  # JSON (word >> 24 == 0), header length in the low 24 bits
                and word <= self.max_header_size
                and 8 + word <= size
            ):
                # the code's first digit (_json_command)
                kind = data[16] if word > _KIND_MIN else 0
            else:
                kind = -1
            if kind >= 0:
                try:
                    cmd = _json_command(
                        data[8 : 8 + word], data[8 + word :] if size > 8 + word else None, kind
                    )
                except HeaderDecodeError:
                    pass  # _split records it
                else:
                    return [cmd]
        out: list[RemotingCommand] = []
        if not buf:
            # The common case on a busy connection: frames are cut straight out of ``data``
            # (one copy per body) and only a trailing partial frame is kept.
            self._split(data, 0, out)
            return out
        if len(buf) < 8:  # rare: a split length or header-length word (both checked in _split)
            buf += data
            self._split(buf, 0, out)
            return out
        # A frame left partial by the previous read (its length was checked when buffered, and
        # the buffer never holds a whole frame between calls): complete it with just the bytes
        # it lacks, then go on in ``data`` itself, so a large read is never copied into the
        # buffer and shifted out of it again.
        (length,) = _LENGTH.unpack_from(buf)
        need = 4 + length - len(buf)
        if need > len(data):
            buf += data
            return out
        buf += memoryview(data)[:need]
        self._split(buf, 0, out)
        if self.broken is None:
            self._split(data, need, out)
        return out

    def feed_head(self, data: bytes, most: int) -> list[RemotingCommand]:
        """:meth:`feed` of a read (nothing held before it) that decodes at most ``most`` frames:
        when more follow, :attr:`stopped` is where they start (not buffered: the caller keeps
        them and feeds them later, in order). One walk of the frames, where a walk of their
        lengths first (``frames_end``: ~0.5k instructions a frame) told whether to cut."""
        out: list[RemotingCommand] = []
        if self.broken is None:
            self._split(data, 0, out, _repeat(None, most))
        return out

    def _split(
        self, src: bytes | bytearray, pos: int, out: list[RemotingCommand], frames: Iterator[None] = _FOREVER
    ) -> None:
        """Append every complete frame of ``src[pos:]`` to ``out``; keep the rest in the buffer.
        ``frames``: one item a frame (:meth:`feed_head`'s count: a for over a repeat costs less
        than a counter and its test, ~0.2k instructions a frame); when it runs out first,
        :attr:`stopped` is where the rest starts."""
        # (module names read in the loop as they are, and ``out.append`` called through the
        # list: no method bound per call (three bindings were ~1.3k instructions a read, most
        # reads one frame); 3.11 specializes both the global reads and the list append)
        buf = self._buf
        end = len(src)
        limit = self.max_frame_size - 4
        max_header = self.max_header_size
        # (None: no V2 test, without msgspec or in a client's decoder)
        v2_start = _SEND_V2_START if _send_v2 is not None and self.server else None
        # Bodies are copied out of a bytearray through a view (one copy, straight to bytes);
        # no view outlives this call, so the buffer can be resized below.
        view = memoryview(src) if src is buf else None
        g_seen, g_value, o_seen, o_base = self._numbers  # (a shape-read send's: __init__)
        held_shape = None  # the send shape whose parts the locals below hold (the frame loop)
        try:
            for _ in frames:
                if end - pos < 8:
                    break
                length, word = _unpack_words(src, pos)
                if length < 4 or length > limit:
                    self._break(self._length_error(length))
                    return
                hlen = word & 0xFFFFFF
                if hlen > max_header:  # refused before its bytes are awaited or parsed
                    self._break(
                        FrameTooLargeError(f"header length {hlen} exceeds max header size {max_header}")
                    )
                    return
                stop = pos + 4 + length
                if stop > end:
                    break
                bstart = pos + 8 + hlen
                if bstart > stop:
                    self._break(
                        HeaderDecodeError(f"header length {hlen} exceeds the frame ({length - 4} bytes)")
                    )
                    return
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
                    # JSON, the common case (word >> 24 == 0: an int compare, where 3.11's
                    # unspecialized shift costs ~0.25k instructions a frame)
                    if hlen == word:
                        # a producer's send (the hottest frame): read by the shape an earlier
                        # one taught (send_raw: no JSON parse, the send's header built here),
                        # tried before the prefix test: a shape is learnt only from a header
                        # with the prefix, outside its changing values, so a header its
                        # constant pieces match has it (~0.55k instructions a send less);
                        # another frame of a shape's length fails the match and goes on
                        sshape = _send_shape_of(hlen) if v2_start is not None else None
                        if sshape is not None:
                            if sshape is not held_shape:  # (the last frame's: its locals kept)
                                (unpack_values, render, i_e, i_g, i_uniq, i_opaque, pre, post, base,
                                 language, version, flag, plain) = held_shape = sshape  # fmt: skip
                            values = unpack_values(header)  # (the changing ones)
                            # its constant pieces: the values put back into the shape's
                            # give the header; else another producer's header of this
                            # length may be one of the length's other shapes' (send_raw)
                            if render % values == header:
                                queue_id = _queue_id_of(values[i_e])
                            else:
                                queue_id = None
                                for other in _other_send_shapes_of(hlen, ()):
                                    other_values = other[0](header)
                                    if other[1] % other_values == header:
                                        (unpack_values, render, i_e, i_g, i_uniq, i_opaque, pre,
                                         post, base, language, version, flag,
                                         plain) = held_shape = other  # fmt: skip
                                        values = other_values
                                        queue_id = _queue_id_of(values[i_e])
                                        break
                            # the opaque: its digits but the last, and the last
                            # (send_raw._Shape); g and those as the last converted?
                            raw_g = values[i_g]
                            raw_opaque, o_last = values[i_opaque], values[i_opaque + 1]
                            g_new = raw_g != g_seen
                            o_new = raw_opaque != o_seen
                            # the queue id one of QUEUE_IDS (a subscript, no int() call:
                            # another takes the typed decode), the numbers ASCII digits
                            # (what int() reads as the field parse does: no sign, space
                            # or _; the digits last converted are), the opaque without a
                            # leading zero (JSON), the UNIQ_KEY ASCII letters and digits
                            # (JSON string content, no escape)
                            if (
                                queue_id is not None
                                and (not g_new or raw_g.isdigit())
                                and o_last in DIGITS
                                and (
                                    not o_new
                                    or not raw_opaque
                                    or (raw_opaque.isdigit() and raw_opaque[0] != 48)
                                )
                                and (i_uniq < 0 or values[i_uniq].isalnum())
                            ):
                                # int() (~0.65k instructions) only for new digits
                                if g_new:
                                    g_seen, g_value = raw_g, int(raw_g)
                                    self._numbers = (g_seen, g_value, o_seen, o_base)
                                if o_new:
                                    o_seen, o_base = raw_opaque, int(raw_opaque or b"0") * 10
                                    self._numbers = (g_seen, g_value, o_seen, o_base)
                                # no header object per send: the shape's one header and
                                # the three values its sends differ in (send_raw.SendRawRequest)
                                raw_send = SendRawRequest()
                                raw_send.shape_header = base
                                raw_send.queue_id = queue_id
                                raw_send.born_timestamp = g_value
                                # (UNIQ_KEY last, as our SDK sends it: one concatenation, no
                                # join of three parts)
                                raw_send.properties = (
                                    base.properties
                                    if i_uniq < 0
                                    else pre + values[i_uniq].decode()
                                    if not post
                                    else f"{pre}{values[i_uniq].decode()}{post}"
                                )
                                raw_send.plain = plain  # (the shape's: send_raw._plain)
                                raw_send.language = language
                                raw_send.version = version
                                raw_send.opaque = o_base + DIGITS[o_last]
                                raw_send.flag = flag
                                raw_send.raw_header = header
                                raw_send.body = body
                                out.append(raw_send)
                                continue
                        if v2_start is not None and header.startswith(v2_start):
                            # else its extFields typed, no dict built (SendV2Request), here in
                            # the loop (no Python call per frame); a header the typed decode
                            # refuses: _general_command
                            try:
                                v2 = _send_v2(header)  # type: ignore[misc]
                            except Exception:
                                pass
                            else:
                                if v2.language in _LANGUAGES:
                                    send = _new(SendV2Request)
                                    send.code = v2.code
                                    send.language = _LANGUAGES[v2.language]
                                    send.version = v2.version
                                    send.opaque = v2.opaque
                                    send.flag = v2.flag
                                    send.remark = v2.remark
                                    send.v2_fields = v2.extFields
                                    send.raw_header = header
                                    send.body = body
                                    send.serialize_type = 0
                                    out.append(send)
                                    _learn_send(header, v2)
                                    continue
                        else:
                            # the code's first digit picks the typed decode to try (_json_command)
                            kind = header[8] if hlen > _KIND_MIN else 0
                            if kind == 48:
                                if header[24] == 77:  # a send's reply (the client's hottest): send_ok
                                    ok = send_ok_command(header, body)
                                    if ok is not None:
                                        out.append(ok)
                                        continue
                            elif kind == 51:
                                # a producer's END_TRANSACTION (one per transaction): read by
                                # the shape an earlier one taught (end_raw, here: no call per
                                # frame), else typed (end_typed), not through _json_command
                                shape = _shape_of(hlen) if body is None else None
                                if shape is not None:
                                    # (its own local names: a send shape's parts stay in
                                    # theirs for the read's next sends, see held_shape)
                                    (end_unpack, end_render, i_offset, i_table, i_end_opaque, i_msg, i_tx,
                                     wide, group, commit, end_language, end_version) = shape  # fmt: skip
                                    end_values = end_unpack(header)  # (the changing ones)
                                    raw_offset, raw_table = end_values[i_offset], end_values[i_table]
                                    raw_opaque = end_values[i_end_opaque]
                                    # its constant pieces (the values put back into the
                                    # shape's give the header), the numbers ASCII digits
                                    # (what int() reads as the header parser does: no sign,
                                    # space or _), the opaque without a leading zero (JSON),
                                    # the ids ASCII letters and digits (JSON string content)
                                    if (
                                        end_render % end_values == header
                                        and raw_offset.isdigit()
                                        and raw_table.isdigit()
                                        and raw_opaque.isdigit()
                                        and (raw_opaque[0] != 48 or not wide)
                                        and (end_values[i_msg] + end_values[i_tx]).isalnum()
                                    ):
                                        shaped = _new(EndRawRequest)
                                        shaped.language = end_language
                                        shaped.version = end_version
                                        shaped.raw_header = header
                                        shaped.end = (int(raw_offset), int(raw_table), group, commit)
                                        out.append(shaped)
                                        continue
                                end_cmd = end_typed(header, body)
                                if end_cmd is not None:
                                    out.append(end_cmd)
                                    continue
                        out.append(_general_command(header, body))
                    else:
                        out.append(command_from_header(header, (word >> 24) & 0xFF, body))
                except HeaderDecodeError as exc:
                    if exc.opaque is None:  # nobody to answer: the peer speaks something else
                        self._break(exc)
                        return
                    self.errors.append(exc)  # the frame is skipped; the scan goes on
            else:  # feed_head's frames are out: the rest is the caller's
                if pos < end:
                    self.stopped = pos
            if 4 <= end - pos < 8:  # a split prefix: check the length before buffering it
                (length,) = _LENGTH.unpack_from(src, pos)
                if length < 4 or length > limit:
                    self._break(self._length_error(length))
                    return
        finally:
            if view is not None:
                view.release()
            if self.broken is not None:
                buf.clear()
            elif src is buf:
                if pos:
                    del buf[:pos]
            elif pos < end and not self.stopped:
                buf += memoryview(src)[pos:] if pos else src

    def _length_error(self, length: int) -> FrameError:
        if length > self.max_frame_size - 4:
            return FrameTooLargeError(f"frame length {length} exceeds max frame size {self.max_frame_size}")
        return FrameError(f"invalid frame length {length}")

    def _break(self, err: LocalProtocolError) -> None:
        """The stream cannot go on: record ``err`` as the last error (the buffer is dropped)."""
        self.broken = err
        self.errors.append(err)


def _json_command(header: bytes | bytearray, body: bytes | None, kind: int) -> RemotingCommand:
    """The command of a JSON frame (``HeaderDecodeError``: a bad header); ``kind`` is the
    header's ninth byte, the first digit of its code (0 when the header is too short to hold a
    typed one's prefix).

    A byte, not a prefix test per typed kind: ``bytes.startswith`` costs ~0.5k instructions in
    CPython 3.11 (its arguments are parsed into a tuple), an index ~0.1k. ``{"code":`` is 8
    bytes, so ``'0'`` (48) is a success reply, a send's when its first extFields key starts
    with ``M`` (``MSG_REGION``, the 25th byte: :data:`SEND_OK_START`), and ``'3'`` (51) may be
    SEND_MESSAGE_V2 (310) or END_TRANSACTION (37), told apart by their prefixes (``end_typed``
    tests END_TRANSACTION's). The typed
    decode checks the rest (a header that only looks like one is refused and decoded here)."""
    if kind == 48:
        if header[24] == 77:  # a send's reply (the client's hottest): send_ok
            ok = send_ok_command(header, body)
            if ok is not None:
                return ok
    elif kind == 51:  # END_TRANSACTION: typed (one frame a read: no shape tried, _split's loop)
        end = end_typed(header, body)
        if end is not None:
            return end
    return _general_command(header, body)


def _general_command(header: bytes | bytearray, body: bytes | None) -> RemotingCommand:
    """:func:`_json_command` without its typed kinds. The typed decode's result is taken as
    ``header_json.decode_header`` takes it, its slots filled directly."""
    cmd = _new(RemotingCommand)
    if _typed is not None:
        try:
            h = _typed(header)
        except Exception:  # not the common shape: the untyped path decides (and words errors)
            pass
        else:
            ext = h.extFields
            if h.language in _LANGUAGES and (
                ext is None
                or not ("Signature" in ext or "AccessKey" in ext or "OnsChannel" in ext)
                or header_json.credentials_kept(ext)
            ):
                cmd.code = h.code
                cmd.language = _LANGUAGES[h.language]
                cmd.version = h.version
                cmd.opaque = h.opaque
                cmd.flag = h.flag
                cmd.remark = h.remark
                cmd.ext_fields = ext
                cmd.body = body
                cmd.serialize_type = 0
                return cmd
    (
        cmd.code,
        cmd.language,
        cmd.version,
        cmd.opaque,
        cmd.flag,
        cmd.remark,
        cmd.ext_fields,
    ) = header_json.decode_untyped(header)
    cmd.body = body
    cmd.serialize_type = 0
    return cmd


def frames_end(data: bytes, pos: int, count: int) -> int:
    """Where the ``count`` frames from ``pos`` (a frame start) end; ``len(data)`` when the data
    ends first or a length is bad (the decoder reports it). Walks the length fields only."""
    end = len(data)
    unpack = _LENGTH.unpack_from
    for _ in range(count):
        if end - pos < 4:
            return end
        (length,) = unpack(data, pos)
        if length < 4:
            return end
        pos += 4 + length
        if pos >= end:
            return end
    return pos
