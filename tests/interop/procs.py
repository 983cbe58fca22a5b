"""Subprocess layer for the interop drivers: run, parse JSON lines, never leak a process.

Every child runs in its own session (``start_new_session``) so a timeout kills it and anything it
spawned with one ``killpg``; children still alive at interpreter exit are SIGKILLed. Use the public
API in :mod:`tests.interop.drivers`; this module holds the mechanics.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Grace on top of a driver's own --timeout before we kill it (start-up + shutdown time).
KILL_SLACK = 30.0


class DriverError(RuntimeError):
    """A driver exited badly; carries the parsed result for diagnostics."""

    def __init__(self, message: str, result: DriverResult) -> None:
        super().__init__(f"{message}\n{result.describe()}")
        self.result = result


# ---- results ---------------------------------------------------------------------------------


@dataclass(slots=True)
class DriverResult:
    argv: list[str]
    returncode: int | None
    events: list[dict[str, Any]]
    stderr: str
    log_dir: Path

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == kind]

    @property
    def sent(self) -> list[dict[str, Any]]:
        return self.of("sent")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.of("message")

    @property
    def summary(self) -> dict[str, Any] | None:
        found = self.of("summary")
        return found[-1] if found else None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and bool(self.summary and self.summary.get("ok"))

    def describe(self) -> str:
        tail = "\n".join(self.stderr.splitlines()[-40:])
        return (
            f"argv: {' '.join(self.argv)}\nreturncode: {self.returncode}\nsummary: {self.summary}\n"
            f"events: {len(self.events)}\nlog dir: {self.log_dir}\nstderr tail:\n{tail}"
        )


def _parse_line(line: str) -> dict[str, Any] | None:
    line = line.strip()
    if not line:
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        return {"event": "garbage", "line": line}
    return obj if isinstance(obj, dict) else {"event": "garbage", "line": line}


# ---- process bookkeeping ---------------------------------------------------------------------

_LIVE: set[int] = set()
_LIVE_LOCK = threading.Lock()


def _track(pid: int) -> None:
    with _LIVE_LOCK:
        _LIVE.add(pid)


def _untrack(pid: int) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(pid)


@atexit.register
def _kill_leftovers() -> None:
    with _LIVE_LOCK:
        pids = list(_LIVE)
    for pid in pids:  # only processes this module started, each in its own session
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def _env(log_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["HOME"] = str(log_dir)  # librocketmq logs to $HOME/logs; keep it out of the repo and ~
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _read_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


# ---- one-shot runs (produce, or a consume you just wait for) ---------------------------------


def run_driver(argv: list[str], log_dir: Path, timeout: float) -> DriverResult:
    """Run a driver to completion (sync). Kills it after ``timeout`` seconds."""
    stderr_path = log_dir / f"driver-{uuid.uuid4().hex[:6]}.stderr"
    with stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=err, env=_env(log_dir), start_new_session=True, cwd=log_dir
        )
        _track(proc.pid)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        finally:
            _untrack(proc.pid)
    events = [e for e in map(_parse_line, out.decode("utf-8", "replace").splitlines()) if e]
    return DriverResult(argv, proc.returncode, events, _read_text(stderr_path), log_dir)


async def run_driver_async(argv: list[str], log_dir: Path, timeout: float) -> DriverResult:
    stderr_path = log_dir / f"driver-{uuid.uuid4().hex[:6]}.stderr"
    with stderr_path.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=subprocess.PIPE, stderr=err, env=_env(log_dir), start_new_session=True, cwd=log_dir
        )
        _track(proc.pid)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            _kill_group(proc.pid, signal.SIGKILL)
            out, _ = await proc.communicate()
        finally:
            _untrack(proc.pid)
    events = [e for e in map(_parse_line, out.decode("utf-8", "replace").splitlines()) if e]
    return DriverResult(argv, proc.returncode, events, _read_text(stderr_path), log_dir)


# ---- long-running consumers ------------------------------------------------------------------


@dataclass(slots=True)
class _EventLog:
    events: list[dict[str, Any]] = field(default_factory=list)
    acked: set[str] = field(default_factory=set)
    eof: bool = False  # the driver closed stdout (it exited or is exiting)

    def feed(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        if event.get("event") == "message" and event.get("acked"):
            self.acked.add(str(event.get("identity")))

    @property
    def started(self) -> bool:
        return any(e.get("event") in ("started", "summary") for e in self.events)

    def messages(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == "message"]


class ConsumerHandle:
    """A consumer driver running in the background (sync API, reader thread)."""

    def __init__(self, client: str, argv: list[str], log_dir: Path, timeout: float) -> None:
        self.client, self.argv, self.log_dir, self.timeout = client, argv, log_dir, timeout
        self._stderr_path = log_dir / f"consumer-{uuid.uuid4().hex[:6]}.stderr"
        self._stderr = self._stderr_path.open("wb")
        self._log = _EventLog()
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=self._stderr, env=_env(log_dir), start_new_session=True,
            cwd=log_dir,
        )  # fmt: skip
        _track(self.proc.pid)
        self._reader = threading.Thread(target=self._read, name=f"{client}-consumer-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            event = _parse_line(raw.decode("utf-8", "replace"))
            if event is not None:
                with self._cond:
                    self._log.feed(event)
                    self._cond.notify_all()
        with self._cond:
            self._log.eof = True
            self._cond.notify_all()

    def _wait_until(self, pred: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._log.eof:
                    if pred():
                        return
                    raise DriverError(f"{self.client} consumer: {what}", self._result())
                self._cond.wait(min(remaining, 0.5))

    def wait_started(self, timeout: float = 60.0) -> None:
        """Wait for the ``started`` line (client started; rebalance may still be in progress)."""
        self._wait_until(lambda: self._log.started, timeout, "did not start")

    def wait_messages(self, expect: int, timeout: float | None = None) -> list[dict[str, Any]]:
        """Wait until ``expect`` distinct messages were acked; returns every delivery so far."""
        self._wait_until(
            lambda: len(self._log.acked) >= expect, timeout or self.timeout, f"<{expect} messages"
        )
        with self._cond:
            return self._log.messages()

    @property
    def messages(self) -> list[dict[str, Any]]:
        with self._cond:
            return self._log.messages()

    def wait(self, timeout: float | None = None) -> DriverResult:
        """Wait for the driver to exit by itself (expectation met or its --timeout)."""
        try:
            self.proc.wait(timeout if timeout is not None else self.timeout + KILL_SLACK)
        except subprocess.TimeoutExpired:
            _kill_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        return self._finish()

    def stop(self, timeout: float = 30.0) -> DriverResult:
        """SIGTERM (clean client shutdown), SIGKILL after ``timeout``."""
        if self.proc.poll() is None:
            _kill_group(self.proc.pid, signal.SIGTERM)
        return self.wait(timeout)

    def _finish(self) -> DriverResult:
        self._reader.join(10)
        _untrack(self.proc.pid)
        if not self._stderr.closed:
            self._stderr.close()
        return self._result()

    def _result(self) -> DriverResult:
        with self._cond:
            events = list(self._log.events)
        return DriverResult(self.argv, self.proc.poll(), events, _read_text(self._stderr_path), self.log_dir)

    def __enter__(self) -> ConsumerHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class AsyncConsumerHandle:
    """Asyncio twin of :class:`ConsumerHandle`; create with :func:`start_consumer_async`."""

    def __init__(self, client: str, argv: list[str], log_dir: Path, timeout: float) -> None:
        self.client, self.argv, self.log_dir, self.timeout = client, argv, log_dir, timeout
        self._stderr_path = log_dir / f"consumer-{uuid.uuid4().hex[:6]}.stderr"
        self._log = _EventLog()
        self._changed = asyncio.Event()  # replaced after every set(): a cheap broadcast
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def _start(self) -> AsyncConsumerHandle:
        with self._stderr_path.open("wb") as err:  # the child keeps its own copy of the fd
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdout=subprocess.PIPE, stderr=err, env=_env(self.log_dir), start_new_session=True,
                cwd=self.log_dir,
            )  # fmt: skip
        _track(self.proc.pid)
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for raw in self.proc.stdout:
            event = _parse_line(raw.decode("utf-8", "replace"))
            if event is not None:
                self._log.feed(event)
                self._notify()
        self._log.eof = True
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_until(self, pred: Callable[[], bool], timeout: float, what: str) -> None:
        async def waiter() -> None:
            while not pred() and not self._log.eof:
                await self._changed.wait()

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waiter(), timeout)
        if not pred():
            raise DriverError(f"{self.client} consumer: {what}", self._result())

    async def wait_started(self, timeout: float = 60.0) -> None:
        await self._wait_until(lambda: self._log.started, timeout, "did not start")

    async def wait_messages(self, expect: int, timeout: float | None = None) -> list[dict[str, Any]]:
        await self._wait_until(
            lambda: len(self._log.acked) >= expect, timeout or self.timeout, f"<{expect} messages"
        )
        return self._log.messages()

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self._log.messages()

    async def wait(self, timeout: float | None = None) -> DriverResult:
        assert self.proc is not None
        try:
            await asyncio.wait_for(
                self.proc.wait(), timeout if timeout is not None else self.timeout + KILL_SLACK
            )
        except TimeoutError:
            _kill_group(self.proc.pid, signal.SIGKILL)
            await self.proc.wait()
        if self._reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._reader, 10)
        _untrack(self.proc.pid)
        return self._result()

    async def stop(self, timeout: float = 30.0) -> DriverResult:
        assert self.proc is not None
        if self.proc.returncode is None:
            _kill_group(self.proc.pid, signal.SIGTERM)
        return await self.wait(timeout)

    def _result(self) -> DriverResult:
        code = self.proc.returncode if self.proc is not None else None
        return DriverResult(
            self.argv, code, list(self._log.events), _read_text(self._stderr_path), self.log_dir
        )

    async def __aenter__(self) -> AsyncConsumerHandle:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
