"""Soak (issue 23, T19): a real name server + broker under mixed traffic for a long time.

One SDK producer sends at ``--rate`` msg/s (meant to be half the machine's maximum): 70 % single
sends, 20 % batches of 8, 10 % delayed (level 1); one push consumer consumes everything. Every
``--window`` seconds the broker's RSS (anonymous: the touched pages of the mapped store files are
page cache and grow with what is written) and open file descriptors (``/proc``) and the send p99 of
that window are sampled. At the end it prints one JSON object with the samples and the checks:

* RSS drift: last window against the first after warm-up, < 10 %;
* no fd growth: last window's fd count <= the first's + 16, store files apart (``fd_kinds``: one
  descriptor per mapped store file, bounded by retention; every other kind must stay flat);
* p99 stable: every window's p99 within 20 % of the median window's (reported; a shared machine
  is noisy, so this one is a figure to read with ``loadavg``);
* errors: send failures other than the SDK's retries, consumed count short of what was sent.

Usage: ``python bench/soak.py [--minutes 30] [--rate 500]`` (``make soak``). Exit code 1 when a
check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pocketmq.client import CONSUME_SUCCESS, ConsumeFromWhere, Message, Producer, PushConsumer
from pocketmq.testing.procs import servers


def _proc(pid: int) -> tuple[float, int]:
    rss = 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):  # the broker's own memory, not the mapped store's pages
                rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def fd_kinds(pid: int, store: str) -> dict[str, int]:
    """The process's descriptors by kind: socket, pipe, anon (epoll, eventfd), store (a file
    under ``store``: one per mapped CommitLog/ConsumeQueue/index file, as RocketMQ keeps a
    FileChannel per MappedFile, bounded by retention), and every other path by name."""
    kinds: dict[str, int] = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue  # closed meanwhile
        if target.startswith(store):
            kind = "store"
        elif ":" in target and not target.startswith("/"):
            kind = target.split(":")[0]
        else:
            kind = target
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def _p99(xs: list[float]) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0


async def soak(
    ns: str, pid: int, seconds: float, rate: float, window: float, store: str
) -> dict[str, object]:
    sent: set[bytes] = set()
    got: set[bytes] = set()
    errors: list[str] = []

    async def listener(msgs: list, ctx: object) -> object:  # type: ignore[type-arg]
        got.update(m.body for m in msgs)
        return CONSUME_SUCCESS

    consumer = PushConsumer(
        "soak-cg",
        namesrv=ns,
        listener=listener,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe("Soak", "*")
    samples: list[dict[str, Any]] = []
    async with Producer("soak-pg", namesrv=ns) as producer, consumer:
        start = time.monotonic()
        next_window = start + window
        lat: list[float] = []
        i = 0
        while time.monotonic() - start < seconds:
            t0 = time.perf_counter()
            kind = i % 10
            try:
                if kind < 7:
                    body = f"s{i}".encode()
                    await producer.send(Message("Soak", body))
                    sent.add(body)
                elif kind < 9:
                    bodies = [f"b{i}-{k}".encode() for k in range(8)]
                    await producer.send_batch([Message("Soak", b) for b in bodies])
                    sent.update(bodies)
                else:
                    body = f"d{i}".encode()
                    await producer.send(Message("Soak", body, delay_level=1))
                    sent.add(body)
            except Exception as exc:  # after the SDK's own retries
                errors.append(f"{type(exc).__name__}: {exc}")
            i += 1
            dt = time.perf_counter() - t0
            lat.append(dt)
            await asyncio.sleep(max(0.0, 1 / rate - dt))
            if time.monotonic() >= next_window:
                rss, fds = _proc(pid)
                samples.append({"t": round(time.monotonic() - start), "rss_mib": rss, "fds": fds,
                                "fd_kinds": fd_kinds(pid, store),
                                "p99_ms": _p99(lat) * 1000, "loadavg": os.getloadavg()[0]})  # fmt: skip
                lat = []
                next_window += window
        deadline = time.monotonic() + 60
        while len(got & sent) < len(sent) and time.monotonic() < deadline:  # noqa: ASYNC110 - polling a count
            await asyncio.sleep(0.5)
    warm = samples[1:] or samples
    p99s = [s["p99_ms"] for s in warm]
    median = statistics.median(p99s) if p99s else 0.0
    checks = {
        "rss_drift_pct": round(100 * (warm[-1]["rss_mib"] - warm[0]["rss_mib"]) / warm[0]["rss_mib"], 1)
        if warm
        else 0.0,
        # store files grow with what is written until retention deletes them (one descriptor per
        # mapped file, as RocketMQ's MappedFile keeps its FileChannel): counted apart
        "fd_growth": _growth(warm, exclude="store"),
        "store_fd_growth": _growth(warm, only="store"),
        "p99_worst_vs_median": round(max(p99s) / median, 2) if median else 0.0,
        "sent": len(sent),
        "consumed": len(got & sent),
        "errors": len(errors),
    }
    ok = (
        checks["rss_drift_pct"] < 10  # type: ignore[operator]
        and checks["fd_growth"] <= 16  # type: ignore[operator]
        and checks["consumed"] == checks["sent"]
        and not errors
    )
    return {"bench": "soak", "ok": ok, "checks": checks, "samples": samples, "first_errors": errors[:5]}


def _growth(samples: list[dict[str, object]], *, exclude: str = "", only: str = "") -> int:
    if not samples:
        return 0

    def count(sample: dict[str, object]) -> int:
        kinds: dict[str, int] = sample["fd_kinds"]  # type: ignore[assignment]
        return sum(n for k, n in kinds.items() if (k == only if only else k != exclude))

    return count(samples[-1]) - count(samples[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=500.0, help="msg/s (about half the maximum)")
    parser.add_argument("--window", type=float, default=60.0, help="sampling window, s")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pmq-soak-"))
    with servers(root, topics={"Soak": 4}) as s:
        assert s.broker.proc is not None
        window = min(args.window, max(5.0, args.minutes * 60 / 6))
        store = str(root)
        result = asyncio.run(
            soak(s.namesrv.addr, s.broker.proc.pid, args.minutes * 60, args.rate, window, store)
        )
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
