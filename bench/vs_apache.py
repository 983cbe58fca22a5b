"""pocketmq's broker against Apache RocketMQ 4.9.7's, the same workloads, interleaved.

One command: ``python bench/vs_apache.py`` (``make java-deps`` first: it fetches Apache's jars
into ``.cache/apache``). For each round it starts Apache's name server + broker
(``tests/interop/apache_servers.py``) and then pocketmq's (or the other way round on odd rounds,
so neither always runs on a warmer machine), each on a fresh tmp store with the same settings
(``ASYNC_FLUSH``, the CommitLog segment size of ``--segment-mb``, RocketMQ's default
ConsumeQueue and IndexFile sizes), and runs on each, in this order:

1. ``warmup``: ``--warmup`` seconds of SDK sends at 128 in flight (JIT warm-up for the JVM; the
   same for both), not reported;
2. ``sdk_sync_1`` / ``sdk_sync_128``: pocketmq's SDK benchmark (``pocketmq.client.benchmark
   produce``, 1 KiB bodies, sync sends at 1 and 128 in flight) for ``--seconds`` each;
3. ``fill``: the raw-frame generator writes ``--fill-mb`` MiB of 1 KiB messages (so the CommitLog
   has rolled over to a new segment at least once: fill > segment), not reported;
4. ``raw_128``: the raw-frame generator for ``--seconds``, 128 single sends in flight.

The raw-frame generator keeps 128 pre-encoded ``SEND_MESSAGE_V2`` frames (JSON header as Java
clients send it, opaque 0..127, one queue each round robin); every reply is matched by the opaque
read straight out of the reply header and its frame written again at once, so the client does no
encoding and almost no decoding and the broker is what is measured.

Every run reports msg/s, latency p50/p99/max (µs, send to reply), the broker process's CPU µs per
message (utime + stime from ``/proc/<pid>/stat`` over the run) and the replies that were not
SUCCESS (``errors``; the raw runs count them by response code in ``error_codes``, e.g. 2
SYSTEM_BUSY for a broker's flow control), with the load average
(``/proc/loadavg``) at its start. One JSON line per run on stdout, then a table of the best
round of each (highest msg/s; the CPU column is the lowest of the rounds).

``--timeline`` adds to each raw run's line a ``timeline``: per ``--window`` seconds, the
replies, p99 and max (ms) and the CommitLog offset (from the reply's ``msgId``) of the window's
first reply, so stalls can be placed against segment rollovers (offset crossing a multiple of
``--segment-mb``). ``--set KEY=VALUE`` (repeatable) adds a key to pocketmq's broker only
(``loopLagWarnMillis=5`` to get its stall reports); ``--log-dir`` keeps each broker's log there;
``--raw-only`` skips the SDK warm-up and runs (fill, then raw_128).

Scale: the issue's run is ``--fill-mb 2048 --segment-mb 1024`` (RocketMQ's default segment, two
rollovers; 2-4 minutes of filling per broker on 2 cores, ~15 minutes for the default 2 rounds). ``--fill-mb 160 --segment-mb 64``
shows the same rollover in seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pocketmq.remoting.protocol.codes import RequestCode, ResponseCode  # noqa: E402
from pocketmq.remoting.protocol.command import RemotingCommand  # noqa: E402
from pocketmq.remoting.protocol.message import properties_to_string  # noqa: E402
from pocketmq.testing.procs import Servers  # noqa: E402
from tests.interop.apache_servers import ApacheServers, create_topics  # noqa: E402

QUEUES = 8
BODY = 1024
INFLIGHT = 128


def broker_keys(segment_mb: int) -> dict[str, str]:
    """The settings both brokers run with (RocketMQ's defaults but the segment size)."""
    return {
        "flushDiskType": "ASYNC_FLUSH",
        "mappedFileSizeCommitLog": str(segment_mb << 20),
        "mappedFileSizeConsumeQueue": str(300_000 * 20),
        "maxHashSlotNum": "5000000",
        "maxIndexNum": "20000000",
    }


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def pct(sorted_ns: list[int], q: float) -> float:
    if not sorted_ns:
        return 0.0
    return round(sorted_ns[min(len(sorted_ns) - 1, max(0, int(q * len(sorted_ns) + 0.5) - 1))] / 1000, 1)


# ------------------------------------------------------------------------- raw-frame generator
def send_frames(topic: str, n: int) -> list[bytes]:
    """``n`` whole SEND_MESSAGE_V2 frames, opaque i, queue i % QUEUES, 1 KiB body."""
    frames = []
    for i in range(n):
        props = properties_to_string({"WAIT": "true", "UNIQ_KEY": f"7F000001{os.getpid():08X}{i:016X}"})
        ext = {
            "a": "VsRawProducer", "b": topic, "c": "TBW102", "d": str(QUEUES), "e": str(i % QUEUES), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false",
        }  # fmt: skip
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext, b"r" * BODY, language=0)
        cmd.opaque = i
        frames.append(cmd.encode())
    return frames


