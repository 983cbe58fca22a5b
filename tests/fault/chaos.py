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
  completion timeout, the broker's RSS bounded; healthy clients' p99 is reported.
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
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.client import Message, Producer, SendStatus
from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode
from pocketmq.remoting.protocol.command import RemotingCommand
from pocketmq.remoting.protocol.heartbeat import HeartbeatData, ProducerData
from pocketmq.remoting.protocol.message import decode_messages, properties_to_string
from pocketmq.testing.procs import Servers, servers
from pocketmq.testing.wire import Wire

GROUP = "chaos-check"


@dataclass
class Row:
    scenario: str
    load: str
    faults: str
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    verdict: str = "PASS"
    notes: list[str] = field(default_factory=list)

    def fail(self, why: str) -> None:
        self.verdict = "FAIL"
        self.notes.append(why)


def rss_mib(pid: int) -> float:
    """The process's anonymous resident memory (``RssAnon``): its own memory. The pages of the
    mapped store files it touched (``RssFile``) are page cache, and grow with what is written."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return 0.0


def p99(samples: list[float]) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


#: pull replies other than FOUND / PULL_NOT_FOUND met by ``consume_all`` (reported in notes)
PULL_SURPRISES: list[str] = []


async def consume_all(broker_addr: str, topic: str, queues: int, group: str = GROUP) -> list[bytes]:
    """Every message of ``topic`` pulled through the broker, from offset 0 of each queue (a reply
    other than FOUND or PULL_NOT_FOUND is retried a few times and recorded in ``PULL_SURPRISES``)."""
    w = Wire(broker_addr)
    bodies: list[bytes] = []
    try:
        for q in range(queues):
            offset, retries = 0, 0
            while True:
                r = await w.pull(topic, q, offset, group=group, sys_flag=0x4, suspend_ms=0)
                if r.code == ResponseCode.SUCCESS:
                    bodies += [m.body for m in decode_messages(r.body or b"")]
                    offset = int(r.ext_fields["nextBeginOffset"])  # type: ignore[index]
                    continue
                if r.code == ResponseCode.PULL_NOT_FOUND:
                    break
                PULL_SURPRISES.append(f"{topic}/{q}@{offset}: code {r.code} {r.remark!r}")
                retries += 1
                if retries > 5:
                    break
                await asyncio.sleep(0.5)
    finally:
        await w.close()
    return bodies


def check_delivery(row: Row, acked: set[bytes], consumed: list[bytes]) -> None:
    if PULL_SURPRISES:
        row.notes.append(f"pull replies: {PULL_SURPRISES[:5]}")
        PULL_SURPRISES.clear()
    got = set(consumed)
    row.acknowledged += len(acked)
    row.lost += len(acked - got)
    row.duplicated += len(consumed) - len(got)
    if acked - got:
        row.fail(
            f"{len(acked - got)} acknowledged messages not consumed, e.g. {[b[:24] for b in sorted(acked - got)[:3]]}"
        )


def broker_log_clean(row: Row, s: Servers) -> None:
    text = s.broker.log.read_text(errors="replace")
    if "Traceback" in text:
        tail = text[text.index("Traceback") :].splitlines()
        last = next((ln for ln in tail[1:] if ln and not ln.startswith(" ")), "?")
        row.fail(f"traceback in the broker log: {tail[-1][:200] if not last else last[:200]}")


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


# ------------------------------------------------------------------------------- T9/T10, T11

CONSUMER_CHILD = os.path.join(os.path.dirname(__file__), "consumer_child.py")
HEALTHY_CHILD = os.path.join(os.path.dirname(__file__), "healthy_child.py")


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


# ------------------------------------------------------------------------------------ T14

_SEND_EXT = {
    "a": "PG", "b": "FuzzTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0",
    "g": "1700000000000", "h": "0", "i": properties_to_string({"TAGS": "t", "WAIT": "true"}),
    "j": "0", "k": "false", "m": "false",
}  # fmt: skip
_PULL_EXT = {
    "consumerGroup": "FG", "topic": "FuzzTopic", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
    "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
}  # fmt: skip


def _base_frames() -> list[bytes]:
    hb = HeartbeatData("fuzz@1", (ProducerData("PG"),), ()).encode()
    return [
        RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, dict(_SEND_EXT), b"fuzz-body").encode(),
        RemotingCommand.request(RequestCode.PULL_MESSAGE, dict(_PULL_EXT)).encode(),
        RemotingCommand.request(RequestCode.HEART_BEAT, None, hb).encode(),
    ]


def mutate(rng: random.Random, frame: bytes) -> bytes:
    """One structure-aware mutation of a real frame."""
    data = bytearray(frame)
    hlen = struct.unpack_from(">i", data, 4)[0] & 0xFFFFFF
    kind = rng.randrange(9)
    if kind == 0:  # length word
        struct.pack_into(">i", data, 0, rng.choice([-1, 0, 3, len(data) + 100, 0x7FFFFFFF, len(data) // 2]))
    elif kind == 1:  # header length
        struct.pack_into(">i", data, 4, rng.choice([0, hlen + 50, 0xFFFFFF, hlen // 2, 1 << 20]))
    elif kind == 2:  # serializer byte
        data[4] = rng.choice([1, 2, 7, 255])
    elif kind == 3:  # bad UTF-8 in the header
        for _ in range(rng.randint(1, 4)):
            data[8 + rng.randrange(hlen)] = rng.choice([0xFF, 0xC3, 0x80])
    elif kind == 4:  # broken JSON
        pos = 8 + rng.randrange(hlen)
        data[pos : pos + 1] = rng.choice([b"{", b"}", b'"', b"", b"\\", b"[1,"])
        struct.pack_into(">i", data, 0, len(data) - 4)
        struct.pack_into(">i", data, 4, hlen + len(data) - len(frame))
    elif kind == 5:  # ext field values: wrong type, huge, missing
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, dict(_SEND_EXT), b"x")
        ext = dict(_SEND_EXT)
        key = rng.choice(list(ext))
        choice = rng.randrange(3)
        if choice == 0:
            del ext[key]
        elif choice == 1:
            ext[key] = rng.choice(["-1", "abc", "99999999999999999999", "\u00e9" * 50])
        else:
            ext[key] = "x" * rng.choice([1000, 30_000])
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"x")
        return cmd.encode()
    elif kind == 6:  # truncated frame followed by the start of another
        return bytes(data[: rng.randrange(4, len(data))]) + frame
    elif kind == 7:  # a body that lies (a batch of garbage)
        ext = dict(_SEND_EXT, m="true")
        return RemotingCommand.request(
            RequestCode.SEND_BATCH_MESSAGE, ext, os.urandom(rng.randint(1, 200))
        ).encode()
    else:  # random bytes
        return os.urandom(rng.randint(1, 64))
    return bytes(data)


class _Pace:
    """A shared pace for all fuzzing connections: ``rate`` frames/s in all (0: unpaced)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.next = time.monotonic()

    async def take(self, n: int) -> None:
        if not self.rate:
            return
        now = time.monotonic()
        self.next = max(self.next, now) + n / self.rate
        await asyncio.sleep(max(0.0, self.next - now - n / self.rate))


