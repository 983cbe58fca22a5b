"""A one-line progress bar for long commands (``mqadmin statsAll``, ``pocketmq bench``).

Drawn on stderr only when stderr is a terminal (and the caller did not ask for ``--json``): a
pipe, a log file or a JSON consumer sees nothing of it. The line is redrawn in place at most
every 0.1 s and cleared when the work ends, so the command's own output follows on a clean line.
A few lines of our own instead of a dependency: nothing here needs more.
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """``label [#####.....]  45%  9/20  extra``; ``total`` 0 shows a count without a bar."""

    def __init__(
        self,
        label: str,
        total: float,
        *,
        enabled: bool | None = None,
        stream: TextIO | None = None,
        unit: str = "",
        min_interval: float = 0.1,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self._is_tty() if enabled is None else enabled
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0.0
        self.min_interval = min_interval
        self._last = 0.0
        self._drawn = False

    def _is_tty(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def advance(self, n: float = 1, extra: str = "") -> None:
        self.update(self.done + n, extra)

    def update(self, done: float, extra: str = "") -> None:
        self.done = done
        if not self.enabled:
            return
        now = time.monotonic()
        if self._drawn and now - self._last < self.min_interval and done < self.total:
            return
        self._last = now
        self.stream.write("\r" + self.render(extra) + "\x1b[K")
        self.stream.flush()
        self._drawn = True

    def render(self, extra: str = "", width: int | None = None) -> str:
        """The line (no control characters), cut to ``width`` (default: the terminal's)."""
        cols = width if width is not None else shutil.get_terminal_size((100, 20)).columns
        done, total = self.done, self.total
        digits = 0 if float(total).is_integer() else 1

        def fmt(v: float) -> str:
            return f"{v:.{digits}f}"

        if total > 0:
            frac = min(1.0, max(0.0, done / total))
            bar = "#" * int(frac * 24) + "." * (24 - int(frac * 24))
            line = f"{self.label} [{bar}] {frac * 100:3.0f}%  {fmt(done)}/{fmt(total)}{self.unit}"
        else:
            line = f"{self.label} {fmt(done)}{self.unit}"
        if extra:
            line += "  " + extra
        return line[: max(10, cols - 1)]

    def close(self) -> None:
        """Clear the line (the command's output follows)."""
        if self.enabled and self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        self._drawn = False

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
