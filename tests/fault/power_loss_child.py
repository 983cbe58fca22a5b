"""Child process for test_power_loss.py: puts messages, reporting acknowledgements and fsyncs.

Usage: power_loss_child.py ROOT FLUSH_DISK_TYPE FIRST_INDEX COUNT CONCURRENCY

``store_crash_child.py``'s ``main``, plus ``F <offset>`` each time the CommitLog's flushed offset
advances (printed after the fsync returned, so a reported offset is durable). The parent SIGKILLs it and then drops every
CommitLog byte after the last reported fsync (but for a random part of the tail, as page
writeback would have saved), simulating a power loss.
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from store_crash_child import main  # noqa: E402

from pocketmq.store.log.mapped_file_queue import MappedFileQueue  # noqa: E402

_real_commit_flush = MappedFileQueue.commit_flush


def _reporting_commit_flush(self: MappedFileQueue, plan: list) -> None:  # type: ignore[type-arg]
    before = self.flushed_where
    _real_commit_flush(self, plan)
    if self.dir.endswith("commitlog") and self.flushed_where != before:
        sys.stdout.write(f"F {self.flushed_where}\n")
        sys.stdout.flush()


MappedFileQueue.commit_flush = _reporting_commit_flush  # type: ignore[method-assign]


if __name__ == "__main__":
    asyncio.run(main())
