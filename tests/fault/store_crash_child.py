"""Child process for test_store_crash.py: puts messages and reports every acknowledged one.

Usage: store_crash_child.py ROOT FLUSH_DISK_TYPE FIRST_INDEX COUNT CONCURRENCY

Prints ``READY`` once the store is open, then ``A <index> <phy offset> <queue offset> <size>`` for
each put whose flush policy completed (PUT_OK), and ``DONE`` at the end. The parent kills it with
SIGKILL at random moments; a line that reached the pipe is an acknowledgement.
"""

from __future__ import annotations

import asyncio
import sys

from pocketmq.store import MessageInner, MessageStore, MessageStoreConfig, PutMessageStatus

TOPIC = "CrashTopic"
QUEUES = 4


def message(i: int) -> MessageInner:
    return MessageInner(
        topic=TOPIC,
        body=(b"body-%d-" % i) * (1 + i % 20),
        queue_id=i % QUEUES,
        properties={"KEYS": f"k{i}", "UNIQ_KEY": f"U{i:031d}", "TAGS": "T"},
        born_host=(b"\x7f\x00\x00\x01", 1),
        store_host=(b"\x7f\x00\x00\x01", 10911),
    )


def config(root: str, flush: str) -> MessageStoreConfig:
    return MessageStoreConfig(
        store_path_root_dir=root,
        flush_disk_type=flush,  # type: ignore[arg-type]
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=1000 * 20,
        max_hash_slot_num=1024,
        max_index_num=16384,
        flush_interval_consume_queue=50,
        flush_interval_commit_log=50,
    )


async def main() -> None:
    root, flush, first, count, conc = (
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]),
        int(sys.argv[4]),
        int(sys.argv[5]),
    )
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
                # one write per ack: what reached the pipe before SIGKILL is an acknowledgement
                a = r.append
                out.write(f"A {i} {a.wrote_offset} {a.logics_offset} {a.wrote_bytes}\n")
                out.flush()
            if i % 16 == 0:
                await asyncio.sleep(0)  # an ASYNC_FLUSH put never suspends: let the services run

    await asyncio.gather(*(worker() for _ in range(conc)))
    await store.shutdown()
    out.write("DONE\n")
    out.flush()


if __name__ == "__main__":
    asyncio.run(main())
