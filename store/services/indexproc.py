"""``IndexProcService``: the index process's watchdog (restarts a child that died)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pocketmq.store.index.process.control import IndexProcess
from pocketmq.store.services.base import StoreService

#: how often the child's liveness is checked (a ``waitpid``), seconds
CHECK_INTERVAL_S = 0.2


class IndexProcService(StoreService):
    name = "index-process"

    def __init__(self, proc: IndexProcess, executor: ThreadPoolExecutor) -> None:
        super().__init__(CHECK_INTERVAL_S, executor)
        self.proc = proc

    async def run_once(self) -> None:
        self.proc.check()
