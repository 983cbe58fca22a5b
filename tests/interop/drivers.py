"""Run the real C++ client (``cpp_driver.py``) and ali-ons (``js/driver.js``) from pytest.

Both drivers share one CLI and print JSON lines (see their docstrings). This module builds the
command lines, runs them as subprocesses with hard timeouts, parses the lines and never leaves a
process behind (every child gets its own session and is SIGKILLed on timeout or at interpreter
exit).

Prerequisites are checked loudly: :func:`cpp_available` / :func:`node_available` RAISE
:class:`InteropUnavailable` with the fix in the message -- interop tests must fail, not skip.

Sync vs async: a broker running *in the test's own event loop* would be starved by a blocking
``subprocess.run``; use the ``*_async`` functions and :class:`AsyncConsumerHandle` there. The sync
variants are for servers running in other processes/threads.

    from tests.interop import drivers
    drivers.cpp_available()
    sent = drivers.run_cpp_produce(namesrv, "T", 10, tags="TagA")
    with drivers.start_js_consumer(namesrv, "T", expect=10, timeout=60) as consumer:
        msgs = consumer.wait_messages(10, timeout=60)
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from tests.interop.procs import (
    AsyncConsumerHandle,
    ConsumerHandle,
    DriverError,
    DriverResult,
    run_driver,
    run_driver_async,
)

__all__ = [
    "AsyncConsumerHandle",
    "ConsumerHandle",
    "DriverError",
    "DriverResult",
    "InteropUnavailable",
    "available",
    "consume_argv",
    "cpp_available",
    "node_available",
    "produce",
    "produce_argv",
    "produce_async",
    "run_cpp_produce",
    "run_cpp_produce_async",
    "run_js_produce",
    "run_js_produce_async",
    "start_consumer",
    "start_consumer_async",
    "start_cpp_consumer",
    "start_cpp_consumer_async",
    "start_js_consumer",
    "start_js_consumer_async",
    "unique_group",
]

Client = Literal["cpp", "js"]

HERE = Path(__file__).resolve().parent
CPP_DRIVER = HERE / "cpp_driver.py"
JS_DIR = HERE / "js"
JS_DRIVER = JS_DIR / "driver.js"
ALI_ONS_VERSION = "3.12.0"


class InteropUnavailable(RuntimeError):
    """A real client cannot run here; the message says how to fix it."""


# ---- prerequisites ---------------------------------------------------------------------------


def cpp_python() -> str:
    return os.environ.get("POCKETMQ_CPP_PYTHON", sys.executable)


@functools.cache
def cpp_available() -> str:
    """Return librocketmq's wheel version; raise InteropUnavailable if the C++ client cannot load."""
    probe = "import rocketmq.client, importlib.metadata as m; print(m.version('rocketmq'))"
    try:
        proc = subprocess.run(
            [cpp_python(), "-c", probe], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InteropUnavailable(f"C++ client probe could not run {cpp_python()}: {exc}") from exc
    if proc.returncode != 0:
        raise InteropUnavailable(
            "C++ RocketMQ client unavailable: `import rocketmq.client` failed in "
            f"{cpp_python()} (install the dev extra: `make install`, wheel rocketmq==0.4.4, "
            f"x86_64 Linux only).\n{proc.stderr.strip()[-2000:]}"
        )
    return proc.stdout.strip()


@functools.cache
def node_available() -> str:
    """Return the node version; raise InteropUnavailable if node or ali-ons is missing."""
    node = shutil.which("node")
    if node is None:
        raise InteropUnavailable("`node` is not on PATH: install Node.js >= 14 to run the ali-ons tests")
    pkg = JS_DIR / "node_modules" / "ali-ons" / "package.json"
    if not pkg.exists() or not (JS_DIR / "node_modules" / "urllib").exists():
        raise InteropUnavailable(f"ali-ons is not installed in {JS_DIR}: run `make js-deps`")
    version = json.loads(pkg.read_text())["version"]
    if version != ALI_ONS_VERSION:
        raise InteropUnavailable(
            f"ali-ons {version} installed, {ALI_ONS_VERSION} expected: run `make js-deps`"
        )
    proc = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=False)
    return proc.stdout.strip()


