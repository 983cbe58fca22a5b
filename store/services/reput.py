"""``ReputService``: dispatches appended records as soon as a put wakes it (no polling)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pocketmq.store.dispatch.dispatcher import Dispatcher
from pocketmq.store.services.base import StoreService

logger = logging.getLogger(__name__)

#: records per slice before yielding to the loop, so puts and pulls are not starved
BATCH = 2048
#: pause before dispatching again after an OSError
RETRY_S = 1.0


class ReputService(StoreService):
    name = "reput"

    def __init__(self, dispatcher: Dispatcher, executor: ThreadPoolExecutor) -> None:
        # no period: puts wake it; a 1 s retry is armed only after an error (e.g. ENOSPC
        # creating a ConsumeQueue file)
        super().__init__(None, executor)
        self.dispatcher = dispatcher
        self._failing = False
        self._retry: asyncio.TimerHandle | None = None
        #: called after each dispatch batch (the allocation service moves its prefault window)
        self.after_batch: Callable[[], None] | None = None
        #: records per slice (an HA store lowers it: a slice delays the replication on the loop)
        self.batch = BATCH

    async def run_once(self) -> None:
        dispatcher = self.dispatcher
        batch = self.batch
        while True:
            try:
                n = dispatcher.do_reput(batch)
            except OSError as exc:
                if not self._failing:
                    logger.error("reput blocked at %d: %s (retrying)", dispatcher.reput_from_offset, exc)
                self._failing = True
                if self._retry is None and not self._stopping:
                    self._retry = asyncio.get_running_loop().call_later(RETRY_S, self._retry_now)
                return
            if self._failing:
                logger.info("reput resumed at %d", dispatcher.reput_from_offset)
                self._failing = False
            if self.after_batch is not None:
                self.after_batch()
            if n < batch:
                return
            await asyncio.sleep(0)

    def _retry_now(self) -> None:
        self._retry = None
        self.wakeup()

    async def on_stop(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        try:
            self.dispatcher.do_reput()
        except OSError as exc:
            logger.error("final reput failed at %d: %s", self.dispatcher.reput_from_offset, exc)
