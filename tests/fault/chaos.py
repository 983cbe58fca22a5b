"""The fault scenarios of issue 23, run against real ``mqnamesrv``/``mqbroker`` processes over loopback.

Each ``run_*`` function runs one scenario at a given size and returns a :class:`Row`: scenario,
load, faults injected, acknowledged, lost, duplicated, verdict (and notes: measured figures).
``tests/fault/test_chaos.py`` runs the short forms (part of ``make test``); ``make chaos``
(``python -m tests.fault.chaos``) runs the long forms, bounded in time, and prints one table.

* T1/T2 ``run_kill9_producers``: SDK producers on a pre-created and an auto-created topic,
  the broker ``kill -9``ed at random moments and restarted on its store; every SEND_OK message
  must be consumed (pulled through the broker) after the last restart.
* T3 ``run_t3`` (``test_power_loss.py``): power loss simulated at the store level, 20 rounds.
* T9/T10 and T11 ``run_consumer_faults``: three push consumer processes (orderly for T11, with
  16 sharding keys), consumers ``kill -9``ed and restarted (a rebalance each) and the broker
  ``kill -9``ed mid-stream: every acknowledged message is consumed, redeliveries are counted, and
  for T11 no consumer sees a key's sequence skip ahead (a gap or an inversion; replays allowed).
  After each consumer replacement and at the end, every queue must be owned by exactly one live
  consumer (each consumer process reports the queues it owns every 0.25 s); the longest time it
  took is reported.
* T14 ``run_fuzz``: structure-aware mutations of real send, pull and heartbeat frames (lengths,
  header length, serializer byte, ext fields, bad UTF-8, bad JSON) over many connections while
  real sends run: the broker stays up, logs no traceback, its RSS grows < 50 MiB, every
  acknowledged message is stored intact; the background p99 against its baseline is reported.
* T16 ``run_slow_clients``: idle connections, clients sending one byte a second, clients that
  pull without reading: idle ones closed at the idle timeout, partial frames at the frame
  completion timeout (each against its own connect or first byte), the broker's RSS bounded;
  healthy clients' p99 is reported against baselines before and after, and against a twin broker
  with no hostile clients measured in the same windows.
* T18 ``run_overload``: many connections with many sends in flight, far above what the broker
  sustains, plus an SDK producer: the broker answers SYSTEM_BUSY (2, ``[TIMEOUT_CLEAN_QUEUE]``)
  to sends that waited past ``waitTimeMillsInSendQueue`` since they were read (it must answer
  some), the SDK producer retries them, the broker's RSS stays bounded (a connection's reading
  pauses while its requests wait), only success or busy/refusal codes are answered, and every
  acknowledged message is consumed.
* T17 ``run_disk_full``: the store on a size-limited tmpfs filled by producers: refused with 14
  before ENOSPC, never another error; what was acknowledged is consumed; writes resume once
  space is freed, without a restart (skipped where tmpfs cannot be mounted).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pocketmq.client import Message, Producer, SendStatus
from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.testing.procs import servers
from pocketmq.testing.wire import Wire
from tests.fault.chaos_clients import run_fuzz, run_slow_clients
from tests.fault.chaos_common import (
    Row,
    broker_log_clean,
    check_delivery,
    consume_all,
    rss_mib,
)
from tests.fault.chaos_consumers import run_consumer_faults

__all__ = [
    "Row",
    "run_consumer_faults",
    "run_disk_full",
    "run_fuzz",
    "run_kill9_producers",
    "run_overload",
    "run_slow_clients",
    "run_t3",
]

# ------------------------------------------------------------------------------------ T1/T2


async def _produce(ns: str, topic: str, tag: str, stop: asyncio.Event, acked: set[bytes]) -> None:
    async with Producer(f"PG-{tag}", namesrv=ns, send_msg_timeout=3000) as producer:
        i = 0
        while not stop.is_set():
            body = f"{tag}-{i}".encode()
            i += 1
            try:
                r = await producer.send(Message(topic, body))
            except Exception:  # the broker is down: not acknowledged, try again shortly
                await asyncio.sleep(0.05)
                continue
            if r.send_status is SendStatus.SEND_OK:
                acked.add(body)


def run_kill9_producers(root: Path, *, flush: str, kills: int, producers: int = 4, gap: float = 1.0) -> Row:
    row = Row(
        "T1/T2 kill -9 broker under producers",
        f"{producers} SDK producers, pre-created + auto-created topic, {flush}",
        f"{kills} x kill -9 at random moments",
    )
    rng = random.Random()
    with servers(root, {"flushDiskType": flush}, topics={"ChaosPre": 4}) as s:

        async def main() -> None:
            stop = asyncio.Event()
            acked: dict[str, set[bytes]] = {"ChaosPre": set(), "ChaosAuto": set()}
            tasks = [
                asyncio.create_task(_produce(s.namesrv.addr, topic, f"{topic}{k}", stop, acked[topic]))
                for k in range(producers)
                for topic in (("ChaosPre", "ChaosAuto")[k % 2],)
            ]
            for _ in range(kills):
                await asyncio.sleep(rng.uniform(0.3, 2 * gap))
                s.broker.kill9()
                await asyncio.to_thread(s.restart_broker)
            await asyncio.sleep(gap)  # a little traffic after the last restart too
            stop.set()
            await asyncio.gather(*tasks)
            for topic, got in acked.items():
                consumed = await consume_all(s.broker.addr, topic, 4)
                check_delivery(row, got, consumed)

        asyncio.run(main())
        broker_log_clean(row, s)
    return row


# ------------------------------------------------------------------------------------ T17


@contextlib.contextmanager
def small_tmpfs(size_mib: int) -> object:
    """A size-limited tmpfs mounted for the test (None where mounting is not allowed)."""
    mnt = Path(tempfile.mkdtemp(prefix="pmq-tmpfs-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if done.returncode != 0:
        mnt.rmdir()
        yield None
        return
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        with contextlib.suppress(OSError):
            mnt.rmdir()


def run_disk_full(root: Path, *, size_mib: int = 48, seconds: float = 30.0) -> Row | None:
    """None: tmpfs cannot be mounted here."""
    row = Row(
        "T17 disk full",
        f"producers filling a {size_mib} MiB tmpfs store",
        "disk filled; space freed while running",
    )
    with small_tmpfs(size_mib) as mnt:
        if mnt is None:
            return None
        store = Path(str(mnt)) / "store"
        keys = {
            "storePathRootDir": str(store),
            "mappedFileSizeCommitLog": str(4 << 20),
            "cleanFileForciblyEnable": "false",
            "cleanResourceInterval": "500",
            "diskMaxUsedSpaceRatio": "95",
        }
        filler = Path(str(mnt)) / "filler"
        filler.write_bytes(b"\0" * (size_mib // 4 << 20))  # space to free later
        with servers(root, keys, topics={"Full": 4}) as s:

            async def main() -> None:
                w = Wire(s.broker.addr)
                # the checking group exists before the disk fills, as a running consumer's does
                # (creating a group on a full disk is refused: it cannot be made durable)
                await w.send("Full", b"first", queue_id=0)  # the topic (auto-created: the store is elsewhere)
                await consume_all(s.broker.addr, "Full", 4)
                acked: set[bytes] = set()
                codes: dict[int, int] = {}
                body = b"d" * 8000
                i = 0
                deadline = time.monotonic() + seconds
                refused_since = None
                try:
                    while time.monotonic() < deadline:
                        tag = f"{i:08d}".encode()
                        i += 1
                        r = await w.send("Full", tag + body, queue_id=i % 4)
                        codes[r.code] = codes.get(r.code, 0) + 1
                        if r.code == ResponseCode.SUCCESS:
                            acked.add(tag + body)
                        elif refused_since is None:
                            refused_since = time.monotonic()
                        if refused_since is not None and time.monotonic() - refused_since > 2:
                            break
                    refused = codes.get(ResponseCode.SERVICE_NOT_AVAILABLE, 0)
                    others = {
                        c: n for c, n in codes.items() if c not in (0, ResponseCode.SERVICE_NOT_AVAILABLE)
                    }
                    if not refused:
                        row.fail(f"the disk never filled ({codes})")
                    if others:
                        row.fail(f"codes other than 0 and 14: {others}")
                    consumed = await consume_all(s.broker.addr, "Full", 4)  # reads go on
                    check_delivery(row, acked, consumed)
                    filler.unlink()  # space is back: writes resume without a restart
                    resumed = False
                    until = time.monotonic() + 15
                    while time.monotonic() < until and not resumed:
                        r = await w.send("Full", b"after" + body, queue_id=0)
                        resumed = r.code == ResponseCode.SUCCESS
                        if not resumed:
                            await asyncio.sleep(0.2)
                    if not resumed:
                        row.fail("writes did not resume after space was freed")
                    row.notes.append(f"replies {codes}; resumed after freeing: {resumed}")
                finally:
                    await w.close()

            asyncio.run(main())
            if s.broker.proc is None or s.broker.proc.poll() is not None:
                row.fail("broker died")
            broker_log_clean(row, s)
    return row


# ------------------------------------------------------------------------------------ T18


async def _flood(
    addr: str, inflight: int, stop: asyncio.Event, acked: set[bytes], codes: dict[int, int], tag: str
) -> None:
    w = Wire(addr)
    counter = iter(range(1 << 62))
    body = b"o" * 1000

    async def one() -> None:
        while not stop.is_set():
            key = f"{tag}-{next(counter)}".encode()
            try:
                r = await w.send("Overload", key + body, queue_id=hash(key) % 4)
            except Exception:  # timed out or refused by the client's own limits: not acknowledged
                codes[-1] = codes.get(-1, 0) + 1
                continue
            codes[r.code] = codes.get(r.code, 0) + 1
            if r.code == ResponseCode.SUCCESS:
                acked.add(key + body)

    try:
        await asyncio.gather(*(one() for _ in range(inflight)))
    finally:
        await w.close()


def run_overload(root: Path, *, seconds: float, senders: int, inflight: int, wait_ms: int = 200) -> Row:
    row = Row(
        "T18 overload",
        f"{senders} connections x {inflight} sends in flight (1 KB) + 1 SDK producer, {seconds:.0f} s",
        f"offered load far above what the broker sustains (waitTimeMillsInSendQueue={wait_ms})",
    )
    with servers(root, {"waitTimeMillsInSendQueue": str(wait_ms)}, topics={"Overload": 4}) as s:
        assert s.broker.proc is not None
        pid = s.broker.proc.pid

        async def main() -> None:
            rss0 = rss_mib(pid)
            stop = asyncio.Event()
            acked: set[bytes] = set()
            codes: dict[int, int] = {}
            sdk_acked: set[bytes] = set()
            floods = [
                asyncio.create_task(_flood(s.broker.addr, inflight, stop, acked, codes, f"w{k}"))
                for k in range(senders)
            ]
            sdk = asyncio.create_task(_produce(s.namesrv.addr, "Overload", "sdk", stop, sdk_acked))
            peak = rss0
            t0 = time.monotonic()
            while time.monotonic() - t0 < seconds:
                await asyncio.sleep(0.5)
                peak = max(peak, rss_mib(pid))
            stop.set()
            await asyncio.gather(*floods, sdk, return_exceptions=True)
            consumed = await consume_all(s.broker.addr, "Overload", 4)
            check_delivery(row, acked | sdk_acked, consumed)
            rate = len(acked | sdk_acked) / seconds
            row.notes.append(
                f"replies {codes} (-1: client-side failure); {rate:.0f} msg/s acknowledged; "
                f"SDK producer {len(sdk_acked)} acknowledged; broker RSS {rss0:.0f} -> peak {peak:.0f} MiB"
            )
            if peak - rss0 > 300:
                row.fail(f"RSS grew {peak - rss0:.0f} MiB")
            unexpected = {c: n for c, n in codes.items() if c not in (-1, 0, 2, 14)}
            if unexpected:
                row.fail(f"unexpected reply codes {unexpected}")
            if not codes.get(ResponseCode.SYSTEM_BUSY):
                row.fail("no send was answered SYSTEM_BUSY: the overload queued instead")

        asyncio.run(main())
        broker_log_clean(row, s)
    return row


# ------------------------------------------------------------------------------------ T3


def run_t3(root: Path, flush: str, *, rounds: int) -> Row:
    from tests.fault.test_power_loss import run_power_loss

    row = Row(
        "T3 power loss (store level)",
        f"64 concurrent puts into a store process, {flush}",
        f"{rounds} x SIGKILL + every CommitLog byte after the last fsync dropped (a random part kept: torn record)",
    )
    try:
        acknowledged, lost_durable, lost_tail = run_power_loss(root, flush, rounds)
    except AssertionError as exc:
        row.fail(str(exc))
        return row
    row.acknowledged = acknowledged
    row.lost = lost_durable + (lost_tail if flush == "SYNC_FLUSH" else 0)
    row.notes.append(f"{lost_tail} acknowledged but after the last fsync (lost by design under ASYNC_FLUSH)")
    if row.lost:
        row.fail("acknowledged messages lost")
    return row


# ------------------------------------------------------------------------------------ table


def print_table(rows: list[Row]) -> None:
    head = ("scenario", "load", "faults injected", "acknowledged", "lost", "duplicated", "verdict")
    lines = [head] + [
        (r.scenario, r.load, r.faults, str(r.acknowledged), str(r.lost), str(r.duplicated), r.verdict)
        for r in rows
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for line in lines[1:]:
        print("| " + " | ".join(line) + " |")
    for r in rows:
        for note in r.notes:
            print(f"* {r.scenario}: {note}")


def main() -> int:
    """``make chaos``: the long forms, each bounded in time."""
    rows: list[Row] = []
    base = Path(tempfile.mkdtemp(prefix="pmq-chaos-"))
    try:
        rows += [
            run_kill9_producers(base / f"t1-{f}", flush=f, kills=20) for f in ("SYNC_FLUSH", "ASYNC_FLUSH")
        ]
        rows += [run_t3(base / f"t3-{f}", f, rounds=20) for f in ("SYNC_FLUSH", "ASYNC_FLUSH")]
        rows.append(run_consumer_faults(base / "t9", orderly=False, consumer_kills=20, broker_kills=10))
        rows.append(run_consumer_faults(base / "t11", orderly=True, consumer_kills=30, broker_kills=10))
        rows.append(run_fuzz(base / "t14", frames=1_000_000, connections=1000, rate=2000, fuzz_rate=10_000))
        rows.append(
            # 200 sends a second and an 8 s baseline (and 4 s after): a p99 over ~2,300 and ~4,600
            # sends, not the worst two of 125 (at 50/s the baseline's own p99 ranged 0.9-6.6 ms
            # between runs); the twin broker measures the machine's load in the same windows.
            # the connections opened at 2,000 a second (11,100 in ~6 s), as T14's fuzzer is paced:
            # clients on other machines, not one burst from this process sharing the broker's
            # two cores (open_rate=0, the burst, is measured too: docs/limits.md has both forms)
            run_slow_clients(
                base / "t16",
                idle=10_000,
                trickle=1000,
                non_readers=100,
                idle_timeout=20,
                healthy_rate=200,
                baseline_s=8,
                twin=True,
                open_rate=2000,
            )
        )
        rows.append(run_overload(base / "t18", seconds=60, senders=16, inflight=1024))
        t17 = run_disk_full(base / "t17", size_mib=64, seconds=60)
        if t17 is not None:
            rows.append(t17)
    finally:
        shutil.rmtree(base, ignore_errors=True)
        print_table(rows)
    return 0 if all(r.verdict == "PASS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
