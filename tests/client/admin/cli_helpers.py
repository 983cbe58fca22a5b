"""Run ``mqadmin`` in this process (``main(argv)``) or as the installed console script."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from click.testing import CliRunner

from pocketmq.client.admin.cli import main

MQADMIN = str(Path(sys.executable).with_name("mqadmin"))


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        assert self.code == 0, f"exit {self.code}: {self.err}"
        return orjson.loads(self.out)

    @property
    def ok(self) -> bool:
        return self.code == 0


def run_cli(*args: str, env: Mapping[str, str | None] | None = None) -> Result:
    """``mqadmin args...`` through ``main`` with captured stdout/stderr (blocking)."""
    with CliRunner().isolation(env=env) as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return Result(code, out.getvalue().decode(), err.getvalue().decode())


async def arun_cli(*args: str, env: Mapping[str, str | None] | None = None) -> Result:
    """:func:`run_cli` in a worker thread, so servers on this loop keep serving."""
    return await asyncio.to_thread(run_cli, *args, env=env)


async def arun_script(*args: str, env: Mapping[str, str] | None = None, timeout: float = 60.0) -> Result:
    """The real ``mqadmin`` console script in a subprocess."""
    proc = await asyncio.create_subprocess_exec(
        MQADMIN, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())
