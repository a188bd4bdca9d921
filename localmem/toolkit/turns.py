"""Turn and time tools: a turn's cues and context, when it was said, turns in a time
range, one turn in full, and sessions with their turns.

The later steps of MRAgent's walk (3.4): from a turn to its cues, its neighbours and
linked turns, and its time; and from a time range back to turns.

Invariants:
- results are paged and capped as in :mod:`localmem.toolkit.common` (``turn`` alone
  returns a whole text: it is the one way to read past :data:`MAX_TEXT_CHARS`);
- undated turns are never in a time range; a date alone as a range's end means that
  whole day;
- read-only: plain SELECTs on ``store.conn``.
"""

from __future__ import annotations

from typing import Any

from localmem.errors import InputError, NotFound
from localmem.storage import queries
from localmem.storage.store import Store
from localmem.toolkit.common import (
    _CUE_COLS,
    DEFAULT_LIMIT,
    MAX_WINDOW,
    _bounds,
    _cue_refs,
    _marks,
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
    total = int(store.conn.one("SELECT count(*) FROM cues WHERE turn_id = ?", (turn_id,))[0])
    rows = store.conn.execute(
        f"SELECT {_CUE_COLS} FROM cues c WHERE c.turn_id = ? "
        "ORDER BY CASE c.kind WHEN 'fact' THEN 0 WHEN 'triple' THEN 1 WHEN 'keyword' THEN 2 ELSE 3 END, c.id "
        "LIMIT ? OFFSET ?",
        (turn_id, limit, offset),
    ).fetchall()
    item = TurnCues(turn, _cue_refs(store, rows))
    nxt = offset + len(rows)
    return Page([item], offset, limit, total, nxt if nxt < total else None)


@snapshot_read
def turn_context(store: Store, turn_id: int, *, window: int = 2, links: int = DEFAULT_LIMIT) -> TurnContext:
    """The turn, its neighbours within ``window`` places in its session, and the turns
    linked to it by semantic and antecedent edges (strongest first, at most ``links``)."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise InputError(f"window must be a non-negative integer; got {window!r}")
    link_limit, _ = _bounds(links, 0)
    window = min(window, MAX_WINDOW)
    turn = _turn_ref(store, turn_id)
    sid, ord_ = store.conn.one("SELECT session_id, ord FROM turns WHERE id = ?", (turn_id,))
    before = store.conn.execute(
        "SELECT id FROM turns WHERE session_id = ? AND ord < ? ORDER BY ord DESC LIMIT ?", (sid, ord_, window)
    ).fetchall()
    after = store.conn.execute(
        "SELECT id FROM turns WHERE session_id = ? AND ord > ? ORDER BY ord LIMIT ?", (sid, ord_, window)
    ).fetchall()
    places = [(-i - 1, int(r[0])) for i, r in enumerate(before)] + [(i + 1, int(r[0])) for i, r in enumerate(after)]
    near = {t for _, t in places}
    edges = [
        e
        for e in queries.edges_of(store.conn, [turn_id], ("semantic", "antecedent", "temporal"))
        if not (e[2] == "temporal" and e[1] in near)
    ]
    out_pairs = {
        (int(a), int(b), str(k))
        for a, b, k in store.conn.execute("SELECT src, dst, kind FROM edges WHERE src = ?", (turn_id,))
    }
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
    row = store.conn.execute(
        "SELECT t.ts, s.key, s.started_at, t.session_id, t.ord FROM turns t JOIN sessions s ON s.id = t.session_id "
        "WHERE t.id = ?",
        (turn_id,),
    ).fetchone()
    if row is None:
        raise NotFound(f"no turn with id {turn_id}")
    ts, key, started, sid, ord_ = row
    place, n = store.conn.one("SELECT sum(ord <= ?), count(*) FROM turns WHERE session_id = ?", (ord_, sid))
    return TurnTime(int(turn_id), ts, str(key), started, int(place), int(n))


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
    where = ["t.ts IS NOT NULL"]
    args: list[Any] = []
    if lo is not None:
        where.append("t.ts >= ?")
        args.append(lo)
    if hi is not None:
        where.append("t.ts <= ?")
        args.append(hi)
    if scope:
        where.append("t.session_id IN (SELECT id FROM sessions WHERE source = ? OR key = ?)")
        args += [scope, scope]
    cond = " AND ".join(where)
    total = int(store.conn.one(f"SELECT count(*) FROM turns t WHERE {cond}", args)[0])
    ids = [
        int(r[0])
        for r in store.conn.execute(
            f"SELECT t.id FROM turns t WHERE {cond} ORDER BY t.ts, t.session_id, t.ord LIMIT ? OFFSET ?",
            [*args, limit, offset],
        )
    ]
    refs = turn_refs(store, ids)
    return _page([refs[t] for t in ids if t in refs], total, limit, offset)


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
    total = int(store.conn.one("SELECT count(*) FROM sessions")[0])
    rows = store.conn.execute(
        "SELECT s.key, s.source, s.title, s.started_at, count(t.id), min(t.ts), max(t.ts) FROM sessions s "
        "LEFT JOIN turns t ON t.session_id = s.id GROUP BY s.id "
        "ORDER BY coalesce(s.started_at, min(t.ts)) DESC, s.id DESC LIMIT ? OFFSET ?",
        (limit, offset),
    ).fetchall()
    items = [
        {"session": k, "source": src, "title": ti, "started_at": st, "turns": n, "first": a, "last": b}
        for k, src, ti, st, n, a, b in rows
    ]
    return _page(items, total, limit, offset)


@snapshot_read
def session_turns(store: Store, session: str, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[TurnRef]:
    """The turns of one session (by its key) in order."""
    limit, offset = _bounds(limit, offset)
    sids = [int(r[0]) for r in store.conn.execute("SELECT id FROM sessions WHERE key = ?", (session,))]
    if not sids:
        raise NotFound(f"no session {session!r}")
    cond = f"session_id IN ({_marks(len(sids))})"
    total = int(store.conn.one(f"SELECT count(*) FROM turns WHERE {cond}", sids)[0])
    ids = [
        int(r[0])
        for r in store.conn.execute(
            f"SELECT id FROM turns WHERE {cond} ORDER BY session_id, ord LIMIT ? OFFSET ?", [*sids, limit, offset]
        )
    ]
    refs = turn_refs(store, ids)
    return _page([refs[t] for t in ids if t in refs], total, limit, offset)
