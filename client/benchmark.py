"""``pocketmq bench produce|consume|e2e``: SDK benchmarks in the spirit of RocketMQ's tools.

* ``produce``: ``--inflight`` concurrent senders (``--batch`` > 1: SEND_BATCH_MESSAGE) for
  ``--duration`` seconds or ``--count`` messages;
* ``consume``: a push (default) or lite-pull consumer drains the topic, committing offsets;
* ``e2e``: a producer at a fixed ``--rate`` and a push consumer in one process; latency =
  consume time - send time of each message, one monotonic clock (ns stamp in the body).

A progress line per ``--report-interval`` goes to stderr; the last stdout line is a JSON
summary: messages, seconds, TPS, MB/s, latency avg/p50/p99/p99.9/max (µs), errors, and CPU
µs per message of this process and of every ``--broker-pid`` (read from /proc).
"""

from __future__ import annotations

import asyncio
import os
import struct
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import click
import orjson

from pocketmq.client.config import ConsumeFromWhere
from pocketmq.client.consumer.listener import CONSUME_SUCCESS
from pocketmq.client.consumer.lite_pull import LitePullConsumer
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.client.message import Message
from pocketmq.client.producer.producer import Producer
from pocketmq.remoting.common.runtime import new_event_loop
from pocketmq.remoting.protocol.message import MessageExt

_STAMP = struct.Struct(">q")


def _proc_cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentiles(samples_ns: list[int]) -> dict[str, float]:
    """avg/p50/p99/p99.9/max in µs (nearest-rank)."""
    if not samples_ns:
        return {"avg_us": 0.0, "p50_us": 0.0, "p99_us": 0.0, "p999_us": 0.0, "max_us": 0.0}
    s = sorted(samples_ns)
    n = len(s)

    def rank(q: float) -> float:
        return s[min(n - 1, max(0, int(q * n + 0.5) - 1))] / 1000

    return {
        "avg_us": round(sum(s) / n / 1000, 1),
        "p50_us": rank(0.50),
        "p99_us": rank(0.99),
        "p999_us": rank(0.999),
        "max_us": s[-1] / 1000,
    }


@dataclass
class Meter:
    kind: str
    body_size: int
    broker_pids: tuple[int, ...] = ()
    count: int = 0
    errors: int = 0
    latencies: list[int] = field(default_factory=list)
    _start: float = 0.0
    _cpu0: float = 0.0
    _broker0: dict[int, float | None] = field(default_factory=dict)

    def start(self) -> None:
        self._start = time.monotonic()
        self._cpu0 = time.process_time()
        self._broker0 = {pid: _proc_cpu_seconds(pid) for pid in self.broker_pids}

    def elapsed(self) -> float:
        """Seconds since :meth:`start`."""
        return time.monotonic() - self._start

    def summary(self) -> dict[str, Any]:
        secs = max(self.elapsed(), 1e-9)
        n = max(self.count, 1)
        out: dict[str, Any] = {
            "bench": self.kind,
            "messages": self.count,
            "errors": self.errors,
            "seconds": round(secs, 3),
            "tps": round(self.count / secs, 1),
            "mb_per_s": round(self.count * self.body_size / secs / 1e6, 2),
            **percentiles(self.latencies),
            "client_cpu_us_per_msg": round((time.process_time() - self._cpu0) * 1e6 / n, 2),
        }
        for pid, before in self._broker0.items():
            after = _proc_cpu_seconds(pid)
            if before is not None and after is not None:
                out[f"broker_{pid}_cpu_us_per_msg"] = round((after - before) * 1e6 / n, 2)
        return out


async def _report(
    meter: Meter, interval: float, stop: asyncio.Event, *, duration: float = 0.0, count: int = 0
) -> None:
    """Every ``interval`` s: one line on stderr, or on a terminal one progress bar redrawn in place
    (towards ``count`` messages, else ``duration`` seconds)."""
    from pocketmq.client.progress import ProgressBar

    bar = ProgressBar(f"[{meter.kind}]", count or duration, unit="" if count else "s")
    if bar.enabled:
        interval = min(interval, 0.25)
    last_n, last_t = 0, time.monotonic()
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            pass
        now = time.monotonic()
        n = meter.count
        recent = meter.latencies[-10_000:]
        p = percentiles(recent)
        tps = (n - last_n) / max(now - last_t, 1e-9)
        if bar.enabled:
            bar.update(n if count else min(meter.elapsed(), duration),
                       f"msgs={n} tps={tps:,.0f} errors={meter.errors} p99={p['p99_us']:.0f}us")  # fmt: skip
        else:
            click.echo(
                f"[{meter.kind}] {meter.elapsed():6.1f}s  msgs={n}  tps={tps:,.0f}"
                f"  errors={meter.errors}  p50={p['p50_us']:.0f}us  p99={p['p99_us']:.0f}us",
                err=True,
            )
        last_n, last_t = n, now
    bar.close()