def available(client: Client) -> str:
    return cpp_available() if client == "cpp" else node_available()


# ---- command lines ---------------------------------------------------------------------------


def _base_argv(client: Client) -> list[str]:
    if client == "cpp":
        return [cpp_python(), str(CPP_DRIVER)]
    return [shutil.which("node") or "node", str(JS_DRIVER)]


def unique_group(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def produce_argv(
    client: Client,
    namesrv: str,
    topic: str,
    count: int,
    *,
    group: str | None = None,
    tags: str | None = None,
    keys_prefix: str | None = None,
    body_size: int | None = None,
    props: Mapping[str, str] | None = None,
    orderly_key: str | None = None,
    batch: bool = False,
    oneway: bool = False,
    delay_level: int = 0,
    linger: float = 0.0,
    keep_going: bool = False,
    log_dir: Path | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    argv = [*_base_argv(client), "produce", "--namesrv", namesrv, "--topic", topic, "--count", str(count)]
    argv += ["--group", group or unique_group("PG")]
    for flag, value in (("--tags", tags), ("--keys-prefix", keys_prefix), ("--orderly-key", orderly_key)):
        if value is not None:
            argv += [flag, value]
    if body_size is not None:
        argv += ["--body-size", str(body_size)]
    for key, value in (props or {}).items():
        argv += ["--prop", f"{key}={value}"]
    argv += ["--batch"] * batch + ["--oneway"] * oneway + ["--keep-going"] * keep_going
    if delay_level:
        argv += ["--delay-level", str(delay_level)]
    if linger:
        argv += ["--linger", str(linger)]
    if client == "cpp" and log_dir is not None:
        argv += ["--log-dir", str(log_dir)]
    return [*argv, *extra]


def consume_argv(
    client: Client,
    namesrv: str,
    topic: str,
    expect: int,
    timeout: float,
    *,
    group: str | None = None,
    expr: str = "*",
    broadcast: bool = False,
    orderly: bool = False,
    fail_first: int = 0,
    linger: float = 0.0,
    from_where: str | None = None,
    max_reconsume_times: int | None = None,
    prop_keys: Sequence[str] = (),
    log_dir: Path | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    argv = [*_base_argv(client), "consume", "--namesrv", namesrv, "--topic", topic]
    argv += ["--group", group or unique_group("CG"), "--expr", expr]
    argv += ["--expect", str(expect), "--timeout", str(timeout)]
    argv += ["--broadcast"] * broadcast + ["--orderly"] * orderly
    if fail_first:
        argv += ["--fail-first", str(fail_first)]
    if linger:
        argv += ["--linger", str(linger)]
    if from_where is not None:  # ali-ons only; librocketmq 1.x's C API cannot set it
        argv += ["--from-where", from_where]
    if max_reconsume_times is not None:  # ali-ons only
        argv += ["--max-reconsume-times", str(max_reconsume_times)]
    for key in prop_keys:  # C++ only (ali-ons reports every property anyway)
        argv += ["--prop-key", key]
    if client == "cpp" and log_dir is not None:
        argv += ["--log-dir", str(log_dir)]
    return [*argv, *extra]


#: where drivers without an explicit ``log_dir`` keep their logs; tests/interop/conftest.py points
#: it into pytest's temporary directory (the last few runs are kept there for post-mortems, older
#: ones are removed by pytest) instead of leaving one directory per driver run in /tmp
LOG_ROOT: Path | None = None


def _new_log_dir(log_dir: Path | None, client: Client) -> Path:
    path = (
        log_dir if log_dir is not None else Path(tempfile.mkdtemp(prefix=f"pocketmq-{client}-", dir=LOG_ROOT))
    )
    path.mkdir(parents=True, exist_ok=True)
    return path


def _checked(result: DriverResult, what: str, check: bool) -> DriverResult:
    if check and not result.ok:
        raise DriverError(f"{what} failed", result)
    return result


def _produce_setup(
    client: Client, namesrv: str, topic: str, count: int, log_dir: Path | None, opts: dict[str, Any]
) -> tuple[list[str], Path]:
    """What :func:`produce` and :func:`produce_async` share: the client check, log dir and argv."""
    available(client)
    log_dir = _new_log_dir(log_dir, client)
    return produce_argv(client, namesrv, topic, count, log_dir=log_dir, **opts), log_dir


def produce(
    client: Client, namesrv: str, topic: str, count: int, *, timeout: float = 60.0, check: bool = True,
    log_dir: Path | None = None, **opts: Any,
) -> DriverResult:  # fmt: skip
    argv, log_dir = _produce_setup(client, namesrv, topic, count, log_dir, opts)
    return _checked(run_driver(argv, log_dir, timeout), f"{client} produce", check)


async def produce_async(
    client: Client, namesrv: str, topic: str, count: int, *, timeout: float = 60.0, check: bool = True,
    log_dir: Path | None = None, **opts: Any,
) -> DriverResult:  # fmt: skip
    argv, log_dir = _produce_setup(client, namesrv, topic, count, log_dir, opts)
    return _checked(await run_driver_async(argv, log_dir, timeout), f"{client} produce", check)


def run_cpp_produce(namesrv: str, topic: str, count: int, **opts: Any) -> list[dict[str, Any]]:
    """Sync C++ produce; returns the ``sent`` events (raises DriverError unless all were sent)."""
    return produce("cpp", namesrv, topic, count, **opts).sent


def run_js_produce(namesrv: str, topic: str, count: int, **opts: Any) -> list[dict[str, Any]]:
    return produce("js", namesrv, topic, count, **opts).sent


async def run_cpp_produce_async(namesrv: str, topic: str, count: int, **opts: Any) -> list[dict[str, Any]]:
    return (await produce_async("cpp", namesrv, topic, count, **opts)).sent


async def run_js_produce_async(namesrv: str, topic: str, count: int, **opts: Any) -> list[dict[str, Any]]:
    return (await produce_async("js", namesrv, topic, count, **opts)).sent


def _consume_setup(
    client: Client, namesrv: str, topic: str, expect: int, timeout: float, log_dir: Path | None,
    opts: dict[str, Any],
) -> tuple[list[str], Path]:  # fmt: skip
    """What :func:`start_consumer` and :func:`start_consumer_async` share."""
    available(client)
    log_dir = _new_log_dir(log_dir, client)
    return consume_argv(client, namesrv, topic, expect, timeout, log_dir=log_dir, **opts), log_dir


def start_consumer(
    client: Client, namesrv: str, topic: str, *, expect: int, timeout: float, log_dir: Path | None = None,
    **opts: Any,
) -> ConsumerHandle:  # fmt: skip
    argv, log_dir = _consume_setup(client, namesrv, topic, expect, timeout, log_dir, opts)
    return ConsumerHandle(client, argv, log_dir, timeout)


async def start_consumer_async(
    client: Client, namesrv: str, topic: str, *, expect: int, timeout: float, log_dir: Path | None = None,
    **opts: Any,
) -> AsyncConsumerHandle:  # fmt: skip
    argv, log_dir = _consume_setup(client, namesrv, topic, expect, timeout, log_dir, opts)
    return await AsyncConsumerHandle(client, argv, log_dir, timeout)._start()


def start_cpp_consumer(namesrv: str, topic: str, **opts: Any) -> ConsumerHandle:
    return start_consumer("cpp", namesrv, topic, **opts)


def start_js_consumer(namesrv: str, topic: str, **opts: Any) -> ConsumerHandle:
    return start_consumer("js", namesrv, topic, **opts)


async def start_cpp_consumer_async(namesrv: str, topic: str, **opts: Any) -> AsyncConsumerHandle:
    return await start_consumer_async("cpp", namesrv, topic, **opts)


async def start_js_consumer_async(namesrv: str, topic: str, **opts: Any) -> AsyncConsumerHandle:
    return await start_consumer_async("js", namesrv, topic, **opts)
