"""Turn and time tools: a turn's cues and context, when it was said, turns in a time
range, one turn in full, and sessions with their turns.

The later steps of MRAgent's walk (3.4): from a turn to its cues, its neighbours and
linked turns, and its time; and from a time range back to turns.

Invariants:
- results are paged and capped as in :mod:`localmem.toolkit.common` (``turn`` alone
  returns a whole text: it is the one way to read past :data:`MAX_TEXT_CHARS`);
- undated turns are never in a time range; a date alone as a range's end means that
  whole day;
- read-only: the named reads of ``localmem.storage.reads.traversal`` and ``queries``.
"""

from __future__ import annotations

from typing import Any

from localmem.errors import InputError, NotFound
from localmem.retrieval import scope as scopes
from localmem.storage.reads import queries, traversal
from localmem.storage.write.store import Store
from localmem.toolkit.common import (
    DEFAULT_LIMIT,
    MAX_WINDOW,
    _bounds,
    _cue_refs,
    _page,
    _time,
    _turn_ref,
    snapshot_read,
    turn_refs,
)
from localmem.toolkit.records import Link, Neighbour, Page, TurnContext, TurnCues, TurnRef, TurnTime


@snapshot_read
def turn_cues(store: Store, turn_id: int, *, limit: int = 20, offset: int = 0) -> Page[TurnCues]:
    """The turn and its cues (sentences, keywords, triples, facts) with their tags.
    One item; the cues inside it are paged."""
    limit, offset = _bounds(limit, offset)
    turn = _turn_ref(store, turn_id)
    got = traversal.cues_of_turn(store.conn, turn_id, limit, offset)
    item = TurnCues(turn, _cue_refs(store, got.items))
    nxt = offset + len(got.items)
    return Page([item], offset, limit, got.total, nxt if nxt < got.total else None)


@snapshot_read
def turn_context(store: Store, turn_id: int, *, window: int = 2, links: int = DEFAULT_LIMIT) -> TurnContext:
    """The turn, its neighbours within ``window`` places in its session, and the turns
    linked to it by semantic and antecedent edges (strongest first, at most ``links``)."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise InputError(f"window must be a non-negative integer; got {window!r}")
    link_limit, _ = _bounds(links, 0)
    window = min(window, MAX_WINDOW)
    turn = _turn_ref(store, turn_id)
    before, after = traversal.neighbours(store.conn, turn_id, window)
    places = [(-i - 1, t) for i, t in enumerate(before)] + [(i + 1, t) for i, t in enumerate(after)]
    near = {t for _, t in places}
    edges = [
        e
        for e in queries.edges_of(store.conn, [turn_id], ("semantic", "antecedent", "temporal"))
        if not (e[2] == "temporal" and e[1] in near)
    ]
    out_pairs = traversal.out_edges(store.conn, turn_id)
    edges.sort(key=lambda e: ({"antecedent": 0, "semantic": 1, "temporal": 2}[e[2]], -e[3], e[1]))
    shown = edges[:link_limit]
    refs = turn_refs(store, [t for _, t in places] + [e[1] for e in shown])
    neighbours = [Neighbour(o, refs[t]) for o, t in sorted(places) if t in refs]
    found = [
        Link(k, "out" if (turn_id, o, k) in out_pairs else "in", round(w, 4), r, refs[o])
        for _, o, k, w, r in shown
        if o in refs
    ]
    return TurnContext(turn, neighbours, found, len(edges))


@snapshot_read
def turn_time(store: Store, turn_id: int) -> TurnTime:
    """When a turn was said: its timestamp, its session, the session's start, its place."""
    p = traversal.turn_position(store.conn, turn_id)
    if p is None:
        raise NotFound(f"no turn with id {turn_id}")
    return TurnTime(int(turn_id), p.ts, p.session_key, p.session_started, p.position, p.session_turns)


@snapshot_read
def turns_between(
    store: Store,
    start: str | None = None,
    end: str | None = None,
    *,
    scope: str | None = None,
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
) -> Page[TurnRef]:
    """Turns said between ``start`` and ``end`` (inclusive; a date alone as the end
    means that whole day), in time order. Undated turns are never in a range."""
    limit, offset = _bounds(limit, offset)
    lo, hi = _time(start, "start"), _time(end, "end", end=True)
    if lo is None and hi is None:
        raise InputError("give a start, an end, or both")
    if lo is not None and hi is not None and lo > hi:
        raise InputError(f"start {lo} is after end {hi}")
    named, project = scopes.split(scope)
    within = None if project is None else (queries.project_sessions(store.conn, project), scopes.AGENT_SPEAKERS)
    got = traversal.turns_in_range(store.conn, lo, hi, named, limit, offset, within)
    refs = turn_refs(store, got.items)
    return _page([refs[t] for t in got.items if t in refs], got.total, limit, offset)


@snapshot_read
def turn(store: Store, turn_id: int) -> dict[str, Any]:
    """One turn in full (its whole text), with its session and time."""
    r = queries.turn_rows(store.conn, [turn_id]).get(turn_id)
    if r is None:
        raise NotFound(f"no turn with id {turn_id}")
    return {
        "turn_id": r.id,
        "session": r.session_key,
        "session_started": r.session_started,
        "position": r.ord,
        "timestamp": r.ts,
        "speaker": r.speaker,
        "role": r.role,
        "text": r.text,
        "source_id": r.source_id,
    }


@snapshot_read
def sessions(store: Store, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[dict[str, Any]]:
    """Sessions, newest first, with their turn counts and time span."""
    limit, offset = _bounds(limit, offset)
    got = traversal.session_summaries(store.conn, limit, offset)
    items: list[dict[str, Any]] = [
        {"session": k, "source": src, "title": ti, "started_at": st, "turns": n, "first": a, "last": b}
        for k, src, ti, st, n, a, b in got.items
    ]
    return _page(items, got.total, limit, offset)


@snapshot_read
def session_turns(store: Store, session: str, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[TurnRef]:
    """The turns of one session (by its key) in order."""
    limit, offset = _bounds(limit, offset)
    sids = traversal.sessions_with_key(store.conn, session)
    if not sids:
        raise NotFound(f"no session {session!r}")
    got = traversal.turns_of_sessions(store.conn, sids, limit, offset)
    refs = turn_refs(store, got.items)
    return _page([refs[t] for t in got.items if t in refs], got.total, limit, offset)
