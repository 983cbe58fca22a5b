"""Scenario drivers (Java, Go) from pytest: one process runs a group of named scenarios.

A JVM start costs ~1 s, so the Java driver (``java/``) runs a whole group of scenarios, several
at once, in one process; the Go driver (``go/``) does the same. Each prints one JSON line per
scenario (``{"event":"result","scenario","ok","detail","ms"}``) and a summary. A test module
runs a group once (a module-scoped fixture) and has one test per scenario that asserts on its
line, so every scenario is reported on its own and can carry its own ``xfail``.

Prerequisites fail loudly (:class:`InteropUnavailable` names the make target), never skip.
The builds live in the repository's ignored ``.cache/`` folder (``make java-deps go-deps``).
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.interop.drivers import InteropUnavailable
from tests.interop.procs import run_driver

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache"
JAVA_CLASSES = CACHE / "java-driver" / "classes"
JAVA_LIB = CACHE / "java-driver" / "lib"
GO_BINARY = CACHE / "go-driver" / "godriver"
#: JVM flags for a short-lived client process (small heap, quick start).
JVM_FLAGS = ["-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


@functools.cache
def java_available() -> str:
    """The java executable; raises InteropUnavailable when it or the built driver is missing."""
    java = shutil.which("java")
    if java is None:
        raise InteropUnavailable("`java` is not on PATH: install a JDK (17) to run the Java client tests")
    if not (JAVA_CLASSES / "pocketmq" / "interop" / "Driver.class").exists() or not any(
        JAVA_LIB.glob("*.jar")
    ):
        raise InteropUnavailable(
            f"the Java driver is not built in {JAVA_CLASSES.parent}: run `make java-deps`"
        )
    return java


@functools.cache
def go_available() -> Path:
    """The built Go driver; raises InteropUnavailable when it is missing."""
    if not GO_BINARY.exists():
        raise InteropUnavailable(f"the Go driver is not built at {GO_BINARY}: run `make go-deps`")
    return GO_BINARY


@dataclass
class ScenarioResults:
    """What one driver run said about each scenario (or why it could not run at all)."""

    results: dict[str, dict[str, Any]]
    failure: str | None = None  # the whole group failed before the driver ran (servers, build)
    stderr_tail: str = ""

    def check(self, scenario: str) -> dict[str, Any]:
        """The scenario's result line; raises AssertionError with the reason when it failed."""
        if self.failure is not None:
            raise AssertionError(f"{scenario}: group did not run: {self.failure}")
        line = self.results.get(scenario)
        if line is None:
            raise AssertionError(f"{scenario}: no result line from the driver\n{self.stderr_tail}")
        if not line.get("ok"):
            raise AssertionError(f"{scenario}: {line.get('detail')}")
        return line


def java_argv(namesrv: str, scenarios: Sequence[str], log_dir: Path, **options: str) -> list[str]:
    java = java_available()
    argv = [java, *JVM_FLAGS, f"-Drocketmq.client.logRoot={log_dir}", f"-Duser.home={log_dir}"]
    argv += [
        "-Drocketmq.client.logLevel=WARN",
        "-cp",
        f"{JAVA_CLASSES}:{JAVA_LIB}/*",
        "pocketmq.interop.Driver",
    ]
    argv += ["--namesrv", namesrv, "--scenarios", ",".join(scenarios)]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", value]
    return argv


def go_argv(namesrv: str, scenarios: Sequence[str], **options: str) -> list[str]:
    argv = [str(go_available()), "--namesrv", namesrv, "--scenarios", ",".join(scenarios)]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", value]
    return argv


def run_group(argv: list[str], log_dir: Path, timeout: float = 180) -> ScenarioResults:
    """Run a driver over a group of scenarios and collect its result lines."""
    log_dir.mkdir(parents=True, exist_ok=True)
    result = run_driver(argv, log_dir, timeout)
    lines = {e["scenario"]: e for e in result.of("result")}
    return ScenarioResults(lines, stderr_tail=result.stderr[-3000:])


def failed_group(why: BaseException) -> ScenarioResults:
    return ScenarioResults({}, failure=f"{type(why).__name__}: {why}")


def group_on_servers(
    root: Path,
    make_argv: Any,
    broker_keys: dict[str, str] | None = None,
    timeout: float = 180,
    topics: Sequence[str] = (),
    before: Any = None,
) -> ScenarioResults:
    """Start pocketmq's ``mqnamesrv`` + ``mqbroker`` processes under ``root`` with ``broker_keys``
    and run ``make_argv(namesrv_addr)``; a broker that refuses to start fails the whole group
    (with its log tail), which is how a feature that is not built yet shows up today.
    ``topics`` are created (4 queues) before the broker starts; ``before(namesrv_addr)`` runs
    once the servers are up, before the driver."""
    from pocketmq.testing.procs import Servers

    s = Servers(root, broker_keys)
    for topic in topics:
        s.precreate_topic(topic, 4)
    try:
        s.start()
    except Exception as exc:  # noqa: BLE001 - reported per scenario
        diag = s.diagnostics()
        s.stop()
        return ScenarioResults({}, failure=f"servers did not start ({exc}):\n{diag[-1500:]}")
    try:
        if before is not None:
            before(s.namesrv.addr)
        return run_group(make_argv(s.namesrv.addr), root / "driver", timeout)
    finally:
        s.stop()


#: What :func:`produce_with_sdk` sends, for the drivers' ``sdk_produced`` scenarios to check.
SDK_MESSAGES = 20
SDK_BIG_EVERY = 5  # every 5th body is 6 KiB: the SDK sends it zlib-compressed


def sdk_body(i: int) -> bytes:
    return (b"sdk-%d " % i) * (1000 if i % SDK_BIG_EVERY == 0 else 1)


def produce_with_sdk(namesrv: str, topic: str) -> None:
    """pocketmq's SDK sends :data:`SDK_MESSAGES` messages (tags ``FromSdk``, keys ``sdk-<i>``,
    property ``origin=pocketmq-sdk``) that another client's driver then consumes."""
    import asyncio

    from pocketmq.client import Message, Producer

    async def send() -> None:
        async with Producer("SdkInteropProducer", namesrv=namesrv) as producer:
            for i in range(SDK_MESSAGES):
                msg = Message(
                    topic, sdk_body(i), tags="FromSdk", keys=f"sdk-{i}", properties={"origin": "pocketmq-sdk"}
                )
                await producer.send(msg)

    asyncio.run(send())