class RawSender(asyncio.Protocol):
    """Keeps every frame in flight: a reply (found by its opaque) sends its frame again."""

    def __init__(self, frames: list[bytes], done: asyncio.Future[None]) -> None:
        self.frames = frames
        self.sent_at = [0] * len(frames)
        self.latencies: list[int] = []
        self.count = self.errors = 0
        self.error_codes: dict[int, int] = {}
        self.buf = b""
        self.stopping = False
        self.outstanding = 0
        self.done = done
        #: (start ns, replies, latencies, CommitLog offset of its first reply, broker CPU s) per window
        self.window_ns = 0
        self.windows: list[tuple[int, int, list[int], int, float]] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        now = time.perf_counter_ns()
        for i in range(len(self.frames)):
            self.sent_at[i] = now
        self.outstanding = len(self.frames)
        self.transport.writelines(self.frames)

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data if self.buf else data
        pos, end = 0, len(buf)
        again: list[bytes] = []
        now = time.perf_counter_ns()
        while end - pos >= 4:
            length = int.from_bytes(buf[pos : pos + 4], "big")
            if end - pos - 4 < length:
                break
            hlen = int.from_bytes(buf[pos + 5 : pos + 8], "big")
            header = buf[pos + 8 : pos + 8 + hlen]
            pos += 4 + length
            i = _json_int(header, b'"opaque":')
            code = _json_int(header, b'"code":')
            if code != ResponseCode.SUCCESS:
                self.errors += 1
                self.error_codes[code] = self.error_codes.get(code, 0) + 1
            self.count += 1
            self.latencies.append(now - self.sent_at[i])
            if self.window_ns and now - self._win_start >= self.window_ns:
                self._new_window(now, header)
            if self.stopping:
                self.outstanding -= 1
                continue
            self.sent_at[i] = now
            again.append(self.frames[i])
        self.buf = buf[pos:]
        if again:
            self.transport.writelines(again)
        if self.stopping and self.outstanding == 0 and not self.done.done():
            self.done.set_result(None)

    def start_timeline(self, window_s: float, cpu: Callable[[], float]) -> None:
        self.window_ns = int(window_s * 1e9)
        self._win_start = time.perf_counter_ns()
        self._win_from = 0
        self._win_offset = -1
        self._cpu = cpu
        self._win_cpu = cpu()

    def _new_window(self, now: int, header: bytes) -> None:
        """Close the window so far (the replies since ``_win_from``) and open one at ``now``."""
        lats = self.latencies[self._win_from : len(self.latencies) - 1]
        cpu, self._win_cpu = self._win_cpu, self._cpu()
        self.windows.append((self._win_start, len(lats), lats, self._win_offset, self._win_cpu - cpu))
        self._win_start = now
        self._win_from = len(self.latencies) - 1
        at = header.find(b'"msgId":"')
        self._win_offset = int(header[at + 25 : at + 41], 16) if at >= 0 else -1

    def timeline(self, t0: int) -> list[list[float]]:
        """``[seconds from t0, replies, p99 ms, max ms, CommitLog offset MiB, broker CPU µs/msg]``
        per window."""
        rows = []
        for start, n, lats, off, cpu in self.windows:
            lats = sorted(lats)
            rows.append([round((start - t0) / 1e9, 2), n, round(pct(lats, 0.99) / 1000, 1),
                         round(lats[-1] / 1e6, 1) if lats else 0.0, round(off / 2**20, 1),
                         round(cpu * 1e6 / max(n, 1), 1)])  # fmt: skip
        return rows

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"broker closed the connection: {exc}"))


def _json_int(header: bytes, key: bytes) -> int:
    at = header.find(key) + len(key)
    stop = at
    while header[stop] in b"-0123456789":
        stop += 1
    return int(header[at:stop])


