"""T9/T10 and T11 (``tests/fault/chaos.py``): push and orderly consumer processes killed and
replaced, the broker killed mid-stream; delivery, order per key and queue ownership checked."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from pocketmq.client import Message, Producer, SendStatus
from pocketmq.testing.procs import servers
from tests.fault.chaos_common import (
    Row,
    broker_log_clean,
)

# ------------------------------------------------------------------------------- T9/T10, T11

CONSUMER_CHILD = os.path.join(os.path.dirname(__file__), "consumer_child.py")


class ConsumerProcess:
    """One ``consumer_child.py``; ``lines`` collects the bodies it received, in order."""

    def __init__(self, namesrv: str, group: str, topic: str, orderly: bool) -> None:
        import threading

        self.lines: list[str] = []
        #: the last ``Q`` line: (CLOCK_MONOTONIC ns, queue ids owned)
        self.owned: tuple[int, frozenset[int]] = (0, frozenset())
        self.ready = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, CONSUMER_CHILD, namesrv, group, topic, "1" if orderly else "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("M "):
                self.lines.append(line[2:].rstrip("\n"))
            elif line.startswith("Q "):
                stamp, _, ids = line[2:].rstrip("\n").partition(" ")
                self.owned = (int(stamp), frozenset(int(q) for q in ids.split(",") if q))
            elif line.startswith("READY"):
                self.ready.set()

    def kill9(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self.reader.join(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.reader.join(10)


def ownership_problem(owned: list[frozenset[int]], queues: int) -> str | None:
    """None when every queue is owned by exactly one of the live consumers and the shares are
    even (the averaging strategy: a new consumer has its share, so the rebalance happened)."""
    counts = {q: sum(q in o for o in owned) for q in range(queues)}
    twice = sorted(q for q, n in counts.items() if n > 1)
    orphan = sorted(q for q, n in counts.items() if n == 0)
    sizes = [len(o) for o in owned]
    if twice or orphan or max(sizes) - min(sizes) > 1:
        return f"queues owned twice {twice}, by nobody {orphan}: {[sorted(o) for o in owned]}"
    return None


async def settled_ownership(live: list[ConsumerProcess], queues: int, since_ns: int, bound_s: float) -> float:
    """Seconds after ``since_ns`` (the last fault) when the live consumers' reports first showed
    each queue owned by exactly one of them; raises AssertionError past ``bound_s``."""
    problem = "no report yet"
    while time.monotonic_ns() - since_ns < bound_s * 1e9:
        reports = [c.owned for c in live]
        if all(stamp > since_ns for stamp, _ in reports):
            problem = ownership_problem([o for _, o in reports], queues) or ""
            if not problem:
                return (max(stamp for stamp, _ in reports) - since_ns) / 1e9
        await asyncio.sleep(0.1)
    raise AssertionError(f"queue ownership not settled {bound_s:.0f} s after the last fault: {problem}")


def _order_gaps(streams: list[list[str]]) -> list[str]:
    """Every delivery of every consumer process, merged in time order per key: a key's sequence
    number may repeat or restart lower (a replay after a rebalance) but never skip ahead of the
    highest delivered so far + 1 (a gap or an inversion)."""
    events: list[tuple[int, str, int]] = []
    for stream in streams:
        for line in stream:
            stamp, _, body = line.partition(" ")
            key, _, seq = body.rpartition("-")
            events.append((int(stamp), key, int(seq)))
    events.sort()
    high: dict[str, int] = {}
    problems = []
    for _stamp, key, seq in events:
        top = high.get(key, -1)
        if seq > top + 1:
            problems.append(f"key {key}: {seq} delivered when the highest so far was {top}")
        high[key] = max(top, seq)
    return problems


def run_consumer_faults(
    root: Path,
    *,
    orderly: bool,
    consumer_kills: int,
    broker_kills: int,
    keys: int = 16,
    rate: float = 100,
    settle_bound: float = 20.0,
) -> Row:
    """``settle_bound``: seconds after a consumer is replaced (and after the last fault) within
    which every queue must be owned by exactly one live consumer (RocketMQ's promise is two rebalance periods, 2 s here; the bound
    keeps headroom for a loaded machine and the note reports the time measured)."""
    kind = "T11 orderly consumers" if orderly else "T9/T10 push consumers"
    row = Row(
        f"{kind} under kill -9",
        f"3 push consumers{' (orderly)' if orderly else ''}, 1 SDK producer {rate:.0f} msg/s"
        + (f", {keys} sharding keys" if orderly else ""),
        # T11 counts rebalances: an orderly consumer killed -9 keeps its queue locks on the broker
        # for their 60 s lease (RocketMQ's), so its consumers are stopped and started instead
        f"{consumer_kills} x {'stop' if orderly else 'kill -9'} of a consumer (restarted: a rebalance each), "
        f"{broker_kills} x kill -9 of the broker",
    )
    rng = random.Random()
    topic = "ChaosOrder" if orderly else "ChaosSub"
    with servers(root, topics={topic: 8}) as s:
        ns = s.namesrv.addr
        runs: list[ConsumerProcess] = []

        def start_consumer() -> ConsumerProcess:
            c = ConsumerProcess(ns, "chaos-cg", topic, orderly)
            runs.append(c)
            return c

        live = [start_consumer() for _ in range(3)]
        try:
            for c in live:
                assert c.ready.wait(60), "consumer did not start"

            async def main() -> None:
                stop = asyncio.Event()
                acked: set[str] = set()

                async def produce() -> None:
                    async with Producer("chaos-pg", namesrv=ns) as producer:
                        seq = dict.fromkeys(range(keys), 0)
                        i = 0
                        while not stop.is_set():
                            key = i % keys
                            i += 1
                            body = f"k{key}-{seq[key]}"
                            try:
                                msg = Message(topic, body.encode())
                                if orderly:
                                    r = await producer.send(msg, sharding_key=f"k{key}")
                                else:
                                    r = await producer.send(msg)
                            except Exception:
                                await asyncio.sleep(0.1)
                                i -= 1  # the same key again: its sequence must stay gapless
                                continue
                            if r.send_status is SendStatus.SEND_OK:
                                acked.add(body)
                                seq[key] += 1
                            else:
                                i -= 1
                            await asyncio.sleep(1 / rate)

                producer = asyncio.create_task(produce())
                settles: list[float] = []
                faults = ["consumer"] * consumer_kills + ["broker"] * broker_kills
                rng.shuffle(faults)
                for fault in faults:
                    await asyncio.sleep(rng.uniform(0.3, 1.5))
                    if fault == "broker":
                        s.broker.kill9()
                        await asyncio.to_thread(s.restart_broker)
                    else:
                        victim = live.pop(rng.randrange(len(live)))
                        await asyncio.to_thread(victim.stop if orderly else victim.kill9)
                        fresh = start_consumer()
                        await asyncio.to_thread(fresh.ready.wait, 60)
                        live.append(fresh)
                        # every rebalance settles: each queue owned by exactly one live consumer
                        try:
                            settles.append(
                                await settled_ownership(live, 8, time.monotonic_ns(), settle_bound)
                            )
                        except AssertionError as exc:
                            row.fail(str(exc))
                try:
                    settles.append(await settled_ownership(live, 8, time.monotonic_ns(), settle_bound))
                except AssertionError as exc:
                    row.fail(str(exc))
                row.notes.append(
                    f"queue ownership settled after each of {len(settles)} checks (a consumer replaced, and "
                    f"the end): at most {max(settles, default=0):.1f} s after the new consumer started"
                )
                await asyncio.sleep(1)
                stop.set()
                await producer
                deadline = time.monotonic() + 90
                seen: set[str] = set()
                while time.monotonic() < deadline:
                    seen = {line.partition(" ")[2] for c in runs for line in c.lines}
                    if acked <= seen:
                        break
                    await asyncio.sleep(0.5)
                delivered = [line.partition(" ")[2] for c in runs for line in c.lines]
                row.acknowledged = len(acked)
                row.lost = len(acked - seen)
                row.duplicated = len(delivered) - len(set(delivered))
                if row.lost:
                    row.fail(
                        f"{row.lost} acknowledged messages never consumed, e.g. {sorted(acked - seen)[:3]}"
                    )
                if orderly:
                    gaps = _order_gaps([c.lines for c in runs])
                    if gaps:
                        row.fail(f"{len(gaps)} order violations, e.g. {gaps[:3]}")
                row.notes.append(f"{len(runs)} consumer processes in all; {row.duplicated} redeliveries")

            asyncio.run(main())
        finally:
            for c in runs:
                c.stop()
        broker_log_clean(row, s)
    return row
