"""What every traversal tool shares: limits, argument checks, paging, and building the
compact turn and cue records from rows.

Invariants:
- ``limit`` is clamped to :data:`MAX_LIMIT` and ``offset`` refused past
  :data:`MAX_OFFSET` (:func:`_bounds`), so no call dumps the graph;
- a turn's text is cut to :data:`MAX_TEXT_CHARS` with ``clipped`` set (:func:`_text`);
  the full text is one ``turn`` lookup away;
- read-only: the named reads of ``localmem.storage.reads.traversal`` / ``topic_reads`` /
  ``queries`` on ``store.conn`` (the toolkit holds no SQL); each public tool is wrapped
  in :func:`snapshot_read`, so all it reads (SQL rows and vector mirrors) is of one
  commit, whatever other processes write or forget meanwhile.

The underscored helpers are private to the toolkit package (its tool modules share
them); ``localmem.answering.explore`` also uses :func:`_visible` and :func:`_time` to apply the
same as_of / scope filter to the turn ids a result names.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Concatenate, ParamSpec, TypeVar

from localmem.errors import InputError, NotFound
from localmem.retrieval import scope as scopes
from localmem.storage.reads import queries, traversal
from localmem.storage.write.store import Store
from localmem.toolkit.records import CueRef, Page, T, TurnRef
from localmem.util.text import parse_time

MAX_LIMIT = 50
DEFAULT_LIMIT = 10
MAX_OFFSET = 10_000
MAX_TEXT_CHARS = 800
MAX_WINDOW = 5

P = ParamSpec("P")
R = TypeVar("R")


def snapshot_read(tool: Callable[Concatenate[Store, P], R]) -> Callable[Concatenate[Store, P], R]:
    """Run a read tool inside one snapshot of its store (``Store.snapshot``)."""

    @functools.wraps(tool)
    def read(store: Store, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with store.snapshot():
            return tool(store, *args, **kwargs)

    return read


def _bounds(limit: int, offset: int) -> tuple[int, int]:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InputError(f"limit must be a positive integer; got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InputError(f"offset must be a non-negative integer; got {offset!r}")
    if offset > MAX_OFFSET:
        raise InputError(f"offset must be at most {MAX_OFFSET}; narrow the query instead")
    return min(limit, MAX_LIMIT), offset


def _page(items: Sequence[T], total: int, limit: int, offset: int) -> Page[T]:
    nxt = offset + len(items)
    return Page(list(items), offset, limit, total, nxt if nxt < total else None)


def _slice(items: Sequence[T], limit: int, offset: int) -> Page[T]:
    return _page(items[offset : offset + limit], len(items), limit, offset)


def _text(text: str) -> tuple[str, bool]:
    if len(text) <= MAX_TEXT_CHARS:
        return text, False
    return text[:MAX_TEXT_CHARS].rstrip() + " …", True


@snapshot_read
def turn_refs(store: Store, ids: Sequence[int]) -> dict[int, TurnRef]:
    rows = queries.turn_rows(store.conn, ids)
    out: dict[int, TurnRef] = {}
    for tid, r in rows.items():
        text, clipped = _text(r.text)
        out[tid] = TurnRef(tid, r.session_key, r.ts, r.speaker, text, clipped, r.source_id)
    return out


def _turn_ref(store: Store, turn_id: int) -> TurnRef:
    ref = turn_refs(store, [int(turn_id)]).get(int(turn_id))
    if ref is None:
        raise NotFound(f"no turn with id {turn_id}")
    return ref


def _cue_refs(store: Store, rows: Sequence[traversal.CueRow]) -> list[CueRef]:
    """Cue rows as cue records, each with its tags."""
    tags = traversal.tags_of(store.conn, [r.id for r in rows])
    return [CueRef(r.id, r.kind, r.text, r.turn_id, tags.get(r.id, []), r.subject, r.relation, r.object) for r in rows]


@snapshot_read
def _visible(store: Store, turn_ids: Sequence[int], as_of: str | None, scope: str | None) -> set[int]:
    """The turns of ``turn_ids`` that pass the as_of / scope filter."""
    if not turn_ids:
        return set()
    ok: set[int] = set()
    named, project = scopes.split(scope)
    sessions = set(queries.scope_sessions(store.conn, named)) if named else None
    inside = set(queries.project_sessions(store.conn, project)) if project else None
    for tid, r in queries.turn_rows(store.conn, turn_ids).items():
        if as_of is not None and r.ts is not None and r.ts > as_of:
            continue
        if sessions is not None and r.session_id not in sessions:
            continue
        if inside is not None and r.session_id not in inside and r.speaker.strip().lower() in scopes.AGENT_SPEAKERS:
            continue
        ok.add(tid)
    return ok


def _time(value: str | None, name: str, *, end: bool = False) -> str | None:
    if value is None or value == "":
        return None
    try:
        iso = parse_time(value)
    except ValueError as exc:
        raise InputError(f"{name}: {exc}") from exc
    if end and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
        iso = iso[:10] + "T23:59:59"  # a date as an end means the whole day
    return iso
