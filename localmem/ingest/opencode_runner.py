"""Store what OpenCode's database holds and the store lacks (``localmem capture`` and
``watch`` for client ``opencode``; ``localmem.ingest.opencode`` reads the database).

OpenCode's database is not an append-only log, so progress is kept per session, in
``ingest_files`` rows of the database's path with format ``opencode`` (written through
``storage.reads.ingest_files``; ``state.save`` would read the file to hash it):

- a session's row (options ``session=<id>``): ``resume_offset`` and ``prefix_hash`` are the
  ``time_created`` (ms) and id of the last message taken, ``resume_unit`` how many were
  taken, ``mtime_ns`` the session's ``time_updated`` (ms) when it was last read to its end,
  ``complete`` whether it was (nothing held back). A session read to its end and not
  updated since is not read; any other is read from after its last message taken, so a
  session that grows gets only its new turns;
- the database's row (options empty): ``fingerprint`` is its :func:`opencode.signature`
  (``os.stat`` of the database and its ``-wal``) when every session was read to its end; a
  database with that signature still is not opened at all (:func:`unchanged`).

A read of one session (``session``: an ingest hook's, ``hooks.reading``) reads it and its
sub-agents' sessions through the same rows, so a hook and ``capture`` never store a turn
twice; it leaves the database's row as it was (the other sessions were not read).

Invariants: a session's turns are written (in batches of ``runner.BATCH_TURNS`` turns,
each its own transaction) before its row moves on, so a read killed in between finds them
already stored next time (content hashes) and nothing is lost or stored twice; a bad row is
reported (database, session, message) and stepped over, the rest is stored; OpenCode's
lock is waited for (``opencode.Database``); with ``hold_since``, a session updated since
then keeps the step its agent is still in for the next read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest import opencode, runner, state
from localmem.ingest._units import merge
from localmem.records import SessionIn
from localmem.storage.reads import ingest_files
from localmem.storage.write.store import Store

FORMAT = "opencode"


@dataclass
class Outcome:
    report: runner.Report
    held: list[dict[str, Any]] = field(default_factory=list)  # session, updated (unix s)


def _fingerprint(sig: tuple[int, int, int, int]) -> str:
    return "opencode:" + ":".join(map(str, sig))


def unchanged(store: Store, db: Path) -> bool:
    """Whether every session of ``db`` was read to its end and the database (and its
    ``-wal``) has not changed since; a database that is gone has nothing to read."""
    sig = opencode.signature(db)
    if sig is None:
        return True
    row = ingest_files.get(store.conn, state.key(db), FORMAT, "")
    return row is not None and row.complete and row.fingerprint == _fingerprint(sig)


def _row(key: str, options: str, *, at: tuple[int, str], taken: int, updated: int, complete: bool, fp: str = "") -> Any:
    return ingest_files.IngestFile(key, FORMAT, options, 0, updated, fp, at[0], taken, 1, at[1], complete)


def ingest(
    store: Store,
    db: Path,
    *,
    hold_since: float | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_wait: Callable[[], None] | None = None,
    session: str | None = None,
) -> Outcome:
    """Store the new turns of every session of ``db`` (module docstring). ``hold_since``
    (unix s): sessions updated at or after it are read with ``hold``; None: none.
    ``session``: only that session and those whose parent it is."""
    t0 = time.perf_counter()
    sig = opencode.signature(db)
    if sig is None:
        raise InputError("no such file", path=str(db))
    key = state.key(db)
    tool_lines = store.settings.ingest.tool_lines
    done_rows = {r.options: r for r in ingest_files.for_path(store.conn, key) if r.format == FORMAT}
    out = Outcome(runner.Report(file=str(db), format=FORMAT))
    report = out.report
    written: set[str] = set()
    complete = True
    with opencode.Database(db, on_wait) as src:
        for s in src.sessions():
            if session is not None and session not in (s.id, s.parent_id):
                continue
            if should_stop is not None and should_stop():
                report.stopped, complete = True, False
                break
            options = f"session={s.id}"
            prev = done_rows.get(options)
            if prev is not None and prev.complete and prev.mtime_ns == s.updated_ms:
                continue
            after = (prev.resume_offset, prev.prefix_hash) if prev is not None and prev.resume_unit else None
            messages = src.messages(s.id, after)
            hold = hold_since is not None and s.updated_ms / 1000 >= hold_since
            batch: list[SessionIn] = []
            taken = 0
            for u in opencode.units(db, s, messages, tool_lines=tool_lines, hold=hold):
                if u.error is not None:
                    report.errors.append({"where": u.where, "error": str(u.error)})
                report.skipped.update(u.skipped)
                batch.extend(u.sessions)
                taken = u.after.index
            for piece in runner.chunks(merge(batch), runner.BATCH_TURNS, runner.BATCH_CHARS):
                for r in store.retrying(partial(store.write_sessions, piece)):
                    report.new += r.new_turns
                    report.already_present += r.existing_turns
                written.update(p.key for p in piece)
            whole = taken == len(messages)
            if not whole:
                complete = False
                out.held.append({"session": s.id, "updated": s.updated_ms / 1000})
            last = messages[taken - 1] if taken else None
            at = (last.created_ms, last.id) if last is not None else after or (0, "")
            row = _row(
                key,
                options,
                at=at,
                taken=(prev.resume_unit if prev is not None else 0) + taken,
                updated=s.updated_ms if whole else 0,
                complete=whole,
            )
            store.retrying(partial(ingest_files.save, store.conn, row))
    if session is None:  # a read of one session says nothing of the others
        whole_db = _row(key, "", at=(0, ""), taken=0, updated=sig[1], complete=complete, fp=_fingerprint(sig))
        store.retrying(partial(ingest_files.save, store.conn, whole_db))
    report.sessions = len(written)
    report.turns = report.new + report.already_present
    report.seconds = time.perf_counter() - t0
    return out
