"""Waiting out another process's write lock: the one retry-with-back-off helper.

SQLite makes a writer wait up to the busy timeout (``busy_timeout_ms()``: 10 s, or
``$LOCALMEM_BUSY_TIMEOUT_MS``) for a lock another process holds, then fails with
``apsw.BusyError``. Every writer wraps its write calls in ``retry_locked``, which
sleeps and tries again: the MCP server a bounded number of times (``RETRY_WAITS_S``,
then ``StillLocked``, a ``StoreLocked`` the client sees), the CLI, the watcher and the worker for as
long as it takes (``forever()``), telling the user once per wait (``on_wait``).

Retrying is safe because our write transactions begin with ``BEGIN IMMEDIATE``: a busy
error comes from that first statement, before anything was written, and the retried
call writes content-hashed rows that are never stored twice.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import apsw

from localmem.errors import ConfigError, StoreLocked

log = logging.getLogger("localmem.retry")
R = TypeVar("R")

BUSY_ERRORS = (apsw.BusyError, apsw.LockedError)
DEFAULT_BUSY_TIMEOUT_MS = 10_000
BUSY_TIMEOUT_ENV = "LOCALMEM_BUSY_TIMEOUT_MS"
RETRY_WAITS_S = (0.2, 0.5, 1.0, 2.0, 4.0)
WAITING = "waiting for the database (locked by another process)…"


class StillLocked(StoreLocked):
    """The database stayed locked by another process for every pause a writer allowed."""


def busy_timeout_ms() -> int:
    """How long SQLite itself waits for a lock before a busy error: 10 s by default,
    ``$LOCALMEM_BUSY_TIMEOUT_MS`` to change it (tests make it small)."""
    raw = os.environ.get(BUSY_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_BUSY_TIMEOUT_MS
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{BUSY_TIMEOUT_ENV} must be a whole number of milliseconds, got {raw!r}") from None
    if value < 0:
        raise ConfigError(f"{BUSY_TIMEOUT_ENV} must be 0 or more, got {value}")
    return value


def forever(first: float = 0.2, cap: float = 5.0) -> Iterator[float]:
    """Back-off pauses without end: ``first``, doubling, at most ``cap`` seconds."""
    wait = first
    while True:
        yield wait
        wait = min(wait * 2, cap)


def retry_locked(
    fn: Callable[[], R],
    waits: Iterable[float] = RETRY_WAITS_S,
    *,
    on_wait: Callable[[], None] | None = None,
) -> R:
    """Run ``fn``, again after each pause of ``waits`` while SQLite says the database is
    busy or locked. ``on_wait`` is called once, when the first pause begins (say that we
    wait); when ``waits`` runs out, ``StillLocked`` (a ``StoreLocked``) says so."""
    pauses = iter(waits)
    waited = False
    while True:
        try:
            return fn()
        except BUSY_ERRORS as exc:
            wait = next(pauses, None)
            if wait is None:
                raise StillLocked("the database stayed locked by another process; try again in a moment") from exc
            if not waited:
                waited = True
                if on_wait is not None:
                    on_wait()
            log.info("database busy (%s); retrying in %.1fs", exc, wait)
            time.sleep(wait)


def patiently(fn: Callable[[], R], on_wait: Callable[[], None] | None = None) -> R:
    """``retry_locked`` for writers that must never give up (CLI, watcher, worker)."""
    return retry_locked(fn, forever(), on_wait=on_wait)


@dataclass(frozen=True)
class Patience:
    """How a store's writes meet another process's lock: wait with back-off, without
    end, calling ``on_wait`` once per wait (the CLI prints ``WAITING`` on stderr)."""

    on_wait: Callable[[], None] | None = None

    def __call__(self, fn: Callable[[], R]) -> R:
        return patiently(fn, self.on_wait)