async def _fuzz_connection(
    port: int, frames: int, rng: random.Random, counter: list[int], pace: _Pace | None = None
) -> None:
    bases = _base_frames()
    sent = 0
    while sent < frames:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        drain = asyncio.create_task(_discard(reader))
        try:
            while sent < frames and not reader.at_eof():
                batch = b"".join(
                    mutate(rng, rng.choice(bases)) if rng.random() < 0.9 else rng.choice(bases)
                    for _ in range(min(20, frames - sent))
                )
                if pace is not None:
                    await pace.take(min(20, frames - sent))
                sent += min(20, frames - sent)
                writer.write(batch)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            counter[0] += 1
            drain.cancel()
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def _discard(reader: asyncio.StreamReader) -> None:
    with contextlib.suppress(Exception):
        while await reader.read(65536):
            pass


class HealthyClient:
    """``healthy_child.py``: a healthy sender whose latency is measured in its own process."""

    def __init__(self, addr: str, topic: str, rate: float, tag: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, HEALTHY_CHILD, addr, topic, str(rate), tag],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "READY":
            raise RuntimeError("healthy_child.py did not start")

    def mark(self) -> None:
        """Start a new latency window."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("MARK\n")
        self.proc.stdin.flush()

    def finish(self) -> tuple[list[list[float]], set[bytes]]:
        """Stop; the latency windows and the acknowledged bodies."""
        import json

        try:
            out, _err = self.proc.communicate("STOP\n", timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        result = json.loads(out.strip().splitlines()[-1])
        return result["windows"], {b.encode() for b in result["acked"]}


def run_fuzz(
    root: Path, *, frames: int, connections: int, rate: float, baseline_s: float = 2.0, fuzz_rate: float = 0
) -> Row:
    paced = f" at {fuzz_rate:.0f} frames/s" if fuzz_rate else ""
    row = Row(
        "T14 fuzzed frames",
        f"{frames} frames{paced} over {connections} connections + {rate:.0f} msg/s real sends",
        "send/pull/heartbeat frames mutated: lengths, header length, serializer, ext fields, UTF-8, JSON",
    )
    with servers(root, topics={"Background": 4}) as s:
        assert s.broker.proc is not None
        pid = s.broker.proc.pid

        async def main() -> None:
            # the real traffic runs in its own processes: in this one the fuzzer's own load
            # would count as the broker's latency
            senders = 4
            bg = [HealthyClient(s.broker.addr, "Background", rate / senders, f"b{k}") for k in range(senders)]
            await asyncio.sleep(baseline_s)
            rss0 = rss_mib(pid)
            for client in bg:
                client.mark()
            counter = [0]
            rng = random.Random(23)
            per = frames // connections
            pace = _Pace(fuzz_rate)
            t0 = time.monotonic()
            # at most 200 fuzzing connections at a time (the test process's file descriptors)
            sem = asyncio.Semaphore(200)

            async def one(k: int) -> None:
                async with sem:
                    await _fuzz_connection(s.broker_port, per, random.Random(rng.random() + k), counter, pace)

            await asyncio.gather(*(one(k) for k in range(connections)))
            elapsed = time.monotonic() - t0
            acked: set[bytes] = set()
            base_lat: list[float] = []
            fuzz_lat: list[float] = []
            for client in bg:
                (before, during), sent = await asyncio.to_thread(client.finish)
                base_lat += before
                fuzz_lat += during
                acked |= sent
            baseline = p99(base_lat)
            rss1 = rss_mib(pid)
            if s.broker.proc is None or s.broker.proc.poll() is not None:
                row.fail("broker died")
                return
            consumed = await consume_all(s.broker.addr, "Background", 4)
            check_delivery(row, acked, consumed)
            growth = rss1 - rss0
            ratio = p99(fuzz_lat) / baseline if baseline else 0.0
            row.notes.append(
                f"{per * connections} frames in {elapsed:.1f} s over {counter[0]} connections; "
                f"RSS {rss0:.0f} -> {rss1:.0f} MiB; background p99 {baseline * 1000:.1f} -> "
                f"{p99(fuzz_lat) * 1000:.1f} ms (x{ratio:.1f})"
            )
            if growth > 50:
                row.fail(f"RSS grew {growth:.0f} MiB")

        asyncio.run(main())
        broker_log_clean(row, s)
    return row


# ------------------------------------------------------------------------------------ T16


def run_slow_clients(
    root: Path, *, idle: int, trickle: int, non_readers: int, idle_timeout: int = 4, frame_timeout: int = 2
) -> Row:
    row = Row(
        "T16 slow and idle clients",
        f"{idle} idle, {trickle} one-byte-a-second, {non_readers} pull-but-never-read connections",
        f"idle timeout {idle_timeout} s, frame completion timeout {frame_timeout} s",
    )
    keys = {
        "serverChannelMaxIdleTimeSeconds": str(idle_timeout),
        "serverFrameCompletionTimeoutSeconds": str(frame_timeout),
    }
    with servers(root, keys, topics={"Slow": 4}) as s:
        assert s.broker.proc is not None
        pid = s.broker.proc.pid

        async def main() -> None:
            w = Wire(s.broker.addr)
            big = b"p" * 16_000
            for i in range(400):  # data for the non-readers to pull (32 x 16 KB per pull)
                await w.send("Slow", big, queue_id=i % 4)
            await w.close()
            # the healthy client runs in its own process: in this one, the hostile clients' tasks
            # (1,000 trickles waking each second) delayed its own sends and replies (measured
            # here before: p99 x4.7, most of it this process's loop, not the broker)
            healthy = HealthyClient(s.broker.addr, "Slow", 50, "h0")
            await asyncio.sleep(4)
            rss0 = rss_mib(pid)
            healthy.mark()
            t0 = time.monotonic()
            idles = [await asyncio.open_connection("127.0.0.1", s.broker_port) for _ in range(idle)]
            frame = RemotingCommand.request(RequestCode.HEART_BEAT, None, b"{}").encode()
            trickles = [await asyncio.open_connection("127.0.0.1", s.broker_port) for _ in range(trickle)]
            pull = RemotingCommand.request(RequestCode.PULL_MESSAGE, dict(_PULL_EXT, topic="Slow")).encode()
            readers = []
            for _ in range(non_readers):
                r, wr = await asyncio.open_connection("127.0.0.1", s.broker_port, limit=1024)
                wr.write(pull * 2000)  # 2000 pulls of 512 KB each: ~1 GB of replies if all were served
                readers.append((r, wr))

            async def trickle_one(writer: asyncio.StreamWriter) -> None:
                with contextlib.suppress(Exception):
                    # independent clients: their bytes spread over the second, not all at once
                    await asyncio.sleep(random.random())
                    for b in frame:
                        writer.write(bytes((b,)))
                        await writer.drain()
                        await asyncio.sleep(1)

            trickling = [asyncio.create_task(trickle_one(wr)) for _r, wr in trickles]
            peak = rss0
            opened = time.monotonic()  # the idle clock of the last idle connection starts here
            row.notes.append(f"{idle + trickle + non_readers} connections opened in {opened - t0:.1f} s")
            while time.monotonic() - opened < idle_timeout + 3:
                await asyncio.sleep(0.5)
                peak = max(peak, rss_mib(pid))
            closed_idle = sum(await asyncio.gather(*(_closed(r) for r, _w in idles)))
            closed_trickle = sum(await asyncio.gather(*(_closed(r) for r, _w in trickles)))
            (base_lat, during), acked = await asyncio.to_thread(healthy.finish)
            baseline = p99(base_lat)
            for t in trickling:
                t.cancel()
            for _r, wr in idles + trickles + readers:
                wr.close()
            consumed = await consume_all(s.broker.addr, "Slow", 4)
            check_delivery(row, acked, [b for b in consumed if not b.startswith(b"p")])
            ratio = p99(during) / baseline if baseline else 0.0
            row.notes.append(
                f"idle closed {closed_idle}/{idle}, trickling closed {closed_trickle}/{trickle}; broker RSS "
                f"{rss0:.0f} -> peak {peak:.0f} MiB; healthy p99 {baseline * 1000:.1f} -> "
                f"{p99(during) * 1000:.1f} ms (x{ratio:.2f}, {len(base_lat)} / {len(during)} sends); "
                f"worst: {_worst(during, 50)}"
            )
            if closed_idle < idle:
                row.fail(f"{idle - closed_idle} idle connections still open after the idle timeout")
            if closed_trickle < trickle:
                row.fail(f"{trickle - closed_trickle} trickling connections still open")
            # per non-reader: the write buffer's high-water mark plus one reply (512 KB) and its
            # waiting requests; measured ~10 MiB in all (before pulls waited for a pending group
            # write before reading the store: 100-195 MiB)
            bound = 24 + non_readers * 4 + (idle + trickle) * 0.05
            if peak - rss0 > bound:
                row.fail(f"RSS grew {peak - rss0:.0f} MiB (bound {bound:.0f})")

        asyncio.run(main())
        broker_log_clean(row, s)
    return row


def _worst(lat: list[float], rate: float, n: int = 8) -> str:
    """The ``n`` worst latencies and about when they happened (a sender at ``rate`` msg/s)."""
    worst = sorted(range(len(lat)), key=lambda k: lat[k], reverse=True)[:n]
    return ", ".join(f"{lat[k] * 1000:.0f} ms at ~{k / rate:.1f} s" for k in sorted(worst))


async def _closed(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1 << 16), 0.5) == b""
    except TimeoutError:
        return False
    except (ConnectionError, OSError):
        return True


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
            run_slow_clients(base / "t16", idle=10_000, trickle=1000, non_readers=100, idle_timeout=20)
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
