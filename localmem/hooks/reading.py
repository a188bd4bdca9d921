"""What an ingest hook reads (``hooks.run`` in the hook's own process, ``hooks.served`` in
a resident process): the transcript file its payload names, from where the last read
stopped (``ingest.runner``); for OpenCode, whose sessions live in a database, the payload's
session (and its sub-agents' sessions) in that database (``ingest.opencode_runner``), or
every session when the payload names none.

Invariant: the same resume points ``localmem capture`` and ``watch`` use (``ingest_files``
rows of the same file and format), so whoever reads a turn first stores it and the others
find it read: nothing is stored twice. A session OpenCode updated in the last
``capture.RECENT`` seconds keeps a step its agent is still in for the next read, as
``capture`` does (at ``session.idle`` the turn is done and nothing is held).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from localmem.hooks import events
from localmem.hooks.events import HookEvent
from localmem.ingest import capture, opencode_runner, runner
from localmem.storage.write.store import Store


def ingest(store: Store, ev: HookEvent, path: Path, should_stop: Callable[[], bool] | None = None) -> runner.Report:
    """Read the new part of ``path`` (the payload's transcript, made absolute) into ``store``."""
    if ev.client == "opencode":
        got = opencode_runner.ingest(
            store,
            path,
            hold_since=time.time() - capture.RECENT,
            should_stop=should_stop,
            session=ev.session_id or None,
        )
        return got.report
    return runner.ingest_file(
        store, path, events.FORMATS[ev.client], skip_bad=True, should_stop=should_stop, **events.read_options(ev)
    )
