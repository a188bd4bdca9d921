"""What every parser yields: ``Unit``s (one conversation, sample, line or section each),
each with the ``Cursor`` to resume from once it is stored, plus small shared helpers.

A unit is the smallest thing that is stored or refused as a whole: a bad unit carries
its ``InputError`` instead of sessions, so ``--skip-bad`` can step over it and nothing
of it is ever written. Messages a parser leaves out on purpose (system prompts, tool
calls, hidden or empty messages) are counted in ``skipped`` by reason. A unit with a
turn longer than ``MAX_TURN_CHARS`` is a bad unit (``checked``): refused, not split; a
turn that is nothing but ``<private>`` spans, or nothing but memory a localmem hook injected
(``<localmem-context>``), is left out (counted).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest._json import Cursor, Record, field, records
from localmem.records import MAX_TURN_CHARS, SessionIn
from localmem.util.injected import OPEN, drop_wrapped
from localmem.util.secrets import drop_private
from localmem.util.text import parse_time

# A record that holds one turn (a line of the jsonl format) is refused unread past this
# size: even with every character escaped (\ud83d\ude00: 12 bytes) its text would be
# longer than a turn may be.
TURN_RECORD_BYTES = 16 * MAX_TURN_CHARS

# Turns one conversation object into a session, counting what it leaves out.
ConversationParser = Callable[[Any, Path, str, Counter[str]], SessionIn]
# Turns one benchmark item (its id given) into its sessions: (item, id, path, where).
ItemParser = Callable[[Any, str, Path, str], Iterator[SessionIn]]


@dataclass(frozen=True)
class Unit:
    index: int
    where: str  # "$[3]", "line 12", "section '2024-05-01' (line 40)"
    sessions: tuple[SessionIn, ...]
    after: Cursor  # resume here once this unit is stored
    skipped: Counter[str] = dataclasses.field(default_factory=Counter)
    error: InputError | None = None

    @property
    def turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


def bad(index: int, where: str, after: Cursor, error: InputError) -> Unit:
    return Unit(index=index, where=where, sessions=(), after=after, error=error)


def conversation_unit(rec: Record, path: Path, parse: ConversationParser) -> Unit:
    """One JSON record of a conversation export as a unit: the record's own error, the
    parser's error, or the session the parser made of it (no unit for an empty one)."""
    if rec.error is not None:
        return bad(rec.index, rec.where, rec.after, rec.error)
    skipped: Counter[str] = Counter()
    try:
        session = parse(rec.value, path, rec.where, skipped)
    except InputError as exc:
        return bad(rec.index, rec.where, rec.after, exc)
    return Unit(rec.index, rec.where, (session,) if session.turns else (), rec.after, skipped)


def benchmark_units(
    path: Path,
    start: Cursor | None,
    wanted: str | None,
    parse: ItemParser,
    *,
    name: str,
    item: str,
    id_field: str,
    id_kind: type | tuple[type, ...] = str,
) -> Iterator[Unit]:
    """The record loop of the benchmark files (LoCoMo, LongMemEval): a JSON list of
    ``name``'s ``item``s, each with a unique ``id_field``, one unit per item, or
    only the item whose id is ``wanted`` (the others as empty units, so a resume cursor
    still moves past them; reading stops after it). A wanted id no item has is an
    ``InputError`` when the file was read from its start."""
    start = start or Cursor()
    found = False
    for rec in records(path, start):
        if rec.where == "$":
            raise InputError(f"expected a JSON list of {name} {item}s", path=str(path), where="$")
        if rec.error is not None:
            yield bad(rec.index, rec.where, rec.after, rec.error)
            continue
        try:
            item_id = str(field(rec.value, id_field, id_kind, path, rec.where))
            if wanted is not None and item_id != wanted:
                yield Unit(rec.index, rec.where, (), rec.after)
                continue
            found = True
            sessions = tuple(parse(rec.value, item_id, path, rec.where))
        except InputError as exc:
            yield bad(rec.index, rec.where, rec.after, exc)
            continue
        yield Unit(rec.index, rec.where, sessions, rec.after)
        if wanted is not None:
            return  # ids are unique: no need to read on
    if wanted is not None and not found and start.index == 0:
        raise InputError(f"no {item} with {id_field} {wanted!r}", path=str(path))


def checked(u: Unit, path: Path) -> Unit:
    """``u``, or a bad unit naming its first turn longer than ``MAX_TURN_CHARS``."""
    for s in u.sessions:
        for i, t in enumerate(s.turns):
            if len(t.text) > MAX_TURN_CHARS:
                turn = f"turn {i}" + (f" (id {t.source_id})" if t.source_id else "")
                err = InputError(
                    f"{turn} of session {s.key!r} has {len(t.text):,} characters; the most a turn may have is "
                    f"{MAX_TURN_CHARS:,} (split it or leave it out)",
                    path=str(path),
                    where=u.where,
                )
                return bad(u.index, u.where, u.after, err)
    return _without_private_only(u)


def _without_private_only(u: Unit) -> Unit:
    """``u`` without the turns that are nothing but ``<private>`` spans or injected memory
    (counted): the write path would refuse or drop them (storage/write/prepare.py)."""
    if not any("<private>" in t.text.lower() or OPEN in t.text for s in u.sessions for t in s.turns):
        return u
    skipped = Counter(u.skipped)
    sessions = []
    for s in u.sessions:
        kept = []
        for t in s.turns:
            if not drop_wrapped(t.text).strip():
                skipped["localmem context"] += 1
            elif not drop_private(drop_wrapped(t.text)).strip():
                skipped["private message"] += 1
            else:
                kept.append(t)
        if kept:
            sessions.append(replace(s, turns=tuple(kept)))
    return replace(u, sessions=tuple(sessions), skipped=skipped)


def merge(sessions: Iterable[SessionIn]) -> list[SessionIn]:
    """Sessions with the same (source, key) joined, in order of first appearance."""
    out: dict[tuple[str, str], SessionIn] = {}
    for s in sessions:
        k = (s.source, s.key)
        prev = out.get(k)
        if prev is None:
            out[k] = s
        else:
            out[k] = replace(
                prev,
                turns=prev.turns + s.turns,
                started_at=prev.started_at or s.started_at,
                title=prev.title or s.title,
                client=prev.client or s.client,
                project=prev.project or s.project,
            )
    return list(out.values())


def sessions_of(units: Iterable[Unit]) -> Iterator[SessionIn]:
    """All sessions of a file (merged by key); the first bad unit's error is raised."""
    collected: list[SessionIn] = []
    for u in units:
        if u.error is not None:
            raise u.error
        collected.extend(u.sessions)
    yield from merge(collected)


def timestamp(value: object, path: Path, where: str) -> str | None:
    """``parse_time`` for values read from a file: None stays None, anything unusable is
    an ``InputError`` naming the location."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InputError(
            f"a timestamp should be a string or a number, got {type(value).__name__}", path=str(path), where=where
        )
    try:
        return parse_time(value)
    except (ValueError, OverflowError, OSError) as exc:
        raise InputError(f"unusable timestamp {value!r}: {exc}", path=str(path), where=where) from exc
