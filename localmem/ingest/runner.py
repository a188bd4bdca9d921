"""Ingest one file: check it, then write it in batches with a resume point.

``plan`` (``start``: format, fingerprint and resume point; then ``check``) reads the file once without writing (from the resume point, if there is a
valid one): it counts the turns for the progress bar and finds bad units, so that a
bad file is refused before anything of it is stored (with ``skip_bad``, its bad units
are stepped over instead and reported); a file read from its start that yields no turn
at all is refused too (a wrong ``--format`` or a file of something else), naming the
format it was read as and the one detected. ``run`` reads it again and writes whole
units, about ``batch_turns`` turns per batch; a batch is written in transactions of at
most ``batch_turns`` turns and ``BATCH_CHARS`` characters (split within a session if
need be), so no transaction holds the write lock for long; after each batch commits,
the point after its last unit is saved in ``ingest_files``. Writes wait out another
process's lock as the store's ``patience`` says. A batch and its
resume point are two transactions, batch first: an ingest killed between them reads
that batch again next time and finds its turns already stored (content hashes), so
nothing is written twice and nothing is lost.

Where to start: an interrupted ingest, or a file that changed but whose bytes before
the resume point did not (a log that grew), continues from the resume point, and so does
a coding agent's log read to its end before (nothing new); anything else (a complete
file ingested again, an edited file) is read from its start, and turns already stored
are counted as already present.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from localmem.errors import InputError
from localmem.ingest import AGENT_FORMATS, READ_ONLY_OPTIONS, detect, state, units
from localmem.ingest._json import Cursor
from localmem.ingest._units import merge
from localmem.records import SessionIn
from localmem.storage.engine import fileread
from localmem.storage.write.store import Store

M = TypeVar("M")
BATCH_TURNS = 256
BATCH_CHARS = 250_000  # of turn text per write transaction (~0.1-0.3 s of cue, FTS and vector inserts)


@dataclass
class Plan:
    path: Path
    format: str
    options: dict[str, Any]
    start: Cursor
    stat: state.FileStat
    skip_bad: bool
    turns: int = 0
    units: int = 0
    bad: dict[int, InputError] = field(default_factory=dict)
    named_format: str | None = None  # the format the caller asked for (None: detected)

    @property
    def options_key(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.options.items()) if k not in READ_ONLY_OPTIONS)


@dataclass
class Report:
    """What an ingest did. ``turns`` = new + already present; ``skipped`` counts the
    messages a parser leaves out, by reason; ``errors`` the bad units stepped over."""

    file: str
    format: str
    sessions: int = 0
    turns: int = 0
    new: int = 0
    already_present: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    errors: list[dict[str, str]] = field(default_factory=list)
    resumed_at_unit: int | None = None
    stopped: bool = False  # asked to stop before the end; the next ingest resumes
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "format": self.format,
            "sessions": self.sessions,
            "turns": self.turns,
            "new": self.new,
            "already_present": self.already_present,
            "skipped": dict(self.skipped),
            "errors": self.errors,
            "resumed_at_unit": self.resumed_at_unit,
            "stopped": self.stopped,
            "seconds": round(self.seconds, 2),
        }

    def line(self) -> str:
        text = (
            f"ingested {self.file} ({self.format}): {self.sessions} sessions, {self.turns} turns — "
            f"{self.new} new, {self.already_present} already present"
        )
        if self.skipped:
            text += ", skipped " + ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()))
        if self.errors:
            text += f", {len(self.errors)} bad units skipped"
        if self.resumed_at_unit is not None:
            text += f" (resumed at unit {self.resumed_at_unit})"
        if self.stopped:
            text += " (stopped early; the next ingest continues)"
        return text + f", in {self.seconds:.2f} s"


def plan(
    store: Store,
    path: Path,
    fmt: str | None = None,
    *,
    skip_bad: bool = False,
    progress: Callable[[int], None] | None = None,
    **options: Any,
) -> Plan:
    """Where to start in the file and what it holds from there: ``start`` then ``check``."""
    return check(start(store, path, fmt, skip_bad=skip_bad, **options), progress=progress)


def start(store: Store, path: Path, fmt: str | None = None, *, skip_bad: bool = False, **options: Any) -> Plan:
    """A plan that has not read the file yet: its format, fingerprint and resume point."""
    if not path.is_file():
        raise InputError("no such file", path=str(path))
    if fileread.held(path) is not None:  # reading it through Python would drop SQLite's locks on it
        raise InputError("is the memory store itself (or its -wal/-shm); ingest a chat export or log", path=str(path))
    name = fmt or detect(path)
    opts = {k: v for k, v in options.items() if v is not None}
    if name in AGENT_FORMATS:
        opts.setdefault("tool_lines", store.settings.ingest.tool_lines)
    st = state.stat(path)
    p = Plan(path=path, format=name, options=opts, start=Cursor(), stat=st, skip_bad=skip_bad, named_format=fmt)
    prev = state.get(store.conn, path, name, p.options_key)
    if prev is not None and (not prev.complete or prev.stat.fingerprint != st.fingerprint):
        p.start = state.resume_point(prev, path, st) or Cursor()
    elif prev is not None and name in AGENT_FORMATS:
        # An agent's log read to its end and unchanged since has nothing new. Not read again
        # from its start: a step that was cut by an earlier read would be joined again into
        # a turn of another text (localmem/ingest/_agent.py).
        p.start = state.resume_point(prev, path, st) or Cursor()
    return p


def check(p: Plan, *, progress: Callable[[int], None] | None = None) -> Plan:
    """Read the file from ``p.start`` without writing: count turns and units, find bad
    units (raised unless ``skip_bad``). ``progress`` is given the bytes read since its
    previous call, a unit at a time."""
    skipped: Counter[str] = Counter()
    at = p.start.offset
    for u in units(p.path, p.format, p.start, **p.options):
        if progress is not None and u.after.offset > at:
            progress(u.after.offset - at)
            at = u.after.offset
        p.units += 1
        if u.error is not None:
            if not p.skip_bad:
                raise u.error
            p.bad[u.index] = u.error
        p.turns += u.turns
        skipped.update(u.skipped)
    empty = set(skipped) == {"empty session"}  # an agent's session with nothing said in it (vscode)
    if p.turns == 0 and not p.bad and p.start == Cursor() and not p.options.get("hold") and not empty:
        raise InputError(_no_turns(p.path, p.format, p.named_format, skipped), path=str(p.path))
    return p


def _no_turns(path: Path, name: str, fmt: str | None, skipped: Counter[str]) -> str:
    why = f"no turns found reading it as {name}"
    if skipped:
        why += " (left out: " + ", ".join(f"{n} {what}" for what, n in sorted(skipped.items())) + ")"
    if fmt is not None:
        try:
            detected = detect(path)
        except InputError:
            detected = None
        if detected and detected != fmt:
            why += f"; it looks like {detected}: try --format {detected}"
    return why


def chunks(sessions: list[SessionIn], turns: int, chars: int) -> Iterator[list[SessionIn]]:
    """``sessions`` cut into pieces of at most ``turns`` turns and ``chars`` characters of
    text (one turn over ``chars`` goes alone), a session's turns split across pieces in order."""
    piece: list[SessionIn] = []
    n = size = 0
    for s in sessions:
        at = 0
        for i, t in enumerate(s.turns):
            if n and (n >= turns or size + len(t.text) > chars):
                if i > at:
                    piece.append(replace(s, turns=s.turns[at:i]))
                yield piece
                piece, n, size, at = [], 0, 0, i
            n += 1
            size += len(t.text)
        if at < len(s.turns):
            piece.append(replace(s, turns=s.turns[at:]))
    if piece:
        yield piece


