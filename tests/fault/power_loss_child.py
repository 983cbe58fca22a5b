"""Child process for test_power_loss.py: puts messages, reporting acknowledgements and fsyncs.

Usage: power_loss_child.py ROOT FLUSH_DISK_TYPE FIRST_INDEX COUNT CONCURRENCY

As ``store_crash_child.py``, plus ``F <offset>`` each time the CommitLog's flushed offset
advances (printed after the fsync returned, so a reported offset is durable). Acks are
``A <index> <phy offset> <queue offset> <size>``. The parent SIGKILLs it and then drops every
CommitLog byte after the last reported fsync (but for a random part of the tail, as page
writeback would have saved), simulating a power loss.
"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from store_crash_child import config, message  # noqa: E402

from pocketmq.store import MessageStore, PutMessageStatus  # noqa: E402
from pocketmq.store.log.mapped_file_queue import MappedFileQueue  # noqa: E402

_real_commit_flush = MappedFileQueue.commit_flush


def _reporting_commit_flush(self: MappedFileQueue, plan: list) -> None:  # type: ignore[type-arg]
    before = self.flushed_where
    _real_commit_flush(self, plan)
    if self.dir.endswith("commitlog") and self.flushed_where != before:
        sys.stdout.write(f"F {self.flushed_where}\n")
        sys.stdout.flush()


MappedFileQueue.commit_flush = _reporting_commit_flush  # type: ignore[method-assign]


async def main() -> None:
    root, flush = sys.argv[1], sys.argv[2]
    first, count, conc = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    store = MessageStore(config(root, flush))
    store.load()
    await store.start()
    out = sys.stdout
    out.write("READY\n")
    out.flush()
    next_i = first
    end = first + count

    async def worker() -> None:
        nonlocal next_i
        while next_i < end:
            i = next_i
            next_i += 1
            r = await store.put_message_async(message(i))
            if r.status is PutMessageStatus.PUT_OK and r.append is not None:
                a = r.append
                out.write(f"A {i} {a.wrote_offset} {a.logics_offset} {a.wrote_bytes}\n")
                out.flush()
            if i % 16 == 0:
                await asyncio.sleep(0)  # an ASYNC_FLUSH put never suspends: let the flusher run

    await asyncio.gather(*(worker() for _ in range(conc)))
    await store.shutdown()
    out.write("DONE\n")
    out.flush()


if __name__ == "__main__":
    asyncio.run(main())
