"""``ReputService``: dispatches appended records at the end of the read whose request stored
them, or in the loop turn after a put made outside a read.

A put made while a broker server handles a read leaves one slice for that read's end
(``read_end``: run after the read's replies are written); any other put schedules one
``call_soon`` callback (at most one pending, however many puts a turn holds); the slice dispatches up to ``batch`` records and, if more are left, schedules
itself again so puts and pulls are not starved. Dispatch order is unchanged: one callback at
a time, in CommitLog order.

Not a ``StoreService``: that base runs a task woken through an ``asyncio.Event``, which would
cost, per put at one send in flight, a future (and a ``get_running_loop``, one ``getpid``
syscall), a task step and a coroutine frame; measured with py-spy on a broker at one send in
flight, that wake-up path was ~10% of the broker's busy samples. So this service has its own
small lifecycle (``start``, ``wakeup``, ``stop``: ``base.Service``) instead of overriding the
task's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from pocketmq.store.dispatch.dispatcher import Dispatcher

logger = logging.getLogger(__name__)

#: records per slice before yielding to the loop, so puts and pulls are not starved
BATCH = 2048
#: pause before dispatching again after an OSError
RETRY_S = 1.0


class ReadEnd(Protocol):
    """Where a server runs work at the end of the read that asked for it (the transport's
    ``hooks.ReadEnd``; the store does not import the transport): ``active`` while a read's
    requests are handled, ``pending`` run after its replies are written."""

    active: bool
    pending: Callable[[], None] | None


class ReputService:
    """Woken by every put (``wakeup``); no period: a 1 s retry is armed only after an error
    (e.g. ENOSPC creating a ConsumeQueue file)."""

    name = "reput"

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self._stopping = False
        self._failing = False
        self._retry: asyncio.TimerHandle | None = None
        #: called after each dispatch batch (the allocation service moves its prefault window)
        self.after_batch: Callable[[], None] | None = None
        #: records per slice (an HA store lowers it: a slice delays the replication on the loop)
        self.batch = BATCH
        self._loop: asyncio.AbstractEventLoop | None = None
        #: a slice is scheduled (``call_soon``) and has not run yet: a wake-up does nothing (the
        #: CommitLog's put tests it instead of calling ``wakeup`` per put: ``commitlog.WakeGate``)
        self.scheduled = False
        #: ``_slice`` bound once: ``self._slice`` in ``wakeup`` made a bound method per put
        self._slice_cb = self._slice
        #: the broker's servers' end of read (``MessageStore.read_end``): a put made while a read
        #: is handled has its slice run at that read's end, after its replies, instead of by
        #: ``call_soon`` (~1.6k instructions a read: the Handle, uvloop's idle callback with its
        #: GIL hand-off); None, or a put outside a read (timer, task, HA): ``call_soon``
        self.read_end: ReadEnd | None = None

    def start(self) -> None:
        """Take wake-ups from now on (call on the loop)."""
        self._loop = asyncio.get_running_loop()

    def wakeup(self) -> None:
        """Schedule a slice for the next loop turn, unless one is already pending (loop thread
        only; a no-op before ``start`` and after ``stop``)."""
        if not self.scheduled and self._loop is not None and not self._stopping:
            self.scheduled = True
            end = self.read_end
            if end is not None and end.active:
                end.pending = self._slice_cb
            else:
                self._loop.call_soon(self._slice_cb)

    def _slice(self) -> None:
        """One slice (``call_soon``, a send's at one in flight: one Python call, the dispatch
        inline); if it was full, the rest in a later turn."""
        self.scheduled = False
        if self._stopping:
            return
        dispatcher = self.dispatcher
        batch = self.batch
        try:
            try:
                n = dispatcher.do_reput(batch)
            except OSError as exc:
                if not self._failing:
                    logger.error("reput blocked at %d: %s (retrying)", dispatcher.reput_from_offset, exc)
                self._failing = True
                self._retry_later()
                return
            if self._failing:
                logger.info("reput resumed at %d", dispatcher.reput_from_offset)
                self._failing = False
            # (read into a local first: 3.11 does not specialize ``self.after_batch()``, an
            # instance attribute called as a method)
            after = self.after_batch
            if after is not None:
                after()
            if n >= batch:
                self.wakeup()  # the rest in a later turn (``read_end`` is not active here)
        except Exception:  # a bug, not an I/O error: log it and retry later rather than die
            logger.exception("store service %s failed; retrying", self.name)
            self._retry_later()

    def _retry_later(self) -> None:
        if self._retry is None and not self._stopping and self._loop is not None:
            self._retry = self._loop.call_later(RETRY_S, self._retry_now)

    def _retry_now(self) -> None:
        self._retry = None
        self.wakeup()

    async def stop(self) -> None:
        """No more slices; dispatch what is left now, in one go."""
        self._stopping = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        try:
            self.dispatcher.do_reput()
            self.dispatcher.write_index_backlog()
        except OSError as exc:
            logger.error("final reput failed at %d: %s", self.dispatcher.reput_from_offset, exc)
