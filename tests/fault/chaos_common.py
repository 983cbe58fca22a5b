"""What the fault scenarios share (``tests/fault/chaos.py``): the result row, process and latency
measures, the delivery check by consuming, and the healthy client run in a process of its own."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from pocketmq.remoting.protocol.codes import ResponseCode
from pocketmq.remoting.protocol.message import decode_messages
from pocketmq.testing.procs import Servers
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process has used (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _set_policy(policy: int) -> None:
    """``policy`` for every thread of this process (a policy is per thread; executor threads
    made meanwhile inherit it and would keep it)."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # (a thread that ended meanwhile)
            os.sched_setscheduler(int(tid), policy, os.sched_param(0))


@contextlib.contextmanager
def hostile_at_idle_priority() -> Iterator[None]:
    """Run this process (the hostile load generators of T14 and T16) at ``SCHED_IDLE`` while
    the block runs: they get only CPU that the broker and the healthy client do not want.

    In production the hostile clients are other machines. On a 2-core box the generators took
    the cores the broker and the healthy client needed: the echo control (no broker at all)
    went from p99 0.4 to 0.9-1.8 ms while the connections opened, so the healthy p99 measured
    the generator's CPU as much as the broker. At ``SCHED_IDLE`` the generators still do all
    they do (every connection, byte and pull), only later when the cores are busy; the echo
    control shows that the machine's share is gone. Lowering a policy needs no privilege;
    going back to ``SCHED_OTHER`` is allowed within ``RLIMIT_NICE`` (nice 0 here)."""
    if not hasattr(os, "SCHED_IDLE"):  # pragma: no cover - not Linux
        yield
        return
    _set_policy(os.SCHED_IDLE)
    try:
        yield
    finally:
        _set_policy(os.SCHED_OTHER)


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


HEALTHY_CHILD = os.path.join(os.path.dirname(__file__), "healthy_child.py")


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
        #: after :meth:`finish`: when each send of each window began (``time.monotonic``)
        self.starts: list[list[float]] = []

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
        self.starts = result.get("starts", [])
        return result["windows"], {b.encode() for b in result["acked"]}
