"""A dependency-free progress report on stderr: count, share, rate and ETA.

On a terminal one line is redrawn in place, at most 10 times a second. When stderr is
not a terminal (a log, a pipe, a service) whole lines are written instead, never more
than one per ``every`` seconds: by default the first after 10 s, then at 10 s intervals
growing to a tenth of the elapsed time (at most 60 s), so an hour's import writes about
70 lines and a short one none. ``quiet`` shows nothing. The rate and the ETA come from
the last ``WINDOW`` seconds (the whole run until 10 s of it have passed), so a rate that
drifts over a long run does not leave the ETA behind.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

WINDOW = 120.0  # seconds of history the rate is taken over
TTY_EVERY = 0.1


def clock(seconds: float) -> str:
    """``1:02:03`` / ``0:04:05``: hours, minutes, seconds."""
    s = max(round(seconds), 0)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def log_interval(elapsed: float) -> float:
    """Seconds between two lines written to a non-terminal after ``elapsed`` seconds."""
    return min(60.0, max(10.0, elapsed / 10))


class Progress:
    def __init__(
        self,
        label: str,
        total: int | None,
        *,
        unit: str = "items",
        quiet: bool = False,
        every: float | None = None,
        scale: float = 1.0,
        stream: TextIO | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        """``every``: seconds between lines (default: see the module docstring); ``scale``
        divides counts for display (1e6 with unit "MB" for a count of bytes)."""
        self.label = label
        self.total = total
        self.unit = unit
        self.scale = scale
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.enabled = not quiet
        self.every = every
        self.lines = 0  # lines written (a redraw on a terminal counts once)
        self._now = now
        self._start = now()
        self._last = self._start
        self._drawn = -1  # the count the last line showed
        self._history: deque[tuple[float, int]] = deque([(self._start, 0)])

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if not self.enabled:
            return
        if self.tty:
            self._write("\r\x1b[2K" + self.line(final=et is None), end="\n")
        elif self.lines and et is None and self._drawn != self.done:
            self._write(self.line(final=True), end="\n")

    def advance(self, n: int = 1) -> None:
        self.done += n
        t = self._now()
        self._history.append((t, self.done))
        while len(self._history) > 2 and self._history[1][0] <= t - WINDOW:
            self._history.popleft()
        if self.enabled:
            self._maybe_draw(t)

    def rate(self) -> float:
        """Units per second over the last ``WINDOW`` seconds (the whole run, early on)."""
        t = self._now()
        t0, d0 = self._history[0]
        if t - t0 < 10.0 or self.done == d0:
            t0, d0 = self._start, 0
        return (self.done - d0) / max(t - t0, 1e-9)

    def eta(self) -> float | None:
        """Seconds left, or None while unknown (no total, nothing done yet)."""
        if not self.total:
            return None
        r = self.rate()
        return max(self.total - self.done, 0) / r if r > 0 else None

    def line(self, *, final: bool = False) -> str:
        elapsed = self._now() - self._start
        done = self._fmt(self.done)
        if self.total:
            text = f"{self.label}: {done}/{self._fmt(self.total)} {self.unit} ({100 * self.done / self.total:.1f}%)"
        else:
            text = f"{self.label}: {done} {self.unit}"
        text += f", {self.rate() / self.scale:,.1f} {self.unit}/s, elapsed {clock(elapsed)}"
        eta = self.eta()
        if self.total and not final:
            text += f", ETA {clock(eta)}" if eta is not None else ", ETA ?"
        return text

    def _fmt(self, n: float) -> str:
        return f"{n / self.scale:,.1f}" if self.scale != 1.0 else f"{int(n):,}"

    def _maybe_draw(self, t: float) -> None:
        if self.tty:
            gap = self.every if self.every is not None else TTY_EVERY
        else:
            gap = self.every if self.every is not None else log_interval(t - self._start)
        if t - self._last < gap:
            return
        self._last = t
        self._drawn = self.done
        if self.tty:
            self._write("\r\x1b[2K" + self.line(), end="")
        else:
            self._write(self.line(), end="\n")

    def _write(self, text: str, *, end: str) -> None:
        self.stream.write(text + end)
        self.stream.flush()
        self.lines += 1
