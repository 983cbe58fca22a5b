"""Re-capture the golden frames in tests/data/frames/ from the real C++ client and ali-ons.

    cd /work/main && .venv/bin/python -m tests.interop.capture_golden [--out tests/data/frames]
        [--work /tmp/pocketmq-capture] [--only cpp_producer,js_consumer]

Each scenario gets its own in-process :class:`~tests.interop.capture.FakeCluster` (fake namesrv +
broker on one loopback port, recording every inbound frame), drives the real clients through
:mod:`tests.interop.drivers`, then copies the first frame matching each :class:`Pick` verbatim to
``<out>/<name>.bin``. Scenarios run concurrently; the two producer scenarios linger 35 s so the
clients' 30 s heartbeat timer fires, which bounds the whole run to roughly 45 s.

Frames embed wall-clock timestamps, pids, the host IP and (C++) HMAC signatures, so a re-capture
never reproduces the bytes exactly; the structure is what the golden tests pin down.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.interop import drivers
from tests.interop.capture import FakeCluster
from tests.interop.wire import Frame, decode_frame

TOPIC = "TopicTest"
LINGER = 35.0  # > the 30 s heartbeat interval of both clients


@dataclass(slots=True)
class Pick:
    name: str
    code: int
    pred: Callable[[Frame], bool] = lambda f: True
    first_of_connection: bool = False


@dataclass(slots=True)
class Scenario:
    name: str
    client: drivers.Client
    run: Callable[[FakeCluster, Path], Awaitable[None]]
    picks: list[Pick]
    offset_not_found: bool = False
    notes: list[str] = field(default_factory=list)


def _topic_is(topic: str) -> Callable[[Frame], bool]:
    return lambda f: f.ext_str("topic") == topic or f.ext_str("b") == topic


def _body_json(f: Frame) -> dict[str, Any]:
    return json.loads(f.body.decode("utf-8")) if f.body else {}


def _has_consumer(f: Frame) -> bool:
    return bool(_body_json(f).get("consumerDataSet"))


def _producer_only(f: Frame) -> bool:
    body = _body_json(f)
    return bool(body.get("producerDataSet")) and not body.get("consumerDataSet")


def _consumer_sub_with_tags(f: Frame) -> bool:
    subs = [s for c in _body_json(f).get("consumerDataSet") or [] for s in c.get("subscriptionDataSet") or []]
    return any(s.get("topic") == TOPIC and s.get("tagsSet") for s in subs)


def _committed(f: Frame) -> bool:
    return f.ext_str("topic") == TOPIC and f.ext_int("commitOffset", -1) > 0


def _group(ext_key: str) -> Callable[[Frame], bool]:
    return lambda f: bool(f.ext_str(ext_key))


# ---- scenario bodies ---------------------------------------------------------------------------


def _producer(client: drivers.Client, **opts: Any) -> Callable[[FakeCluster, Path], Awaitable[None]]:
    count = opts.pop("count", 1)

    async def run(cluster: FakeCluster, work: Path) -> None:
        await drivers.produce_async(
            client, cluster.addr, TOPIC, count, group=f"PG_GOLDEN_{client.upper()}",
            log_dir=work / "producer", timeout=LINGER + 60, **opts,
        )  # fmt: skip

    return run


def _consumer(
    client: drivers.Client, count: int = 2, produce_opts: dict[str, Any] | None = None, timeout: float = 30.0,
    check: bool = True, consumer_first: bool = False, **opts: Any,
) -> Callable[[FakeCluster, Path], Awaitable[None]]:  # fmt: skip
    """Produce ``count`` TagA messages and consume them with the same client.

    ``consumer_first``: start the consumer, give it time to rebalance, then produce (needed when
    the consumer starts at the queue's max offset, e.g. C++ broadcasting).
    """

    async def produce(cluster: FakeCluster, work: Path) -> None:
        await drivers.produce_async(
            client, cluster.addr, TOPIC, count, group=f"PG_GOLDEN_{client.upper()}", tags="TagA",
            keys_prefix="KEY", log_dir=work / "producer", **(produce_opts or {}),
        )  # fmt: skip

    async def run(cluster: FakeCluster, work: Path) -> None:
        if not consumer_first:
            await produce(cluster, work)
        handle = await drivers.start_consumer_async(
            client, cluster.addr, TOPIC, expect=count if check else 1, timeout=timeout,
            group=f"CG_GOLDEN_{client.upper()}", log_dir=work / "consumer", **opts,
        )  # fmt: skip
        if consumer_first:
            await handle.wait_started()
            await asyncio.sleep(3.0)
            await produce(cluster, work)
        result = await handle.wait()
        if check and not result.ok:
            raise drivers.DriverError("golden consumer did not finish", result)

    return run


def _producer_scenario(client: drivers.Client, prefix: str, send: str, send_code: int) -> Scenario:
    """One message with tags, keys and a property, lingering past the heartbeat timer."""
    return Scenario(
        f"{client}_producer",
        client,
        _producer(client, tags="TagA", keys_prefix="KEY", props={"color": "red"}, linger=LINGER),
        [
            Pick(f"{prefix}_get_routeinfo_by_topic", 105, _topic_is(TOPIC), first_of_connection=True),
            Pick(f"{prefix}_{send}", send_code, _topic_is(TOPIC)),
            Pick(f"{prefix}_heart_beat_producer", 34, _producer_only),
            Pick(f"{prefix}_unregister_client_producer", 35, _group("producerGroup")),
        ],
    )


def _consumer_scenario(
    client: drivers.Client, prefix: str, run: Callable[[FakeCluster, Path], Awaitable[None]],
    after_pull: list[Pick],
) -> Scenario:  # fmt: skip
    """A consumer that fails its first message once: every frame of the consume cycle."""
    return Scenario(
        f"{client}_consumer",
        client,
        run,
        [
            Pick(f"{prefix}_heart_beat_consumer", 34, _consumer_sub_with_tags),
            Pick(f"{prefix}_get_consumer_list_by_group", 38),
            Pick(f"{prefix}_query_consumer_offset", 14, _topic_is(TOPIC)),
            Pick(f"{prefix}_pull_message", 11, _topic_is(TOPIC)),
            *after_pull,
            Pick(f"{prefix}_consumer_send_msg_back", 36),
            Pick(f"{prefix}_update_consumer_offset", 15, _committed),
            Pick(f"{prefix}_unregister_client_consumer", 35, _group("consumerGroup")),
        ],
    )


def _broadcast_scenario(
    client: drivers.Client, prefix: str, run: Callable[[FakeCluster, Path], Awaitable[None]]
) -> Scenario:
    return Scenario(
        f"{client}_broadcast",
        client,
        run,
        [Pick(f"{prefix}_heart_beat_consumer_broadcast", 34, _has_consumer)],
    )


def _offset_not_found_scenario(client: drivers.Client, prefix: str) -> Scenario:
    return Scenario(
        f"{client}_offset_not_found",
        client,
        _consumer(client, count=1, timeout=8.0, check=False),
        [Pick(f"{prefix}_get_max_offset", 30, _topic_is(TOPIC))],
        offset_not_found=True,
    )


def _cpp_scenarios() -> list[Scenario]:
    return [
        _producer_scenario("cpp", "cpp", "send_message", 10),
        Scenario(
            "cpp_batch",
            "cpp",
            _producer("cpp", count=3, tags="TagA", keys_prefix="KEY", props={"color": "red"}, batch=True),
            [Pick("cpp_send_message_batch", 10, lambda f: f.ext_str("batch") == "1")],
        ),
        Scenario(
            "cpp_oneway",
            "cpp",
            _producer("cpp", tags="TagA", keys_prefix="KEY", oneway=True),
            [Pick("cpp_send_message_oneway", 10, _topic_is(TOPIC))],
        ),
        _consumer_scenario(
            "cpp",
            "cpp",
            # linger: re-pulls after consumption carry the COMMIT_OFFSET flag (the fake holds pulls 2 s)
            _consumer("cpp", expr="TagA || TagB", fail_first=1, linger=3.0),
            [Pick("cpp_pull_message_commit", 11, lambda f: f.ext_int("sysFlag") & 1 == 1)],
        ),
        Scenario(
            "cpp_orderly",
            "cpp",
            _consumer("cpp", produce_opts={"orderly_key": "1"}, orderly=True),
            [Pick("cpp_lock_batch_mq", 41), Pick("cpp_unlock_batch_mq", 42)],
        ),
        _broadcast_scenario("cpp", "cpp", _consumer("cpp", broadcast=True, consumer_first=True)),
        _offset_not_found_scenario("cpp", "cpp"),
    ]


def _js_scenarios() -> list[Scenario]:
    return [
        _producer_scenario("js", "alions", "send_message_v2", 310),
        _consumer_scenario(
            "js", "alions", _consumer("js", expr="TagA || TagB", fail_first=1, from_where="first"), []
        ),
        _broadcast_scenario("js", "alions", _consumer("js", broadcast=True, from_where="first")),
        _offset_not_found_scenario("js", "alions"),
    ]


# ---- runner ------------------------------------------------------------------------------------


async def run_scenario(sc: Scenario, work: Path, out: Path) -> list[dict[str, Any]]:
    cluster = FakeCluster(work / sc.name / "frames", offset_not_found=sc.offset_not_found)
    await cluster.start()
    try:
        await sc.run(cluster, work / sc.name)
    finally:
        await cluster.close()
    picked: list[dict[str, Any]] = []
    first_seq: dict[int, int] = {}
    for entry in cluster.frames:
        first_seq.setdefault(entry["conn"], entry["seq"])
    for pick in sc.picks:
        for entry in cluster.frames:
            if entry["code"] != pick.code:
                continue
            raw = (work / sc.name / "frames" / entry["file"]).read_bytes()
            frame = decode_frame(raw)
            if not pick.pred(frame):
                continue
            if pick.first_of_connection and first_seq[entry["conn"]] != entry["seq"]:
                raise AssertionError(f"{pick.name}: not the first frame of its connection ({entry})")
            (out / f"{pick.name}.bin").write_bytes(raw)
            picked.append(
                {"scenario": sc.name, "file": f"{pick.name}.bin", "seq": entry["seq"], "len": len(raw)}
            )
            break
        else:
            picked.append({"scenario": sc.name, "file": f"{pick.name}.bin", "missing": True})
    return picked


async def main_async(args: argparse.Namespace) -> int:
    scenarios = _cpp_scenarios() + _js_scenarios()
    if args.only:
        wanted = set(args.only.split(","))
        scenarios = [s for s in scenarios if s.name in wanted]
    for client in {s.client for s in scenarios}:
        drivers.available(client)
    out, work = Path(args.out), Path(args.work)
    sem = asyncio.Semaphore(args.parallel)

    async def guarded(sc: Scenario) -> list[dict[str, Any]]:
        async with sem:
            return await run_scenario(sc, work, out)

    results = await asyncio.gather(*(guarded(s) for s in scenarios), return_exceptions=True)
    failed = 0
    for sc, res in zip(scenarios, results, strict=True):
        if isinstance(res, BaseException):
            failed += 1
            print(json.dumps({"scenario": sc.name, "error": repr(res)[:3000]}))
            continue
        for item in res:
            failed += bool(item.get("missing"))
            print(json.dumps(item))
    return 1 if failed else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "data" / "frames"))
    parser.add_argument("--work", default="/tmp/pocketmq-capture")
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--parallel", type=int, default=6)
    args = parser.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    sys.exit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
