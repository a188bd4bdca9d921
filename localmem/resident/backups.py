"""Rolling backups from a process that holds the store open: the socket daemon a query or a
hook started, the MCP server and ``localmem serve`` (all of them run ``mcp_server.serve``,
which wraps its store in :func:`rolling`). A plain CLI command never takes one on its way:
a query must stay fast (``localmem backups --now`` takes one when asked).

A thread of its own looks at the schedule (``storage.copies.rolling.tick``) ``delay_s``
after the store is opened (the process's first caller comes first: a daemon warms up), then
every ``check_s`` (an hour at most); the copy reads the store on a connection of its own, so
it never takes the lock the request path holds, and a query is answered meanwhile. What it
did, skipped or failed goes to the process log (``say``: stderr, the daemon's ``.log``).

Invariants: never an exception out of the thread (a failed take is a log line, and tried
again at the next look); ``[backups] enabled = false`` starts no thread; on exit the body
waits at most ``STOP_S`` for a take in flight (its temporary file, if the process ends
first, is removed by the next take).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import apsw

from localmem.config import Settings
from localmem.config.settings import BackupsParams
from localmem.errors import LocalmemError
from localmem.storage.copies import rolling as copies

STOP_S = 15.0  # how long a process that exits waits for a take in flight
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def check_s(params: BackupsParams) -> float:
    """How often the thread looks: a quarter of the interval, between 1 s and an hour."""
    return max(1.0, min(3600.0, params.interval_hours * 3600 / 4))


@contextmanager
def rolling(settings: Settings, say: Callable[[str], None], clock: Clock = utc_now) -> Iterator[None]:
    """Take the store's rolling backups on a thread while the body runs (module docstring)."""
    params = settings.backups
    if not params.enabled or str(settings.db) == ":memory:":
        yield
        return
    stop = threading.Event()

    def loop() -> None:
        wait = params.delay_s
        while not stop.wait(wait):
            look(settings, say, clock)
            wait = check_s(params)

    thread = threading.Thread(target=loop, name="localmem-backups", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=STOP_S)


def look(settings: Settings, say: Callable[[str], None], clock: Clock = utc_now) -> copies.Tick | None:
    """One look at the schedule, what it did said; None when it failed (said too)."""
    try:
        done = copies.tick(settings.db, settings.backups, clock())
    except (LocalmemError, apsw.Error, OSError) as exc:
        say(f"backup failed: {exc}")
        return None
    if done.taken is not None:
        b = done.taken
        say(f"backup taken: {b.path} ({b.bytes / copies.MB:.1f} MB, {b.turns} turns)")
    if done.skipped is not None:
        say(f"backup skipped: {done.skipped}")
    for b in done.pruned:
        say(f"backup deleted (retention): {b.path}")
    return done
