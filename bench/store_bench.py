"""Store benchmark: prints one JSON object.

Measures, on a fresh store in a temp dir (or --dir):

* ``put``: single puts of 128 B / 1 KiB / 4 KiB bodies, ASYNC_FLUSH, services running; the clock
  stops when reput has dispatched everything to ConsumeQueue + index (so dispatch is included).
* ``batch``: the same with 32-message ``put_messages`` batches; ``batch32items_1024`` the same
  batches through ``put_batch`` (template + ``(flag, body, properties)`` items, the broker's
  SEND_BATCH_MESSAGE path: no ``MessageInner`` per message).
* ``sync_flush``: 1 KiB puts with SYNC_FLUSH and 128 concurrent waiters (group commit).
* ``get``: ``get_message`` of 32 messages per call over what was written.
* ``recovery``: abnormal recovery (abort file present, checkpoint lost, so every record is
  re-validated with CRC and re-dispatched idempotently) of a 1 GiB CommitLog.

Besides msgs/s, each write figure carries ``cpu_us`` (process CPU per message, flush and
allocation threads included) and ``loop_cpu_us`` (the event-loop thread alone, the bottleneck).
Messages are built before the timed section (as a broker would have decoded them already);
they carry TAGS, KEYS and a UNIQ_KEY like a Java producer's, so two index entries per message.
They are frozen out of the garbage collector (``gc.freeze``, as ``mqbroker`` freezes its
start-up objects) for the timed section: a broker's decoded messages die young, and 300k live
ones would make a full collection in the middle of a figure a cost of this harness (~0.25
µs/msg measured), not of the store.
``--quick`` uses smaller counts and a 128 MiB recovery. Numbers on a shared 2-core VM are noisy.

Each write figure runs twice on a fresh store, and the second run is the figure; the first
is reported as ``cold_msgs_per_s`` (``--cold``: one run only). On this VM, faulting in a
page-cache page from memory that has been free for more than a few seconds costs 2.9 µs per
4 KiB page, against 0.63 µs for memory freed just before (measured: write a new 400 MiB file
through a mapping, delete it, write another). A cold run's 370 MB of new CommitLog pages
thus cost ~0.7 µs/msg more kernel CPU (the prefault thread's page zeroing: 0.12 -> 0.87
µs/msg), and the index process's new files pay it too. A broker pays that while its page
cache grows into idle memory; once the page cache fills memory, it writes into reclaimed
pages at the warm cost, which is what the second run measures.

``--index-process`` runs the write figures with ``indexProcessEnable`` (the index built by a
second process; the clock still stops only once it has indexed everything) and adds
``child_cpu_us``, the index process's CPU per message. ``--only put_1024,batch32_1024`` runs
just the named figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pocketmq.remoting.protocol.message import UniqIdGenerator, properties_to_string
from pocketmq.store import MessageInner, MessageStore, MessageStoreConfig

HOST = (b"\x7f\x00\x00\x01", 10911)


def _messages(n: int, body_size: int, topic: str = "BenchTopic", queues: int = 8) -> list[MessageInner]:
    gen = UniqIdGenerator(ip=b"\x0a\x00\x00\x05")
    body = os.urandom(body_size)
    return [
        MessageInner(
            topic=topic,
            body=body,
            queue_id=i % queues,
            properties=properties_to_string(
                {"TAGS": "TagA", "KEYS": f"order-{i}", "UNIQ_KEY": gen.create(), "WAIT": "true"}
            ),
            born_timestamp=1,
            born_host=HOST,
            store_host=HOST,
        )
        for i in range(n)
    ]


#: extra MessageStoreConfig keys of the write figures (``--index-process``)
_WRITE_KW: dict[str, Any] = {}


def _freeze() -> None:
    """Move everything alive now (the prebuilt messages) out of the collector's generations."""
    gc.collect()
    gc.freeze()


def _config(root: str, **kw: Any) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=root, **kw)