async def raw_run(
    addr: str, topic: str, *, seconds: float = 0.0, total_bytes: int = 0, window: float = 0.0, pid: int = 0
) -> dict[str, Any]:
    """Run the generator for ``seconds`` or until ``total_bytes`` of bodies are acknowledged."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    host, port = addr.rsplit(":", 1)
    frames = send_frames(topic, INFLIGHT)
    t0 = time.monotonic()
    t0_ns = time.perf_counter_ns()
    transport, proto = await loop.create_connection(lambda: RawSender(frames, done), host, int(port))
    if window:
        proto.start_timeline(window, partial(cpu_seconds, pid))
    want = total_bytes // BODY
    while not done.done():
        await asyncio.sleep(0.2)
        if (seconds and time.monotonic() - t0 >= seconds) or (want and proto.count >= want):
            break
    proto.stopping = True
    await asyncio.wait_for(_drain(proto, done), 60)
    secs = time.monotonic() - t0
    transport.close()
    return {
        "messages": proto.count, "errors": proto.errors, "error_codes": proto.error_codes, "seconds": secs,
        "latencies": proto.latencies, "timeline": proto.timeline(t0_ns),
    }  # fmt: skip


async def _drain(proto: RawSender, done: asyncio.Future[None]) -> None:
    if proto.outstanding == 0 and not done.done():
        done.set_result(None)
    await done


# ------------------------------------------------------------------------------- one broker
@contextmanager
def started(kind: str, root: Path, keys: dict[str, str]) -> Iterator[Servers | ApacheServers]:
    s: Servers | ApacheServers
    if kind == "apache":
        s = ApacheServers(root, broker_keys=keys)
    else:
        s = Servers(root, broker_keys=keys)
    try:
        s.start()
        create_topics(s.broker.addr, ["VsSdk", "VsRaw"], QUEUES)
        for topic in ("VsSdk", "VsRaw"):
            s.wait_route(topic)
        yield s
    finally:
        s.stop()


def sdk_run(s: Servers | ApacheServers, inflight: int, seconds: float) -> dict[str, Any]:
    pid = s.broker.proc.pid  # type: ignore[union-attr]
    cmd = [sys.executable, "-m", "pocketmq.client.benchmark", "produce", "-n", s.namesrv.addr,
           "--broker-pid", str(pid), "-t", "VsSdk", "-w", str(inflight), "-d", str(seconds),
           "-s", str(BODY), "--report-interval", "3600"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, timeout=seconds + 120, check=False, text=True)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"SDK benchmark failed ({out.returncode}): {out.stderr[-2000:]}")
    r = json.loads(lines[-1])
    return {
        "msg_per_s": r["tps"], "p50_us": r["p50_us"], "p99_us": r["p99_us"], "max_us": r["max_us"],
        "broker_cpu_us_per_msg": r.get(f"broker_{pid}_cpu_us_per_msg"), "errors": r["errors"],
        "messages": r["messages"],
    }  # fmt: skip


def raw_measured(s: Servers | ApacheServers, timeline: bool = False, **kw: Any) -> dict[str, Any]:
    pid = s.broker.proc.pid  # type: ignore[union-attr]
    cpu0 = cpu_seconds(pid)
    r = asyncio.run(raw_run(s.broker.addr, "VsRaw", pid=pid, **kw))
    cpu = cpu_seconds(pid) - cpu0
    lat = sorted(r["latencies"])
    n = max(r["messages"], 1)
    row = {
        "msg_per_s": round(r["messages"] / r["seconds"], 1), "p50_us": pct(lat, 0.5), "p99_us": pct(lat, 0.99),
        "max_us": round(lat[-1] / 1000, 1) if lat else 0.0, "broker_cpu_us_per_msg": round(cpu * 1e6 / n, 2),
        "errors": r["errors"], "error_codes": r["error_codes"], "messages": r["messages"],
    }  # fmt: skip
    if timeline:
        row["timeline"] = r["timeline"]
    return row


def one_broker(kind: str, rnd: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    tmp = tempfile.TemporaryDirectory(prefix=f"vs-apache-{kind}-", dir=args.tmp)
    keys = broker_keys(args.segment_mb)
    if kind == "pocketmq":
        keys.update(kv.split("=", 1) for kv in args.set)
    raw = partial(raw_measured, timeline=args.timeline, window=args.window if args.timeline else 0.0)
    with tmp, started(kind, Path(tmp.name), keys) as s:
        runs: list[tuple[str, Callable[[], dict[str, Any]]]] = []
        if not args.raw_only:
            if args.warmup > 0:
                sdk_run(s, INFLIGHT, args.warmup)
            runs += [
                ("sdk_sync_1", partial(sdk_run, s, 1, args.seconds)),
                ("sdk_sync_128", partial(sdk_run, s, INFLIGHT, args.seconds)),
            ]
        runs += [
            ("fill", partial(raw, s, total_bytes=args.fill_mb << 20)),
            ("raw_128", partial(raw, s, seconds=args.seconds)),
        ]
        for name, run in runs:
            row = {"broker": kind, "round": rnd, "run": name, "load": load(), **run()}
            rows.append(row)
            print(json.dumps(row), flush=True)
        commitlog = Path(s.store_dir) / "commitlog"
        segments = len(list(commitlog.iterdir())) if commitlog.is_dir() else 0
        print(json.dumps({"broker": kind, "round": rnd, "commitlog_segments": segments}), flush=True)
        if args.log_dir:
            s.stop()  # flushes the log
            Path(args.log_dir).mkdir(parents=True, exist_ok=True)
            log = Path(tmp.name) / "broker.log"
            if log.exists():
                shutil.copy(log, Path(args.log_dir) / f"{kind}-r{rnd}-broker.log")
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| run | broker | msg/s | p50 ms | p99 ms | max ms | broker CPU µs/msg | errors | load at start |",
           "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for run in ("sdk_sync_1", "sdk_sync_128", "raw_128"):
        for kind in ("pocketmq", "apache"):
            mine = [r for r in rows if r["run"] == run and r["broker"] == kind]
            if not mine:
                continue
            best = max(mine, key=lambda r: r["msg_per_s"])
            cpu = min(r["broker_cpu_us_per_msg"] or 0 for r in mine)
            out.append(
                f"| {run} | {kind} | {best['msg_per_s']:.0f} | {best['p50_us'] / 1000:.2f} | "
                f"{best['p99_us'] / 1000:.2f} | {best['max_us'] / 1000:.1f} | {cpu:.1f} | {best['errors']} | "
                f"{best['load']} |"
            )
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=2, help="rounds; each runs both brokers (default 2)")
    p.add_argument("--seconds", type=float, default=20.0, help="seconds per measured run (default 20)")
    p.add_argument("--warmup", type=float, default=20.0, help="SDK warm-up seconds per broker (default 20)")
    p.add_argument("--fill-mb", type=int, default=2048, help="MiB written before raw_128 (default 2048)")
    p.add_argument("--segment-mb", type=int, default=1024, help="CommitLog segment MiB (default 1024)")
    p.add_argument("--only", choices=("pocketmq", "apache"), help="run one broker only")
    p.add_argument("--tmp", default=None, help="directory for the stores (default: the system tmp)")
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="pocketmq broker key (repeatable)"
    )
    p.add_argument("--log-dir", default=None, help="keep each broker's log in this directory")
    p.add_argument("--raw-only", action="store_true", help="no SDK warm-up and runs: fill, then raw_128")
    p.add_argument("--timeline", action="store_true", help="per-window replies/p99/max/offset in raw runs")
    p.add_argument("--window", type=float, default=0.5, help="timeline window seconds (default 0.5)")
    args = p.parse_args()
    kinds = [args.only] if args.only else ["apache", "pocketmq"]
    rows: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        for kind in kinds if rnd % 2 == 0 else kinds[::-1]:
            rows += one_broker(kind, rnd, args)
    print(table(rows))
    runs = [run for run in ("sdk_sync_1", "sdk_sync_128", "raw_128") if any(r["run"] == run for r in rows)]
    ratios = [
        statistics.median(r["msg_per_s"] for r in rows if r["run"] == run and r["broker"] == "pocketmq")
        / statistics.median(r["msg_per_s"] for r in rows if r["run"] == run and r["broker"] == "apache")
        for run in runs
        if not args.only
    ]
    if ratios:
        pairs = ", ".join(f"{run} {x:.2f}" for run, x in zip(runs, ratios, strict=True))
        print(f"pocketmq / apache msg/s (median of rounds): {pairs}")


if __name__ == "__main__":
    main()