def _marked(pieces: Iterator[list[SessionIn]], mark: M) -> Iterator[tuple[list[SessionIn], M | None]]:
    """``pieces`` (at least one, maybe empty), the last one tagged with ``mark``."""
    prev: list[SessionIn] | None = None
    for piece in pieces:
        if prev is not None:
            yield prev, None
        prev = piece
    yield (prev if prev is not None else []), mark


def run(
    store: Store,
    p: Plan,
    *,
    progress: Callable[[int], None] | None = None,
    batch_turns: int = BATCH_TURNS,
    should_stop: Callable[[], bool] | None = None,
) -> Report:
    """Write the planned file; ``should_stop`` is asked after each batch (a clean stop
    leaves a resume point, like an interrupted ingest)."""
    t0 = time.perf_counter()
    report = Report(file=str(p.path), format=p.format)
    if p.start.index:
        report.resumed_at_unit = p.start.index
    sessions: set[tuple[str, str]] = set()

    def pieces() -> Iterator[tuple[list[SessionIn], tuple[Cursor, bool, int] | None]]:
        """Transactions to write; a batch's last one carries (resume point, complete, turns)."""
        batch: list[SessionIn] = []
        size = 0
        after = p.start
        for u in units(p.path, p.format, p.start, **p.options):
            if u.error is not None:
                if not p.skip_bad:
                    raise u.error  # the file changed since it was checked
                report.errors.append({"where": u.where, "error": str(u.error)})
            report.skipped.update(u.skipped)
            batch.extend(u.sessions)
            sessions.update((s.source, s.key) for s in u.sessions)
            size += u.turns
            after = u.after
            if size >= batch_turns:
                yield from _marked(chunks(merge(batch), batch_turns, BATCH_CHARS), (after, False, size))
                batch, size = [], 0
                if should_stop is not None and should_stop():
                    report.stopped = True
                    return
        yield from _marked(chunks(merge(batch), batch_turns, BATCH_CHARS), (after, True, size))

    # Batch k+1 is read and embedded while batch k commits (Store.write_stream).
    for results, mark in store.write_stream(pieces()):
        for r in results:
            report.new += r.new_turns
            report.already_present += r.existing_turns
        if mark is not None:
            at, complete, size = mark
            save = partial(state.save, store.conn, p.path, p.format, p.options_key, p.stat, at, complete=complete)
            store.retrying(save)
            if progress and size:
                progress(size)
    report.sessions = len(sessions)
    report.turns = report.new + report.already_present
    report.seconds = time.perf_counter() - t0
    return report


def ingest_file(
    store: Store,
    path: Path,
    fmt: str | None = None,
    *,
    skip_bad: bool = False,
    progress: Callable[[int], None] | None = None,
    batch_turns: int = BATCH_TURNS,
    should_stop: Callable[[], bool] | None = None,
    **options: Any,
) -> Report:
    """Check and write one file; see the module docstring."""
    p = plan(store, path, fmt, skip_bad=skip_bad, **options)
    return run(store, p, progress=progress, batch_turns=batch_turns, should_stop=should_stop)