def _run(coro_fn: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        result: dict[str, Any] = runner.run(coro_fn())  # type: ignore[arg-type]
    click.echo(orjson.dumps(result).decode())


@click.group(name="bench")
def bench() -> None:
    """Benchmarks of the client SDK against a running name server and broker."""


_common = [
    click.option(
        "-n",
        "--namesrv",
        default=lambda: os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
        show_default="127.0.0.1:9876",
    ),
    click.option("-t", "--topic", default="BenchmarkTest", show_default=True),
    click.option("-s", "--body-size", default=1024, show_default=True, type=click.IntRange(8)),
    click.option("-d", "--duration", default=10.0, show_default=True, help="seconds"),
    click.option("--count", default=0, help="stop after this many messages (0: use --duration)"),
    click.option("--report-interval", default=1.0, show_default=True),
    click.option(
        "--broker-pid", "broker_pids", multiple=True, type=int, help="report this process's CPU too"
    ),
]


def _acl() -> dict[str, Any]:
    """ACL credentials and TLS for every client of a run: ROCKETMQ_ACCESS_KEY / ROCKETMQ_SECRET_KEY,
    else $ROCKETMQ_HOME/conf/tools.yml (as RocketMQ's tools), none: unsigned requests; TLS with
    ROCKETMQ_TLS_ENABLE=true (see pocketmq.client.acl)."""
    from pocketmq.client.acl import tool_credentials, tool_tls_options

    creds = tool_credentials()
    acl = {"access_key": creds.access_key, "secret_key": creds.secret_key} if creds else {}
    return {**acl, **tool_tls_options()}


def common(fn: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(_common):
        fn = opt(fn)
    return fn


@bench.command()
@common
@click.option(
    "-w", "--inflight", default=1, show_default=True, type=click.IntRange(1), help="concurrent sends"
)
@click.option(
    "-b", "--batch", default=1, show_default=True, type=click.IntRange(1), help="messages per request"
)
@click.option("--group", default="benchmark_producer", show_default=True)
@click.option("--queues", default=8, show_default=True, help="queue count if the topic gets auto-created")
def produce(namesrv: str, topic: str, body_size: int, duration: float, count: int, report_interval: float,
            broker_pids: tuple[int, ...], inflight: int, batch: int, group: str, queues: int) -> None:  # fmt: skip
    """Send as fast as the in-flight window allows."""

    async def main() -> dict[str, Any]:
        meter = Meter("produce", body_size, broker_pids)
        body = os.urandom(body_size)
        stop = asyncio.Event()
        async with Producer(group, namesrv=namesrv, compress_msg_body_over_howmuch=1 << 30,
                            default_topic_queue_nums=queues, **_acl()) as producer:  # fmt: skip
            await producer.send(Message(topic, body))  # route + connection warm-up (counted as "warmup")
            meter.start()
            deadline = time.monotonic() + duration

            async def worker() -> None:
                while not stop.is_set():
                    t0 = time.perf_counter_ns()
                    try:
                        if batch > 1:
                            await producer.send_batch([Message(topic, body) for _ in range(batch)])
                        else:
                            await producer.send(Message(topic, body))
                    except Exception:
                        meter.errors += 1
                        continue
                    meter.latencies.append(time.perf_counter_ns() - t0)
                    meter.count += batch
                    if (count and meter.count >= count) or time.monotonic() > deadline:
                        stop.set()

            reporter = asyncio.create_task(
                _report(meter, report_interval, stop, duration=duration, count=count)
            )
            await asyncio.gather(*(worker() for _ in range(inflight)))
            stop.set()
            await reporter
            out = meter.summary()
        out.update(inflight=inflight, batch=batch, body_size=body_size, warmup=1)
        return out

    _run(main)


@bench.command()
@common
@click.option("--group", default="benchmark_consumer", show_default=True)
@click.option("--mode", type=click.Choice(["push", "lite"]), default="push", show_default=True)
@click.option("--from-first/--from-last", default=True, show_default=True)
@click.option("--batch-max", default=32, show_default=True, help="push: consume_message_batch_max_size")
@click.option(
    "--pull-batch", default=32, show_default=True, help="pull_batch_size (RocketMQ: push 32, lite 10)"
)
@click.option(
    "--queue-threshold", default=4000, show_default=True, help="pull_threshold_for_queue (RocketMQ: 1000)"
)
def consume(namesrv: str, topic: str, body_size: int, duration: float, count: int, report_interval: float,
            broker_pids: tuple[int, ...], group: str, mode: str, from_first: bool, batch_max: int,
            pull_batch: int, queue_threshold: int) -> None:  # fmt: skip
    """Drain the topic (offsets committed); latency = now - born timestamp (ms resolution)."""

    async def main() -> dict[str, Any]:
        meter = Meter("consume", body_size, broker_pids)
        stop = asyncio.Event()
        cfw = (
            ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
            if from_first
            else ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
        )

        def account(msgs: list[MessageExt]) -> None:
            if not meter.count:
                meter.start()
            now_ms = time.time_ns() // 1_000_000
            meter.latencies.extend((now_ms - m.born_timestamp) * 1_000_000 for m in msgs)
            meter.count += len(msgs)
            if count and meter.count >= count:
                stop.set()

        meter.start()
        reporter = asyncio.create_task(_report(meter, report_interval, stop, duration=duration, count=count))
        if mode == "push":

            async def listener(msgs: list[MessageExt], ctx: Any) -> Any:
                account(msgs)
                return CONSUME_SUCCESS

            consumer = PushConsumer(group, namesrv=namesrv, listener=listener, consume_from_where=cfw,
                                    consume_message_batch_max_size=batch_max, pull_batch_size=pull_batch,
                                    pull_threshold_for_queue=queue_threshold, **_acl())  # fmt: skip
            consumer.subscribe(topic)
            async with consumer:
                try:
                    await asyncio.wait_for(stop.wait(), duration)
                except TimeoutError:
                    pass
        else:
            lite = LitePullConsumer(group, namesrv=namesrv, consume_from_where=cfw, pull_batch_size=pull_batch,
                                    pull_threshold_for_queue=queue_threshold, **_acl())  # fmt: skip
            lite.subscribe(topic)
            async with lite:
                deadline = time.monotonic() + duration
                while not stop.is_set() and time.monotonic() < deadline:
                    msgs = await lite.poll(0.5)
                    if msgs:
                        account(msgs)
        stop.set()
        await reporter
        out = meter.summary()
        out.update(mode=mode, batch_max=batch_max, pull_batch=pull_batch, queue_threshold=queue_threshold)
        return out

    _run(main)


@bench.command()
@common
@click.option(
    "-r", "--rate", default=2000, show_default=True, type=click.IntRange(1), help="messages per second"
)
@click.option("--group", default="benchmark_e2e", show_default=True)
def e2e(namesrv: str, topic: str, body_size: int, duration: float, count: int, report_interval: float,
        broker_pids: tuple[int, ...], rate: int, group: str) -> None:  # fmt: skip
    """Fixed-rate producer + push consumer; latency from send to listener, in µs."""

    async def main() -> dict[str, Any]:
        meter = Meter("e2e", body_size, broker_pids)
        stop = asyncio.Event()
        filler = os.urandom(max(body_size - _STAMP.size, 0))

        async def listener(msgs: list[MessageExt], ctx: Any) -> Any:
            now = time.perf_counter_ns()
            for m in msgs:
                if len(m.body) >= _STAMP.size:
                    meter.latencies.append(now - _STAMP.unpack_from(m.body)[0])
            meter.count += len(msgs)
            return CONSUME_SUCCESS

        async with Producer(
            group + "_p", namesrv=namesrv, compress_msg_body_over_howmuch=1 << 30, **_acl()
        ) as producer:
            await producer.send(Message(topic, b"warm-up"))
            consumer = PushConsumer(group, namesrv=namesrv, listener=listener,
                                    consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, **_acl())  # fmt: skip
            consumer.subscribe(topic)
            async with consumer:
                await asyncio.sleep(2.0)  # let the rebalance assign queues and pulls park
                meter.latencies.clear()
                meter.count = 0
                meter.start()
                reporter = asyncio.create_task(
                    _report(meter, report_interval, stop, duration=duration, count=count)
                )
                interval = 1.0 / rate
                sent = 0
                begin = time.monotonic()
                total = count or int(rate * duration)
                while sent < total:
                    # Send every message that is due, then sleep until the next one is. Never
                    # less than 1 ms: uvloop's timers tick in ms and a shorter asyncio.sleep
                    # returns at once, so sub-ms waits would spin and steal the CPU that the
                    # broker and the consumer need (the e2e latency measured would be ours).
                    due = min(total, int((time.monotonic() - begin) / interval) + 1)
                    while sent < due:
                        try:
                            producer.send_async(Message(topic, _STAMP.pack(time.perf_counter_ns()) + filler))
                        except Exception:
                            meter.errors += 1
                        sent += 1
                    delay = begin + sent * interval - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(max(delay, 0.001))
                deadline = time.monotonic() + 5.0
                while meter.count < sent - meter.errors and time.monotonic() < deadline:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
                stop.set()
                await reporter
                out = meter.summary()
        out.update(rate=rate, sent=sent)
        return out

    _run(main)


def main() -> None:  # pragma: no cover - console entry
    bench(prog_name="pocketmq bench")


if __name__ == "__main__":  # pragma: no cover
    main()
    sys.exit(0)
