"""One hook run: the event read from stdin, its work done within a deadline, the reply
(or nothing) for the agent, the outcome counted in ``hooks.status``.

Work by event: session-start and prompt recall (``resident.recall.answer``, the function a
resident process answers ``hooks.fast`` with) under the project of the payload's ``cwd``
(``retrieval.scope``), which records the head lines they inject (the store's ``injected``
table) and the recall log's row (best effort: a store too busy to take them does not hold
the agent up), and reply; stop, pre-compact and session-end ingest the transcript the payload
names, read to its end from where the last read stopped (``hooks.reading``: the same
resume point ``capture`` and ``watch`` use, so nothing is stored twice whoever reads it).

Invariants (``localmem.hooks``): the process exits 0 whatever happens; it prints a reply
only on success, nothing else ever reaches stdout; the work runs in a thread the process
stops waiting for at the deadline (the outcome is then ``timeout``; a write in flight is
rolled back by SQLite when the process exits, and an ingest resumes next time); the
store's busy timeout is set below the deadline, so a lock held elsewhere becomes a named
``store locked`` failure, not a hang. Recall never creates a store; the first ingest does.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import apsw

from localmem.config import Settings
from localmem.errors import StoreFull, StoreLocked, StoreReadOnly
from localmem.hooks import events, reading, status
from localmem.hooks.events import HookEvent
from localmem.hooks.fast import deadline, hook_ask, reply_line
from localmem.memory import open_store
from localmem.resident import recall
from localmem.storage.engine import keys
from localmem.storage.engine.retry import BUSY_TIMEOUT_ENV

RECALL = ("session-start", "prompt")


@dataclass(frozen=True)
class Outcome:
    reply: str | None  # the JSON line to print, or None
    outcome: str  # replied / quiet / failed
    kind: str | None = None
    message: str = ""
    detail: dict[str, object] | None = None
    text: str = ""  # the context a recall gave ('' for none), for a caller that gives it its own way


def classify(exc: BaseException) -> tuple[str, str]:
    """The failure kind of an exception (``status.KINDS``) and its message."""
    if isinstance(exc, keys.StoreLocked):
        return "key missing", str(exc)
    if isinstance(exc, StoreLocked | apsw.BusyError | apsw.LockedError):
        return "store locked", str(exc)
    if isinstance(exc, StoreFull) or (isinstance(exc, OSError) and exc.errno == 28):
        return "disk full", str(exc)
    if isinstance(exc, StoreReadOnly):
        return "read-only", str(exc)
    if isinstance(exc, events.PayloadError):
        return "bad payload", str(exc)
    return "error", f"{type(exc).__name__}: {exc}"


def work(settings: Settings, ev: HookEvent, until: float | None = None) -> Outcome:
    """The event's work (module docstring); raises on failure. ``until``: the deadline
    (a ``time.perf_counter()`` reading); a lock held elsewhere is waited for at most
    about half of the time left to it, so it fails as ``store locked``, not ``timeout``."""
    if until is not None:
        left_ms = (until - time.perf_counter()) * 1000
        os.environ[BUSY_TIMEOUT_ENV] = str(max(100, int(left_ms * 0.5)))
    if ev.event in RECALL:
        if not Path(settings.db).exists():
            return Outcome(None, "quiet", detail={"why": "no store yet"})
        return _recall(settings, ev)
    return _ingest(settings, ev)


def _recall(settings: Settings, ev: HookEvent) -> Outcome:
    why = events.nothing_to_recall(ev)
    if why is not None:
        return Outcome(None, "quiet", detail={"why": why})
    with open_store(settings) as store:
        got = recall.answer(store, hook_ask(settings, ev))  # what a resident process answers (hooks.fast)
    detail: dict[str, object] = {k: got[k] for k in ("turns", "best_cosine", "not_recorded") if k in got}
    if not got["text"]:
        return Outcome(None, "quiet", detail=detail)
    return Outcome(reply_line(ev, got["text"]), "replied", detail=detail, text=got["text"])


def _ingest(settings: Settings, ev: HookEvent) -> Outcome:
    if ev.host == "cursor":  # Cursor running another client's entry: its own entries store it (hooks.events)
        return Outcome(None, "quiet", detail={"why": events.nothing_to_recall(ev)})
    if not ev.transcript_path:  # Codex sends null for a session it keeps no log of (ephemeral): nothing to store
        return Outcome(None, "quiet", detail={"why": "the payload names no transcript"})
    path = Path(ev.transcript_path).expanduser()
    if not path.is_file():  # named but not there: every turn of this session would be lost unseen
        return Outcome(None, "failed", "no transcript", f"the transcript {path} the client named is not a file")
    with open_store(settings) as store:
        report = reading.ingest(store, ev, path)
    return Outcome(None, "quiet", detail={"new": report.new, "already_present": report.already_present})


def run(
    settings: Settings,
    client: str,
    event: str,
    raw: bytes,
    *,
    write: Callable[[str], None],
    started: float | None = None,
    note: dict[str, object] | None = None,
    limit: float | None = None,
) -> Outcome:
    """Do the hook's work within its deadline, give ``write`` the reply (if any), record the
    outcome (its time counted from ``started``, a ``time.perf_counter()`` reading: the
    process's start; ``limit``: seconds, default the event's deadline). Never raises."""
    parse = lambda: events.parse(client, event, raw)  # noqa: E731
    return run_event(settings, client, event, parse, write=write, started=started, note=note, limit=limit)


def run_event(
    settings: Settings,
    client: str,
    event: str,
    parse: Callable[[], HookEvent],
    *,
    write: Callable[[str], None],
    started: float | None = None,
    note: dict[str, object] | None = None,
    limit: float | None = None,
) -> Outcome:
    """:func:`run` for the event ``parse`` gives (a payload read, or an event made by a
    caller with no payload: ``localmem aider``'s session start, ``hooks.aider_launch``)."""
    t0 = time.perf_counter() if started is None else started
    limit = deadline(settings, event) if limit is None else limit
    box: dict[str, Outcome] = {}

    def target() -> None:
        try:
            ev = parse()
            box["out"] = work(settings, ev, t0 + limit)
        except BaseException as exc:  # every failure is counted and named, none reaches the agent
            kind, message = classify(exc)
            box["out"] = Outcome(None, "failed", kind, message)

    worker = threading.Thread(target=target, name="localmem-hook", daemon=True)
    worker.start()
    worker.join(max(0.1, limit - (time.perf_counter() - t0)))  # the deadline counts from the process's start
    out = box.get("out") or Outcome(None, "failed", "timeout", f"{event} took longer than {limit:g} s; gave up")
    if out.reply is not None:
        write(out.reply)
    ms = (time.perf_counter() - t0) * 1000
    detail = {**(out.detail or {}), **(note or {})} or None  # ``note``: the caller's, e.g. why no resident answered
    status.record(settings.db, client, event, out.outcome, ms=ms, kind=out.kind, message=out.message, detail=detail)
    return out
