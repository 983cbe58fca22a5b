"""Progress bars of long commands: drawn on a terminal only, quiet under --json and in pipes."""

from __future__ import annotations

import asyncio
import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.client.progress import ProgressBar
from pocketmq.testing import cluster


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_renders_on_a_terminal_and_clears_its_line() -> None:
    out = Tty()
    bar = ProgressBar("statsAll", 4, stream=out, unit=" topics", min_interval=0)
    assert bar.enabled
    bar.advance()
    bar.advance(extra="x=1")
    assert bar.render(width=200) == "statsAll [############............]  50%  2/4 topics"
    text = out.getvalue()
    assert text.startswith("\rstatsAll [######..................]  25%  1/4 topics\x1b[K")
    assert "x=1" in text
    bar.close()
    assert out.getvalue().endswith("\r\x1b[K")
    assert ProgressBar("t", 10.0, stream=out).render(width=12) == "t [........"  # cut to the width


def test_bar_is_silent_off_a_terminal_or_when_disabled() -> None:
    pipe = io.StringIO()
    bar = ProgressBar("x", 3, stream=pipe)
    assert not bar.enabled
    bar.advance()
    bar.close()
    tty = Tty()
    quiet = ProgressBar("x", 3, stream=tty, enabled=False)
    quiet.advance()
    quiet.close()
    assert pipe.getvalue() == "" and tty.getvalue() == ""


def test_redraws_are_throttled() -> None:
    out = Tty()
    bar = ProgressBar("x", 1000, stream=out, min_interval=60)
    for _ in range(999):
        bar.advance()
    assert out.getvalue().count("\r") == 1  # the first draw only
    bar.advance()  # the last step is always drawn
    assert out.getvalue().count("\r") == 2


def _run_on_a_pty(args: list[str]) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal (stdout a pipe); return code, stdout, terminal text."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, text=True)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        out = proc.stdout.read() if proc.stdout else ""
        proc.wait(60)
    finally:
        os.close(master)
    return proc.returncode, out, b"".join(chunks).decode(errors="replace")


@pytest.mark.integration
async def test_mqadmin_stats_all_bar_on_a_terminal_quiet_under_json(tmp_path: Path) -> None:
    async with cluster(tmp_path / "c") as c:
        for name in ("PA", "PB", "PC"):
            await c.create_topic(name, queues=1)
        base = [sys.executable, "-m", "pocketmq.client.admin.cli", "statsAll", "-n", c.namesrv_addr]
        code, out, term = await asyncio.to_thread(_run_on_a_pty, base)
        assert code == 0, term
        assert "statsAll [" in term and "topics" in term and "PA" in out
        code, out, term = await asyncio.to_thread(_run_on_a_pty, [*base, "--json"])
        assert code == 0, term
        assert "statsAll [" not in term
        assert {r["topic"] for r in json.loads(out)["rows"]} >= {"PA", "PB", "PC"}
        piped = await asyncio.to_thread(subprocess.run, base, capture_output=True, text=True, timeout=60)
        assert piped.returncode == 0 and piped.stderr == ""
