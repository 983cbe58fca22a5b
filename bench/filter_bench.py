"""SQL92 filter benchmark: prints one JSON object.

1. ``evaluator``: the compiled expression alone, CPU µs per evaluation on one message's property
   dict (best of N runs), for a one-, two- and three-clause expression; ``broker_per_record``
   is the broker filter's whole per-record work (``SqlMessageFilter.is_matched_by_commit_log`` on
   a stored record: pick the properties the expression reads, evaluate).
2. ``pull``: a fresh store in a temp dir (or ``--dir``) gets ``--messages`` 1 KiB messages (default
   1M) over 4 queues, each with TAGS ``Tag<i%10>`` and user properties ``a`` (``i % 100``),
   ``region`` (eu/us/ap/none) and ``b`` (``i % 7``); then every queue is read from its first
   offset to its end with ``MessageStore.get_message`` (32 per call, the pull processor's store
   read) through the broker's own filter objects, once per filter, in the same run:

   * ``tag_10pct``: TAG ``Tag3`` (the ConsumeQueue tag hash; non-matching units never touch the
     CommitLog);
   * ``sql_10pct``: ``a BETWEEN 30 AND 39``;
   * ``sql3_10pct``: ``a BETWEEN 30 AND 39 AND region IS NOT NULL AND b >= 0`` (three clauses,
     7 % match: region is absent for 3 of each 10);
   * ``all``: no filter, for scale.

   Each gives ``matched_per_s`` (messages returned), ``scanned_per_s`` (queue offsets passed) and
   ``cpu_us_per_scanned`` (process CPU per offset passed, steadier than rates on a shared box).

Run: ``.venv/bin/python bench/filter_bench.py`` (``--messages 200000`` for a shorter run;
``--only evaluator`` for the microbenchmark alone). Figures on a shared 2-core VM are noisy:
note ``uptime`` with them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from pocketmq.broker.filter import SqlMessageFilter, TagMessageFilter
from pocketmq.remoting.protocol.bodies import SubscriptionData
from pocketmq.remoting.protocol.filter import compile_sql
from pocketmq.remoting.protocol.message import UniqIdGenerator, encode_message, properties_to_string
from pocketmq.store import MessageInner, MessageStore, MessageStoreConfig

HOST = (b"\x7f\x00\x00\x01", 10911)
TOPIC = "FilterBench"
QUEUES = 4
REGIONS = ("eu", "us", "ap", None)
EXPRESSIONS = {
    "one_clause": "a BETWEEN 30 AND 39",
    "two_clauses": "region IN ('eu', 'us') AND a > 50",
    "three_clauses": "region IN ('eu', 'us') AND a > 50 AND b = '3'",
}


def props_of(i: int, uniq: str) -> dict[str, str]:
    p = {"TAGS": f"Tag{i % 10}", "KEYS": f"order-{i}", "UNIQ_KEY": uniq, "WAIT": "true"}
    p["a"] = str(i % 100)
    p["b"] = str(i % 7)
    region = REGIONS[i % 4]
    if region is not None:
        p["region"] = region
    return p


def best_cpu_us(fn: Callable[[], Any], n: int, runs: int = 5) -> float:
    """Best of ``runs``: process CPU µs per call of ``fn`` over ``n`` calls."""
    best = float("inf")
    for _ in range(runs):
        t = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - t) / n * 1e6)
    return round(best, 3)


def bench_evaluator(n: int) -> dict[str, Any]:
    props = props_of(57, "AC110005000000000000000000000001")
    record = encode_message(
        topic=TOPIC, body=b"x" * 1024, properties=props, queue_id=0, queue_offset=0,
        commit_log_offset=0, born_timestamp=1, store_timestamp=2, born_host=HOST, store_host=HOST,
    )  # fmt: skip
    out: dict[str, Any] = {"properties": len(props)}
    for name, text in EXPRESSIONS.items():
        expr = compile_sql(text)
        evaluate = expr.evaluate
        broker_filter = SqlMessageFilter(expr)
        out[name] = {
            "expression": text,
            "result": evaluate(props),
            "cpu_us": best_cpu_us(lambda e=evaluate: e(props), n),
            "broker_per_record_cpu_us": best_cpu_us(
                lambda f=broker_filter: f.is_matched_by_commit_log(record), n
            ),
        }
    return out


async def fill(root: str, n: int) -> None:
    store = MessageStore(MessageStoreConfig(store_path_root_dir=root))
    store.load()
    await store.start()
    gen = UniqIdGenerator(ip=b"\x0a\x00\x00\x05")
    body = os.urandom(1024)
    batch: dict[int, list[MessageInner]] = {}
    for i in range(n):
        q = i % QUEUES
        m = MessageInner(
            topic=TOPIC, body=body, queue_id=q, properties=properties_to_string(props_of(i, gen.create())),
            born_timestamp=1, born_host=HOST, store_host=HOST,
        )  # fmt: skip
        lst = batch.setdefault(q, [])
        lst.append(m)
        if len(lst) == 32:
            store.put_messages(lst)
            batch[q] = []
            await asyncio.sleep(0)  # let reput run
    for lst in batch.values():
        if lst:
            store.put_messages(lst)
    d = store.dispatcher
    while d.reput_from_offset < store.commitlog.max_offset:  # noqa: ASYNC110
        await asyncio.sleep(0.001)
    await store.shutdown()


def read_all(store: MessageStore, message_filter: Any) -> dict[str, Any]:
    gc.collect()
    matched = scanned = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for q in range(QUEUES):
        offset = store.get_min_offset_in_queue(TOPIC, q)
        end = store.get_max_offset_in_queue(TOPIC, q)
        while offset < end:
            g = store.get_message("bench", TOPIC, q, offset, 32, message_filter=message_filter)
            matched += g.message_count
            scanned += g.next_begin_offset - offset
            if g.next_begin_offset <= offset:
                raise RuntimeError(f"no progress at {q}:{offset} ({g.status})")
            offset = g.next_begin_offset
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "matched": matched,
        "scanned": scanned,
        "matched_per_s": round(matched / dt),
        "scanned_per_s": round(scanned / dt),
        "cpu_us_per_scanned": round(cpu / scanned * 1e6, 3),
        "seconds": round(dt, 2),
    }


def bench_pull(root: str, n: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    asyncio.run(fill(root, n))
    fill_s = time.perf_counter() - t0
    store = MessageStore(MessageStoreConfig(store_path_root_dir=root))
    store.load()
    try:
        filters: dict[str, Any] = {
            "all": None,
            "tag_10pct": TagMessageFilter(SubscriptionData.build(TOPIC, "Tag3")),
            "sql_10pct": SqlMessageFilter(compile_sql("a BETWEEN 30 AND 39")),
            "sql3_10pct": SqlMessageFilter(
                compile_sql("a BETWEEN 30 AND 39 AND region IS NOT NULL AND b >= 0")
            ),
        }
        read_all(store, None)  # warm the page cache once: every figure reads it warm
        out: dict[str, Any] = {"messages": n, "body_bytes": 1024, "fill_seconds": round(fill_s, 1)}
        for name, f in filters.items():
            out[name] = read_all(store, f)
        return out
    finally:
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--dir", help="store directory (default: a temp dir, deleted afterwards)")
    ap.add_argument("--only", choices=("evaluator", "pull"))
    ap.add_argument("--evaluations", type=int, default=200_000)
    args = ap.parse_args()
    result: dict[str, Any] = {"loadavg": os.getloadavg()}
    if args.only in (None, "evaluator"):
        result["evaluator"] = bench_evaluator(args.evaluations)
    if args.only in (None, "pull"):
        root = args.dir or tempfile.mkdtemp(prefix="pocketmq-filter-bench-")
        try:
            result["pull"] = bench_pull(root, args.messages)
        finally:
            if args.dir is None:
                shutil.rmtree(root, ignore_errors=True)
    result["loadavg_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