def _child_cpu_s(store: MessageStore) -> float:
    """CPU seconds of the store's index process so far (0 without one)."""
    proc = getattr(store.dispatcher.index_child, "proc", None)
    if proc is None:
        return 0.0
    try:
        with open(f"/proc/{proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu(c0: float, l0: float, n: int, l1: float | None = None) -> dict[str, float]:
    """CPU µs per message: the whole process and the event-loop thread alone (until ``l1``, if
    given). On a shared box these are steadier than msgs/s; ``1e6 / loop_cpu_us`` is what the
    loop could sustain."""
    return {
        "cpu_us": round((time.process_time() - c0) / n * 1e6, 2),
        "loop_cpu_us": round(((time.thread_time() if l1 is None else l1) - l0) / n * 1e6, 2),
    }


async def _drain(store: MessageStore) -> float:
    """Yield to the reput task until it has dispatched everything (it has no "idle" event),
    then wait for the index process if there is one. Returns the loop thread's CPU time when
    reput was done (the index process's wait is not the loop's work)."""
    d = store.dispatcher
    while d.reput_from_offset < store.commitlog.max_offset:  # noqa: ASYNC110
        await asyncio.sleep(0)
    loop_cpu = time.thread_time()
    while store.dispatch_behind_bytes:  # noqa: ASYNC110
        # polling, not spinning: a spinning loop would take CPU from the index process's core
        await asyncio.sleep(0.0002 if d.index_child is not None else 0)
    return loop_cpu


#: the prebuilt inputs of the figure being measured, shared by its cold and warm runs (so that
#: nothing is allocated between them: the warm run gets the pages the cold one freed)
_INPUTS: dict[tuple[int, int, int, bool], tuple[list[MessageInner], list[list[MessageInner]], list[Any]]] = {}


def _inputs(
    n: int, body_size: int, batch: int, items: bool
) -> tuple[list[MessageInner], list[list[MessageInner]], list[Any]]:
    """Messages, their batches (one queue each) and the batches in the broker's item form."""
    key = (n, body_size, batch, items)
    got = _INPUTS.get(key)
    if got is not None:
        return got
    _INPUTS.clear()
    msgs = _messages(n, body_size)
    groups: list[list[MessageInner]] = []
    # group batches by queue, as a producer sends a batch to one queue
    if batch > 1:
        by_q: dict[int, list[MessageInner]] = {}
        for m in msgs:
            by_q.setdefault(m.queue_id, []).append(m)
        groups = [lst[i : i + batch] for lst in by_q.values() for i in range(0, len(lst), batch)]
    # the broker's form: shared fields once, one (flag, body view, properties) tuple each
    item_groups = [
        (g[0], [(m.flag, memoryview(m.body), m.properties_string()) for m in g]) for g in groups
    ] if items else []  # fmt: skip
    got = _INPUTS[key] = (msgs, groups, item_groups)
    return got


async def bench_put(root: str, n: int, body_size: int, batch: int, items: bool = False) -> dict[str, float]:
    store = MessageStore(_config(root, **_WRITE_KW))
    store.load()
    await store.start()
    msgs, groups, item_groups = _inputs(n, body_size, batch, items)
    _freeze()
    t0 = time.perf_counter()
    c0, l0 = time.process_time(), time.thread_time()
    k0 = _child_cpu_s(store)
    if items:
        put_batch = store.put_batch
        for k, (template, its) in enumerate(item_groups):
            put_batch(template, its)
            if k % 8 == 7:
                await asyncio.sleep(0)
    elif batch > 1:
        put_many = store.put_messages
        for k, g in enumerate(groups):
            put_many(g)
            if k % 8 == 7:
                await asyncio.sleep(0)  # let reput run, as between network reads
    else:
        put = store.put_message
        for k, m in enumerate(msgs):
            put(m)
            if k & 255 == 255:
                await asyncio.sleep(0)
    l1 = await _drain(store)
    dt = time.perf_counter() - t0
    cpu = _cpu(c0, l0, n, l1)
    if store.dispatcher.index_child is not None:
        cpu["child_cpu_us"] = round((_child_cpu_s(store) - k0) / n * 1e6, 2)
    gc.unfreeze()
    await store.shutdown()
    return {"msgs_per_s": round(n / dt), "mb_per_s": round(n * body_size / dt / 1e6, 1), **cpu}


async def bench_sync_flush(root: str, n: int, waiters: int) -> dict[str, float]:
    store = MessageStore(_config(root, flush_disk_type="SYNC_FLUSH", **_WRITE_KW))
    store.load()
    await store.start()
    msgs = _inputs(n, 1024, 1, False)[0]
    it = iter(msgs)
    _freeze()

    async def worker() -> None:
        for m in it:
            r = await store.put_message_async(m)
            if not r.is_ok:
                raise RuntimeError(r.status)

    t0 = time.perf_counter()
    c0, l0 = time.process_time(), time.thread_time()
    await asyncio.gather(*(worker() for _ in range(waiters)))
    await _drain(store)
    dt = time.perf_counter() - t0
    cpu = _cpu(c0, l0, n)
    gc.unfreeze()
    await store.shutdown()
    return {"msgs_per_s": round(n / dt), "waiters": waiters, **cpu}


def bench_get(root: str) -> dict[str, float]:
    store = MessageStore(_config(root))
    store.load()
    t0 = time.perf_counter()
    total = 0
    calls = 0
    for q in range(8):
        offset = store.get_min_offset_in_queue("BenchTopic", q)
        while True:
            g = store.get_message("g", "BenchTopic", q, offset, 32)
            calls += 1
            if not g.message_count:
                break
            total += g.message_count
            offset = g.next_begin_offset
    dt = time.perf_counter() - t0
    store.close()
    return {"msgs_per_s": round(total / dt), "messages": total, "calls": calls}


def _simulate_crash(root: str) -> None:
    with open(os.path.join(root, "abort"), "w"):
        pass
    os.unlink(os.path.join(root, "checkpoint"))


async def bench_recovery(root: str, size: int) -> dict[str, float]:
    store = MessageStore(_config(root))
    store.load()
    await store.start()
    per = 4096
    written = 0
    while written < size:
        msgs = _messages(per, 1024)
        for k, m in enumerate(msgs):
            store.put_message(m)
            if k & 255 == 255:
                await asyncio.sleep(0)
        written = store.get_max_phy_offset()
    await _drain(store)
    await store.shutdown()
    # a crash with a lost checkpoint: every record is re-checked (CRC) and re-dispatched
    _simulate_crash(root)
    t0 = time.perf_counter()
    again = MessageStore(_config(root))
    again.load()
    dt = time.perf_counter() - t0
    assert not again.last_shutdown_clean
    again.close()
    return {"commitlog_bytes": written, "seconds": round(dt, 2), "mb_per_s": round(written / dt / 1e6)}


async def _twice(
    args: argparse.Namespace, root: str, figure: Callable[[str], Awaitable[dict[str, float]]]
) -> dict[str, float]:
    """``figure`` on a fresh store under ``root``, after a first (cold) run unless ``--cold``."""
    if args.cold:
        out = await figure(root)
    else:
        cold = await figure(root)
        shutil.rmtree(root)
        out = await figure(root)
        out["cold_msgs_per_s"] = cold["msgs_per_s"]
    _INPUTS.clear()
    return out


async def main(args: argparse.Namespace) -> dict[str, Any]:
    base = args.dir or tempfile.mkdtemp(prefix="pocketmq-bench-")
    n = 50_000 if args.quick else 300_000
    out: dict[str, Any] = {"python": sys.version.split()[0], "quick": args.quick, "n": n}
    if args.index_process:
        _WRITE_KW["index_process_enable"] = True
        out["index_process"] = True
    only = set(args.only.split(",")) if args.only else None

    def wanted(name: str) -> bool:
        return only is None or name in only

    try:
        for body in (128, 1024, 4096):
            root = os.path.join(base, f"put{body}")
            if wanted(f"put_{body}") or (body == 1024 and wanted("get_1024")):
                out[f"put_{body}"] = await _twice(args, root, lambda r, b=body: bench_put(r, n, b, 1))
                if body == 1024 and wanted("get_1024"):
                    out["get_1024"] = bench_get(root)
                shutil.rmtree(root)
            root = os.path.join(base, f"batch{body}")
            if wanted(f"batch32_{body}"):
                out[f"batch32_{body}"] = await _twice(args, root, lambda r, b=body: bench_put(r, n, b, 32))
                shutil.rmtree(root)
            if body == 1024 and wanted("batch32items_1024"):
                root = os.path.join(base, "batchitems")
                out["batch32items_1024"] = await _twice(
                    args, root, lambda r: bench_put(r, n, 1024, 32, items=True)
                )
                shutil.rmtree(root)
        if wanted("sync_flush_1024"):
            root = os.path.join(base, "sync")
            out["sync_flush_1024"] = await _twice(args, root, lambda r: bench_sync_flush(r, n // 2, 128))
            shutil.rmtree(root)
        if wanted("recovery"):
            root = os.path.join(base, "recovery")
            out["recovery"] = await bench_recovery(root, (128 << 20) if args.quick else (1 << 30))
            shutil.rmtree(root)
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    return out


def run() -> None:
    import json

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller counts, 128 MiB recovery")
    p.add_argument("--dir", help="work directory (default: a temp dir, removed afterwards)")
    p.add_argument("--index-process", action="store_true", help="write figures with indexProcessEnable")
    p.add_argument("--cold", action="store_true", help="no warm-up run before each write figure")
    p.add_argument("--only", help="comma-separated figure names (put_1024, batch32_1024, recovery, ...)")
    args = p.parse_args()
    try:
        import uvloop

        result = uvloop.run(main(args))
    except ImportError:  # pragma: no cover
        result = asyncio.run(main(args))
    result["loop"] = "uvloop" if "uvloop" in sys.modules else "asyncio"
    print(json.dumps(result))


if __name__ == "__main__":
    run()
