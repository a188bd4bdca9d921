"""A dependency-free progress line on stderr: count, rate and ETA.

Shown only when stderr is a terminal and not ``quiet``; redraws at most 10 times a
second so it never costs measurable time.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType


class Progress:
    def __init__(self, label: str, total: int | None, *, unit: str = "items", quiet: bool = False) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0
        self.enabled = not quiet and sys.stderr.isatty()
        self._start = time.perf_counter()
        self._last = 0.0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self.enabled:
            self._draw(force=True)
            sys.stderr.write("\n")
            sys.stderr.flush()

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.enabled:
            self._draw()

    def line(self) -> str:
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        rate = self.done / elapsed
        if self.total:
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            eta_s = f"{eta:.0f}s" if eta != float("inf") else "?"
            return f"{self.label}: {self.done}/{self.total} {self.unit} ({100 * self.done / self.total:.0f}%), {rate:.0f} {self.unit}/s, ETA {eta_s}"
        return f"{self.label}: {self.done} {self.unit}, {rate:.0f} {self.unit}/s"

    def _draw(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        sys.stderr.write("\r\x1b[2K" + self.line())
        sys.stderr.flush()
