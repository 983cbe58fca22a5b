"""``RemotingConnection``: an ``asyncio.Protocol`` that owns one TCP connection's bytes and futures.

Used by both sides. Inbound bytes go through the sans-IO ``FrameDecoder``; every complete
command is a response (resolves ``pending[opaque]``) or a request (handed to the ``Dispatcher``:
the server's processors, or a client's handlers for server-initiated requests such as
CHECK_TRANSACTION_STATE). :class:`~pocketmq.remoting.transport.dispatch.ProcessorDispatcher` turns
every handler outcome into a reply on the connection the request came from.

Rules:

* Writes are coalesced, never delayed past the current loop turn: replies produced while a
  ``data_received`` call is processed leave together at its end; any other write goes out at
  once, and later writes of the same turn join a batch flushed at the start of the next
  (``call_soon``): a burst of N requests costs two syscalls, not N, while the peer already works
  on the first (corking until the end of the turn measured slower: lockstep instead of overlap).
  So too a batch leaves once it holds ``MAX_BATCH_PARTS`` buffers, and a large read is handled
  ``PER_TURN`` commands per turn (in order; reading pauses while ``MAX_BACKLOG`` commands wait).
  Writes go on the socket itself while the transport holds nothing (:mod:`.wire_io`).
* Timeouts are deadlines stored on the pending entry (requests of one loop turn share its clock
  read; :mod:`.deadlines`).
* ``connection_lost`` first handles the commands of earlier reads still waiting, a few a turn
  (``_serve_lost``; a peer that writes a burst and closes gets every request served, replies dropped; a
  write that finds the peer reset first reads what it sent before: ``_peer_reset``; none when the
  server dropped them, ``abort(unhandled=False)``), then fails every pending request with
  ``RemotingConnectError`` chained to the cause.
* Garbage from the peer: the decoder's ``LocalProtocolError``s become ``RemoteProtocolError`` in
  one place (h11), ``_remote_protocol_errors``: see there. A ``close_reason`` keeps no traceback
  once the connection is lost: its frames would keep the connection alive (``forget_frames``).
* When the transport's write buffer is full (``pause_writing``) reading stops, and so does the
  handling of the backlog: a peer that never reads its replies costs at most the high-water
  mark plus one slice of replies (pulls: ~110 MiB per client before).
* Partial frames count against a budget shared by the server's connections (the connection that
  would pass it is closed); ``partial_since`` tells the sweeper since when one has been waiting.
* Flow control (``waitTimeMillsIn*Queue``, :class:`~pocketmq.remoting.transport.limits.QueueWait`):
  the backlog keeps each command's read time beside it (one clock read per read or slice).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from pocketmq.remoting.protocol.codes import RPC_ONEWAY, RPC_TYPE_RESPONSE, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.errors import (
    HeaderDecodeError,
    LocalProtocolError,
    RemoteProtocolError,
    RemotingConnectError,
    RemotingTooMuchRequestError,
)
from pocketmq.remoting.protocol.frame import (
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_MAX_HEADER_SIZE,
    FrameDecoder,
    frames_end,
)
from pocketmq.remoting.transport.deadlines import Pending, expire_pending
from pocketmq.remoting.transport.hooks import ReadEnd
from pocketmq.remoting.transport.limits import (
    PartialFrameBudget,
    QueueWait,
    RateLimitedLog,
    TurnShare,
    forget_frames,
)
from pocketmq.remoting.transport.wire_io import (
    IOV_MAX,
    MAX_BATCH_PARTS,
    format_addr,
    read_rest,
    write_through,
)

logger = logging.getLogger(__name__)
#: a peer sending junk on many connections must not flood the log (one line per 10 s per kind)
_limited_log = RateLimitedLog(logger)

# Plain names for what every frame touches (a module attribute or enum read costs ~20-80 ns).
_monotonic = time.monotonic
_write = os.write
_RPC_TYPE_RESPONSE = int(RPC_TYPE_RESPONSE)
_RPC_ONEWAY = int(RPC_ONEWAY)
_InvalidStateError = asyncio.InvalidStateError

HandlerResult = RemotingCommand | None | Awaitable[RemotingCommand | None]
#: A request handler: returns the reply, ``None`` (no reply now: oneway, or a held pull that
#: replies later through ``send_response``), or an awaitable of either.
Handler = Callable[["RemotingConnection", RemotingCommand], HandlerResult]
_ReplyFuture = asyncio.Future[RemotingCommand]

#: Too many requests awaiting replies on one connection.
MAX_PENDING = 65536

#: Commands handled per loop turn; the rest of a large read waits for the next turns, so I/O
#: completions (an fsync done) and other connections are served in between instead of after a
#: whole 256 KB read. At 128 SYNC_FLUSH sends in flight: 26-31k -> 32-39k msgs/s (paired runs).
PER_TURN = 32
#: A client's (``ReplyConnection``'s) read of up to this many replies is handled in its turn:
#: its replies are to its own requests (their callbacks, a send window's next sends), and a
#: read of 128 sends' SEND_OKs cut at PER_TURN took a loop turn more (~0.4k instructions a
#: send, callgrind); a larger read is handled ``PER_TURN`` a turn as a server's.
REPLIES_PER_TURN = 128
#: Reading pauses while this many commands of earlier reads are waiting.
MAX_BACKLOG = 4096
#: A read above this size that starts on a frame boundary is decoded ``PER_TURN`` frames per turn:
#: a 256 KB read of pipelined pulls took ~8 ms to decode, a hundred such clients held the loop
#: over a second (T16). Later reads join it; reading pauses past ``RAW_HOLD_MAX`` undecoded bytes.
RAW_SLICE_MIN = 16 * 1024
#: ... unless it holds at most this many frames: those are decoded at once (their handling still
#: ``PER_TURN`` a turn, through the backlog). At 128 sends in flight a read holds ~34 frames: cut
#: at 32, its last two were held raw, the next read joined them and every frame was copied once
#: more (the slice fed to the decoder); 64 send frames decode in ~0.15 ms.
RAW_WHOLE_MAX = 2 * PER_TURN
RAW_HOLD_MAX = 4 * 1024 * 1024
#: Commands a lost connection handles at a time (T16: 32 pulls with 512 KB replies took ~50 ms).
LOST_SLICE = 4
#: Bad headers (answered SYSTEM_ERROR) one connection may send before it is closed (RocketMQ
#: closes at the first): a fuzzing client cannot keep the loop busy with garbage (T14).
MAX_BAD_HEADERS = 16
#: A reply body this large is written at once instead of joining the batch.
BIG_BODY = 64 * 1024


class Dispatcher(Protocol):
    def dispatch(self, conn: RemotingConnection, request: RemotingCommand) -> None: ...

    def connection_made(self, conn: RemotingConnection) -> None: ...

    def connection_lost(self, conn: RemotingConnection) -> None: ...


class RemotingConnection(asyncio.Protocol):
    """One TCP connection (either side)."""

    server = True  # False: a client's, reading replies: no raw slices, no V2 test per frame (client.py)

    # Slots, not a ``__dict__``: one object fewer per connection for every full collection to
    # walk (T16: 11,000 connections), and slot reads are the cheapest attribute reads.
    __slots__ = (
        "__weakref__", "_backlog", "_backlog_paused", "_backlog_read", "_backlog_stalled", "_bad_headers",
        "_batch_time", "_budget", "_closed", "_closing", "_decoder", "_dispatch_all", "_dispatcher", "_drain_waiters", "_end", "_fd",
        "_loop", "_out", "_partial", "_queue_wait", "_raw", "_raw_more", "_raw_pos", "_raw_read", "_share", "_slice_read",
        "attrs", "can_write", "close_reason", "last_read", "last_write", "partial_since", "pending",
        "remote_addr", "transport",
    )  # fmt: skip

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        loop: asyncio.AbstractEventLoop | None = None,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
        partial_budget: PartialFrameBudget | None = None,
        queue_wait: QueueWait | None = None,
        share: TurnShare | None = None,
        read_end: ReadEnd | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        #: the server's work after a read (``hooks.ReadEnd``: the broker's reput slice), run by ``_handle``
        self._end = read_end
        #: the dispatcher's loop over a read's commands (``ProcessorDispatcher.dispatch_all``),
        #: None: ``dispatch`` per request here
        self._dispatch_all: (
            Callable[[RemotingConnection, list[RemotingCommand]], RemotingCommand | None] | None
        )
        #: (a server's only: a client reads replies, resolved inline in ``_handle`` without a call)
        self._dispatch_all = getattr(dispatcher, "dispatch_all", None) if self.server else None
        self._queue_wait = queue_wait
        self._share = share  # the server's: what a lost connection still serves (``_serve_lost``)
        #: with ``queue_wait``: the read time of each backlog command (same order), and of the
        #: commands of the slice being handled (None: the current read's)
        self._backlog_read: list[float] = []
        self._slice_read: list[float] | None = None
        #: a large read not decoded yet: the bytes, where its undecoded part starts, its read time
        self._raw: bytes | None = None
        #: reads that arrived while ``_raw`` was held, in order (joined to its rest when reached)
        self._raw_more: list[bytes] = []
        self._raw_pos, self._raw_read, self._bad_headers = 0, 0.0, 0
        self._decoder = FrameDecoder(max_frame_size, max_header_size, server=self.server)
        self._budget = partial_budget
        #: bytes of an unfinished frame this connection holds (counted in ``_budget``)
        self._partial = 0
        #: when the unfinished frame began (0.0: none); the server's sweeper closes the
        #: connection when it is older than ``serverFrameCompletionTimeoutSeconds``
        self.partial_since = 0.0
        self._loop = loop or asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, Pending] = {}
        self.remote_addr = ""
        #: Per-connection facts the owner wants to keep (client id, language, version ...).
        self.attrs: dict[str, Any] = {}
        self.last_read = self.last_write = _monotonic()
        #: Buffers waiting to be written together (``_write``); None: the next goes out at once.
        self._out: list[bytes] | None = None
        #: When the open batch began (a clock read that requests of the same loop turn reuse
        #: for their deadlines instead of reading the clock again).
        self._batch_time = self.last_read
        #: close()/abort() called or connection lost: writes fail instead of joining a batch.
        self._closing = False
        #: the socket's descriptor, written directly (wire_io); -1: through the transport (TLS)
        self._fd = -1
        #: False while the transport's write buffer is full (``pause_writing``): callers that
        #: may wait should ``await drain()`` first. Set by the connection only.
        self.can_write = True
        # Made on first use (most connections never wait): fewer objects for the GC (``__slots__``).
        self._drain_waiters: list[asyncio.Future[None]] | None = None
        self._closed: asyncio.Event | None = None
        self.close_reason: BaseException | None = None
        #: commands of a large read not handled yet (``PER_TURN``); reading paused past ``MAX_BACKLOG``
        self._backlog: list[RemotingCommand] | None = None
        self._backlog_paused = False
        #: the backlog waits for ``resume_writing`` (the peer does not read its replies)
        self._backlog_stalled = False

    # ------------------------------------------------------------------ asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's do not subclass it
        # (TCP_NODELAY: both loops' TCP transports set it; the local address: nothing read it)
        sock = transport.get_extra_info("socket")
        if sock is not None and transport.get_extra_info("sslcontext") is None:
            self._fd = sock.fileno()
        self.remote_addr = format_addr(transport.get_extra_info("peername"))
        self._dispatcher.connection_made(self)

    def data_received(self, data: bytes) -> None:
        self.last_read = self._batch_time = _monotonic()
        raw = self._raw
        if raw is not None:
            # a large read is still decoded a slice per turn: these bytes join it, in order; no
            # pause below ``RAW_HOLD_MAX``, as bytes left in the kernel are lost on a peer's RST
            # (a client closing with replies unread), and RocketMQ serves all that arrived
            # (kept apart, joined when the slices reach them (``_decode_raw``): a join here copied
            # all still held at every read, up to the 128 frames of a send window each time)
            more = self._raw_more
            more.append(data)
            self._raw_read = self.last_read  # (queue wait: the lenient stamp)
            held = len(raw) - self._raw_pos
            for chunk in more:
                held += len(chunk)
            if held > RAW_HOLD_MAX and not self._backlog_paused and self.transport is not None:
                self._backlog_paused = True
                self.transport.pause_reading()
            return
        # (inline of ``_decode``: one Python call less a read)
        decoder = self._decoder
        # (the length first: ``server``, a class attribute, is a read 3.11 does not specialize)
        if len(data) > RAW_SLICE_MIN and self.server and not decoder.held:
            # its first RAW_WHOLE_MAX frames; the rest, if any, decoded in the next turns
            # (``_next_slice``), after those of them over a turn's (the backlog)
            commands = decoder.feed_head(data, RAW_WHOLE_MAX)
            cut = decoder.stopped
            if cut:
                decoder.stopped = 0
                self._raw, self._raw_pos, self._raw_read = data, cut, self.last_read
        else:
            commands = decoder.feed(data)
        if decoder.errors or decoder.held or self._partial:
            self._decoded(commands)
        # (the common read, a turn's worth with nothing waiting, tested at once: the backlog's
        # bookkeeping is a call for the others; a client's turn is REPLIES_PER_TURN)
        n = len(commands)
        if (
            self._backlog is not None
            or (n > PER_TURN and (self.server or n > REPLIES_PER_TURN))
            or self._raw is not None
        ):
            commands = self._to_backlog(commands)
        if commands:
            self._slice_read = None
            self._handle(commands)

    def _to_backlog(self, commands: list[RemotingCommand]) -> list[RemotingCommand]:
        """``data_received``'s ``commands`` when earlier ones wait, they are more than a turn's,
        or a large read is held: what waits joins the backlog (its slices scheduled, reading
        paused past ``MAX_BACKLOG``); returns the ones to handle in this turn."""
        backlog, queue_wait = self._backlog, self._queue_wait
        if backlog is not None:  # an earlier read is still being handled: keep the order
            backlog += commands
            if queue_wait is not None:
                self._backlog_read += [self.last_read] * len(commands)
            commands = []
        elif len(commands) > PER_TURN:
            backlog = self._backlog = commands[PER_TURN:]
            if queue_wait is not None:
                self._backlog_read = [self.last_read] * len(backlog)
            del commands[PER_TURN:]
            self._loop.call_soon(self._next_slice)
        transport = self.transport
        if self._raw is not None and backlog is None:
            backlog = self._backlog = []
            self._loop.call_soon(self._next_slice)
        if backlog is not None and len(backlog) > MAX_BACKLOG and not self._backlog_paused and transport:
            self._backlog_paused = True
            transport.pause_reading()
        return commands

    def _decode(self, data: bytes) -> list[RemotingCommand]:
        """The commands ``data`` completes (decoder errors answered, partial frame counted);
        ``data_received`` has it inline."""
        decoder = self._decoder
        commands = decoder.feed(data)
        if decoder.errors or decoder.held or self._partial:
            self._decoded(commands)
        return commands

    def _decoded(self, commands: list[RemotingCommand]) -> None:
        """After a feed that left errors or an unfinished frame (now or before): the errors
        answered, the unfinished frame counted (per read, not per frame)."""
        decoder = self._decoder
        if decoder.errors:
            self._remote_protocol_errors(decoder.errors)
        if (held := len(decoder.held)) or self._partial:
            self._account_partial(held, bool(commands))

    def _decode_raw(self, backlog: list[RemotingCommand]) -> None:
        """Decode the next ``PER_TURN`` frames of the held read into ``backlog``."""
        raw, pos = self._raw, self._raw_pos
        assert raw is not None
        cut = frames_end(raw, pos, PER_TURN)
        more = self._raw_more
        if cut >= len(raw) and more:  # the reads held after it: joined to its rest (maybe a frame's start)
            if pos < len(raw):  # (one copy of each: its rest through a view, not sliced first)
                raw = b"".join([memoryview(raw)[pos:], *more])
            else:
                raw = more[0] if len(more) == 1 else b"".join(more)
            self._raw = raw
            more.clear()
            pos = 0
            cut = frames_end(raw, 0, PER_TURN)
        if cut >= len(raw):
            self._raw = None
        self._raw_pos = cut
        commands = self._decode(raw[pos:cut])
        backlog += commands
        if self._queue_wait is not None:
            self._backlog_read += [self._raw_read] * len(commands)

    def _account_partial(self, held: int, completed: bool) -> None:
        """Count the unfinished frame's ``held`` bytes against the shared budget; close this
        connection if they would pass it."""
        budget = self._budget
        if budget is not None:
            budget.used += held - self._partial
        self._partial = held
        if not held:
            self.partial_since = 0.0
        elif completed or not self.partial_since:
            self.partial_since = self.last_read
        if budget is not None and held and budget.used > budget.limit:
            _limited_log.emit(
                "partial-frame",
                "closing %s: partial frames of all connections would exceed serverPartialFrameMemoryMax (%d bytes)",
                self.remote_addr,
                budget.limit,
            )
            self.abort(
                RemoteProtocolError(f"partial frames exceed the server's budget of {budget.limit} bytes")
            )

    def _next_slice(self) -> None:
        """Handle the next ``PER_TURN`` commands of a large read (see ``PER_TURN``)."""
        backlog = self._backlog
        if self.transport is None:
            return  # lost meanwhile: ``_serve_lost`` has the backlog
        if backlog is None:
            self._backlog_read = []
            return
        if not self.can_write:
            # The peer is not reading its replies: handle no more of its requests until the
            # write buffer drains (``resume_writing`` schedules the next slice).
            self._backlog_stalled = True
            return
        if self._raw is not None and len(backlog) < PER_TURN:
            self._decode_raw(backlog)
        reads = self._backlog_read
        if len(backlog) > PER_TURN:
            commands = backlog[:PER_TURN]
            del backlog[:PER_TURN]
            if reads:
                self._slice_read = reads[:PER_TURN]
                del reads[:PER_TURN]
            self._loop.call_soon(self._next_slice)
        elif self._raw is not None:  # more of a large read to decode next turn
            commands, self._backlog = backlog[:], backlog
            backlog.clear()
            self._slice_read, self._backlog_read = reads[:], []
            self._loop.call_soon(self._next_slice)
        else:
            commands, self._backlog = backlog, None
            self._slice_read, self._backlog_read = reads, []
            if self._backlog_paused:
                self._backlog_paused = False
                if self.can_write and not self.transport.is_closing():
                    self.transport.resume_reading()
        now = self._batch_time = _monotonic()
        queue_wait = self._queue_wait
        slice_read = self._slice_read
        if queue_wait is not None and slice_read and now - slice_read[0] >= queue_wait.shortest:
            queued = len(self._backlog or ())
            commands, self._slice_read = queue_wait.sift(commands, slice_read, now, queued, self)
        self._handle(commands)

    def _handle(self, commands: list[RemotingCommand]) -> None:
        # Replies produced while handling these join one batch (the loop turn's batch when
        # one is already open), written at the end in one syscall.
        opened = self._out
        batch = self._out = opened if opened is not None else []
        began = self._batch_time
        end = self._end
        if end is not None:
            end.active = True
        try:
            run_all = self._dispatch_all
            if run_all is not None:  # (a ProcessorDispatcher's: the loop without a call per frame)
                stalled = run_all(self, commands)
                if stalled is not None:
                    self._stall(commands, stalled)  # the peer does not read, or the turn is over: stop here
            else:
                # (methods called through their objects: one bound per read is ~0.5k instructions)
                for cmd in commands:
                    if cmd.flag & _RPC_TYPE_RESPONSE:  # (a client's reply: ``_resolve`` inline, no call)
                        entry = self.pending.pop(cmd.opaque, None)
                        if entry is None:
                            logger.debug(
                                "%s: response for unknown opaque %d dropped", self.remote_addr, cmd.opaque
                            )
                        else:
                            try:
                                entry[0].set_result(cmd)
                            except _InvalidStateError:  # the waiter was cancelled meanwhile
                                pass
                    else:
                        self._dispatcher.dispatch(self, cmd)
                    if not self.can_write and self.transport is not None:
                        self._stall(commands, cmd)  # the peer does not read: stop here
                        break
        finally:
            self._out = opened
            if batch:
                transport = self.transport
                if transport is not None and not transport.is_closing():
                    self._put(transport, batch)
                    self.last_write = self.last_read
                batch.clear()
            queue_wait = self._queue_wait
            if queue_wait is not None:
                now = _monotonic()
                if now - began > queue_wait.held_limit:
                    queue_wait.held(began, now)
            if end is not None:
                # the work this read's requests asked for (a put's reput slice: the held pulls
                # it wakes), after their replies are out and in this turn: no loop callback
                end.active = False
                run = end.pending
                if run is not None:
                    end.pending = None
                    run()

    def _resolve(self, cmd: RemotingCommand) -> None:
        """A response read by a server connection (to a server-initiated request): its waiter
        (``pending``) gets it.

        Why two copies of these lines (keep them alike): a client's ``_handle`` has them inline,
        as every read of a client is replies (one a read at one send in flight), and a call per
        reply is the cost it avoids (callgrind, one reply a read: 18,002 -> 18,436 instructions
        a reply with the call); here they are a method because the server's loop over a read
        (``ProcessorDispatcher.dispatch_all``, its own module) reaches the connection only
        through calls, and a server reads a response rarely (GET_CONSUMER_RUNNING_INFO and the
        like, not per message). One copy for both would add that call to the client's reply,
        or the dispatcher's loop to the client's read."""
        entry = self.pending.pop(cmd.opaque, None)
        if entry is None:
            logger.debug("%s: response for unknown opaque %d dropped", self.remote_addr, cmd.opaque)
        else:
            try:
                entry[0].set_result(cmd)
            except _InvalidStateError:  # the waiter was cancelled meanwhile
                pass

    def _stall(self, commands: list[RemotingCommand], last: RemotingCommand) -> None:
        """The write buffer passed its high-water mark while handling ``commands``: the ones
        after ``last`` wait, ahead of the backlog, for ``resume_writing``; or the turn's time
        ran out (``dispatch.TURN_BUDGET``): they wait for the next turn."""
        idx = next(k for k, c in enumerate(commands) if c is last)
        rest = commands[idx + 1 :]
        backlog = self._backlog
        if rest:
            self._backlog = rest + backlog if backlog else rest
            if self._queue_wait is not None:
                slice_read = self._slice_read
                rest_read = slice_read[idx + 1 :] if slice_read else [self.last_read] * len(rest)
                self._backlog_read = rest_read + self._backlog_read
        if not self.can_write:
            if self._backlog:
                self._backlog_stalled = True
        elif rest and backlog is None:  # (a backlog has its ``_next_slice`` scheduled already)
            self._loop.call_soon(self._next_slice)

    def _remote_protocol_errors(self, errors: list[LocalProtocolError]) -> None:
        """The one place where the decoder's local errors become the peer's (h11's conversion).

        A bad header in an intact frame whose opaque is known gets a SYSTEM_ERROR reply and the
        connection goes on, ``MAX_BAD_HEADERS`` times. Anything else means the peer broke the framing or speaks something
        else: logged once, and the connection is aborted with a ``RemoteProtocolError`` (its
        ``close_reason``) once the commands decoded before it are handled (they were whole).
        """
        for exc in errors:
            opaque = exc.opaque if isinstance(exc, HeaderDecodeError) else None
            if opaque is not None and self._bad_headers < MAX_BAD_HEADERS:
                self._bad_headers += 1
                reply = RemotingCommand(
                    ResponseCode.SYSTEM_ERROR, opaque, RPC_TYPE_RESPONSE, f"bad request header: {exc}"
                )
                try:
                    self.send(reply)
                except RemotingConnectError:
                    pass  # closing already: nobody to answer
                continue
            if opaque is not None:
                exc = HeaderDecodeError(f"more than {MAX_BAD_HEADERS} bad request headers; last: {exc}")
            _limited_log.emit("protocol", "closing %s: %s", self.remote_addr, exc)
            self._decoder.broken, self._raw = exc, None  # nothing more of this peer is decoded
            self._loop.call_soon(self.abort, RemoteProtocolError.from_local(exc, self.remote_addr))
            break
        errors.clear()

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            self.close_reason = exc
        self.transport, self._out, self._closing = None, None, True
        self._share.add(self._serve_lost) if self._share else self._serve_lost()

    def _serve_lost(self) -> None:
        """After the close, every command read before it is handled (RocketMQ serves each request that
        arrived before the FIN; after a framing error, the whole frames before it), replies dropped, ``LOST_SLICE``
        at a time in the server's ``TurnShare``, the first too (T16: 100 non-readers closing held the loop ~2 s in
        one go, ~6 ms turns idle-closed in one sweep); then pending requests fail and ``on_close`` runs."""
        backlog = self._backlog = self._backlog or []  # (an empty one replaced: nothing else holds it)
        if self._raw is not None and len(backlog) < PER_TURN:  # a large read not decoded yet
            self._decode_raw(backlog)
        if backlog:
            commands = backlog[:LOST_SLICE]
            del backlog[:LOST_SLICE]
            self._batch_time = _monotonic()
            self._handle(commands)
        if backlog or self._raw is not None:
            self._share.add(self._serve_lost) if self._share else self._loop.call_soon(self._serve_lost)
            return
        self._backlog, self._backlog_read = None, []
        if self._partial:  # (after the held read: its tail may be one)
            self._account_partial(0, False)
        reason = self.close_reason
        pending, self.pending = self.pending, {}
        err = RemotingConnectError(
            f"connection to {self.remote_addr} closed" + (f": {reason}" if reason else "")
        )
        if reason is not None:
            err.__cause__ = reason
            forget_frames(reason)
        for future, _deadline, _request in pending.values():
            if not future.done():
                future.set_exception(err)
        for waiter in self._drain_waiters or ():
            if not waiter.done():
                waiter.set_exception(err)
        self._drain_waiters = None
        if self._closed is not None:
            self._closed.set()
        self._dispatcher.connection_lost(self)

    def pause_writing(self) -> None:
        self.can_write = False
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.can_write = True
        if self.transport is not None and not self.transport.is_closing() and not self._backlog_paused:
            self.transport.resume_reading()
        if self._backlog_stalled:
            self._backlog_stalled = False
            self._loop.call_soon(self._next_slice)
        waiters, self._drain_waiters = self._drain_waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    # --------------------------------------------------------------------------- writing
    @property
    def is_active(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def send(self, cmd: RemotingCommand) -> None:
        """Write one command (request or reply) without waiting.

        Raises:
            RemotingConnectError: the connection is closed.
            LocalProtocolError: the command is too large to encode.
        """
        head = cmd.encode_header()
        out = self._out
        if out is not None and not self._closing:  # a batch is open: join it (the hot path)
            out.append(head)
            body = cmd.body
            if body:
                out.append(body)
                if len(body) >= BIG_BODY:
                    # a large reply (a pull's) leaves now, so a write buffer past its high-water
                    # mark stops the handling of the next request (``_handle``), not a slice later
                    self._write_batch(out)
                    return
            if len(out) >= MAX_BATCH_PARTS:
                self._write_batch(out)
            return
        self._write(head, cmd.body, _monotonic())

    send_response = send

    def _write(self, head: bytes, body: bytes | None, now: float) -> None:
        """Write a command outside a batch (``now``: the caller's clock read, one a request)."""
        transport = self.transport
        if transport is None or self._closing or transport.is_closing():
            raise RemotingConnectError(f"connection to {self.remote_addr} is closed")
        out = self._out
        if out is not None:
            out.append(head)
            if body:
                out.append(body)
            return
        # The first write of a loop turn goes out now (the peer starts on it at once); the
        # turn's later writes are collected and flushed together at the start of the next.
        self._put(transport, [head, body] if body else [head])
        self.last_write = self._batch_time = now
        self._out = []
        self._loop.call_soon(self._flush)

    def _write_alone(self, head: bytes, body: bytes | None, now: float) -> None:
        """``_write`` outside a batch that opens none (``request(alone=True)``)."""
        transport = self.transport
        if transport is None or self._closing or transport.is_closing():
            raise RemotingConnectError(f"connection to {self.remote_addr} is closed")
        self._put(transport, [head, body] if body else [head])
        self.last_write = now

    def _write_batch(self, out: list[bytes]) -> None:
        """Write an open batch that reached ``MAX_BATCH_PARTS`` now; it stays open (emptied)."""
        transport = self.transport
        if transport is not None and not transport.is_closing():
            self._put(transport, out)
        out.clear()

    def _flush(self) -> None:
        out, self._out = self._out, None
        transport = self.transport
        if out:
            if transport is not None and not transport.is_closing():
                self._put(transport, out)
                self.last_write = _monotonic()
            out.clear()  # data_received may still hold this list: nothing is written twice

    def _put(self, transport: asyncio.Transport, bufs: list[bytes]) -> None:
        """``transport.writelines(bufs)``, on the socket itself while the transport holds nothing."""
        fd = self._fd
        if fd < 0 or len(bufs) > IOV_MAX or transport.get_write_buffer_size():
            transport.writelines(bufs)
            return
        try:
            if len(bufs) != 1:
                rest = write_through(fd, bufs)
            else:  # a reply alone (one send in flight): write(2) here, no write_through call
                buf = bufs[0]
                try:
                    sent = _write(fd, buf)
                except BlockingIOError:
                    sent = 0
                if sent == len(buf):
                    return
                rest = [memoryview(buf)[sent:] if sent else buf]
        except OSError as exc:
            self._peer_reset(exc)
            return
        if rest:
            transport.writelines(rest)

    def _peer_reset(self, exc: OSError) -> None:
        """A write found the peer gone (wire_io): what it sent before is read and served."""
        rest, self._fd, self._closing = read_rest(self._fd), -1, True  # nothing more is written
        if rest and self._raw is not None:  # after the large read still held, in order
            self._raw, self._raw_pos = self._raw[self._raw_pos :] + b"".join(self._raw_more) + rest, 0
            self._raw_more.clear()
        elif rest:
            commands = self._decode(rest)
            self._backlog = (self._backlog or []) + commands
            if self._queue_wait is not None:
                self._backlog_read += [self.last_read] * len(commands)
        self.abort(exc)  # connection_lost handles the backlog

    async def drain(self) -> None:
        """Wait until the transport accepts writes again."""
        if self.can_write:
            return
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._drain_waiters = [*(self._drain_waiters or ()), waiter]
        await waiter

    def request(
        self, cmd: RemotingCommand, timeout: float, waiter: Any = None, alone: bool = False
    ) -> _ReplyFuture:
        """Send a request and return the future of its reply, or ``waiter`` (anything with a future's
        ``set_result``, ``set_exception``, ``done``) to take it instead; ``cmd.opaque`` set by the owner.

        ``alone``: the caller knows nothing else is written in this loop turn (a push consumer's
        next pull, written by its own task after the listener ran): outside a batch the request
        goes out and no batch opens, so no ``_flush`` turn follows it (one loop turn, an
        ``epoll_wait``, per pull). A later write of the turn still goes out at once.

        Raises:
            RemotingTooMuchRequestError: ``MAX_PENDING`` requests already await replies.
            RemotingConnectError: the connection is closed.
            LocalProtocolError: the request is too large to encode.
        """
        pending = self.pending
        if len(pending) >= MAX_PENDING:
            raise RemotingTooMuchRequestError(
                f"{len(pending)} requests already pending on {self.remote_addr}"
            )
        head = cmd.encode_header()  # may raise: before the entry exists
        future: asyncio.Future[RemotingCommand] = self._loop.create_future() if waiter is None else waiter
        out = self._out
        if out is not None and not self._closing:
            # A batch is open (this loop turn already wrote or read): join it, and take the
            # deadline from the batch's clock read (a loop turn old at most; the sweeper's
            # granularity is coarser anyway).
            pending[cmd.opaque] = (future, self._batch_time + timeout, cmd)
            out.append(head)
            body = cmd.body
            if body:
                out.append(body)
            if len(out) >= MAX_BATCH_PARTS:
                self._write_batch(out)
            return future
        opaque = cmd.opaque
        now = _monotonic()  # (the deadline's and the write's: one clock read)
        pending[opaque] = (future, now + timeout, cmd)
        try:
            if alone:
                self._write_alone(head, cmd.body, now)
            else:
                self._write(head, cmd.body, now)
        except BaseException:
            del pending[opaque]
            raise
        return future

    def oneway(self, cmd: RemotingCommand) -> None:
        cmd.flag |= _RPC_ONEWAY
        self.send(cmd)

    def expire(self, now: float) -> int:
        """Fail every pending request whose deadline has passed; returns how many."""
        return expire_pending(self.pending, now, self.remote_addr)

    def close(self) -> None:
        """Close after writing what is buffered (writes batched this loop turn included)."""
        if self.transport is not None:
            if self._out:
                self._flush()
            self._closing = True
            self.transport.close()

    def abort(self, exc: BaseException | None = None, *, unhandled: bool = True) -> None:
        """Close at once, dropping buffered writes; ``exc`` becomes the ``close_reason``. With
        ``unhandled=False`` the requests read and not handled yet are dropped too, undecoded
        (the server's close of a peer that stopped reading: no reply could reach it)."""
        if self.transport is not None:
            if exc is not None and self.close_reason is None:
                self.close_reason = exc
            if not unhandled:
                self._raw, self._backlog, self._backlog_read, self._backlog_stalled = None, None, [], False
                self._raw_more.clear()
            self._closing = True
            self.transport.abort()

    async def wait_closed(self) -> None:
        if self._closing and self.transport is None and self._backlog is None:
            return  # connection_lost ran, and what was read before it is served
        self._closed = self._closed or asyncio.Event()
        await self._closed.wait()
