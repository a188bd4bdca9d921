"""The memory browser's pages as JSON-ready dicts: Find (one box for words and meaning,
filters, paged results), the timeline of every session with counts per month, and a
session opened around one of its turns.

Find's ranking is the read path's own (``retrieval.search``: the pool's ranked lists,
fused); with no words it lists the turns the filters let through, newest first. Filters
are ``storage.reads.browse.FILTERS`` (date range, source or its family, speaker, role):
the app passes every query parameter of that name, so a new filter there is a new filter
here. Errors are the library's (``InputError``, ``NotFound``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from localmem.errors import InputError, NotFound
from localmem.retrieval.search import search
from localmem.storage.reads import browse
from localmem.storage.reads import views as reads
from localmem.storage.write.store import Store

SNIPPET = 320  # characters of a turn shown in a result
PAGE = 20  # results per page
MAX_PAGE = 100
DEPTH = 100  # each ranked list's depth for the first pages of a search
MAX_DEPTH = 1000  # the deepest a pager may ask for
SESSION_WINDOW = 200  # turns of a session shown at once


def _clip(text: str, n: int = SNIPPET) -> str:
    return text if len(text) <= n else text[:n].rstrip() + " …"


def _bounds(limit: int, offset: int, most: int) -> None:
    if not 0 < limit <= most or offset < 0:
        raise InputError(f"limit must be 1..{most} and offset not negative")


def facets(store: Store) -> dict[str, Any]:
    """The values each filter can take, with counts (sources with their families)."""
    f = browse.facets(store.conn)
    return {
        "filters": list(browse.FILTERS),
        "sources": [{"value": v, "sessions": n} for v, n in f.sources],
        "speakers": [{"value": v, "turns": n} for v, n in f.speakers],
        "roles": [{"value": v, "turns": n} for v, n in f.roles],
        "clients": [{"value": v, "sessions": n} for v, n in f.clients],
        "projects": [{"value": v, "sessions": n} for v, n in f.projects],
    }


def months(store: Store, flt: Mapping[str, str]) -> dict[str, Any]:
    """Sessions and turns per month, newest first (undated last), each with the timeline
    offset of its first session."""
    out, at = [], 0
    for m in browse.months(store.conn, browse.clean(flt)):
        out.append({"month": m.month, "sessions": m.sessions, "turns": m.turns, "offset": at})
        at += m.sessions
    return {"months": out, "sessions": at, "turns": sum(m["turns"] for m in out)}


def timeline(store: Store, flt: Mapping[str, str], limit: int = 50, offset: int = 0) -> dict[str, Any]:
    """One page of every session, newest first, grouped by day, with topics and themes."""
    _bounds(limit, offset, 500)
    got = browse.sessions(store.conn, browse.clean(flt), limit, offset)
    ids = [r.id for r in got.items]
    topics: dict[int, list[dict[str, Any]]] = {}
    for sid, pid, label, summary, theme_id, theme in reads.session_topics(store.conn, ids):
        topics.setdefault(sid, []).append(
            {"topic_id": pid, "label": label, "summary": summary, "theme_id": theme_id, "theme": theme}
        )
    opening = {
        sid: _clip(f"{speaker}: {text}" if speaker else text, 240)
        for sid, (speaker, text) in reads.opening_turns(store.conn, ids).items()
    }
    days: list[dict[str, Any]] = []
    for r in got.items:
        day = r.start[:10] if r.start else "undated"
        if not days or days[-1]["day"] != day:
            days.append({"day": day, "sessions": []})
        tps = topics.get(r.id, [])
        themes = sorted({(t["theme_id"], t["theme"]) for t in tps if t["theme_id"] is not None})
        days[-1]["sessions"].append(
            {
                "session_id": r.id,
                "key": r.key,
                "source": r.source,
                "title": r.title,
                "started_at": r.start,
                "turns": r.turns,
                "first": r.first,
                "last": r.last,
                "preview": opening.get(r.id, ""),
                "topics": tps,
                "themes": [{"theme_id": int(i), "label": label} for i, label in themes],
            }
        )
    nxt = offset + len(got.items)
    return {
        "total": got.total,
        "offset": offset,
        "limit": limit,
        "next": nxt if nxt < got.total else None,
        "days": days,
    }


def find(
    store: Store, query: str, flt: Mapping[str, str], page: int = 0, per_page: int = PAGE, match: str = "all"
) -> dict[str, Any]:
    """One page of the turns for ``query`` under ``flt``: ranked by the read path's lists
    when there are words (``ranked``: True), else every turn the filters let through,
    newest first."""
    _bounds(per_page, page, MAX_PAGE)
    clean = browse.clean(flt)
    start = page * per_page
    if not query.strip():
        got = browse.turns(store.conn, clean, per_page, start)
        ids, total, meta = got.items, got.total, {}
    else:
        depth = min(MAX_DEPTH, max(DEPTH, start + per_page))
        allowed = np.array(browse.turn_ids(store.conn, clean), dtype=np.int64) if clean else None
        hits = search(store, query, depth, allowed, match)
        total = len(hits)
        ids = [h.turn_id for h in hits[start : start + per_page]]
        meta = {h.turn_id: h for h in hits[start : start + per_page]}
    rows = browse.turn_rows(store.conn, ids)
    results = []
    for i in ids:
        r = rows.get(i)
        if r is None:
            continue
        h = meta.get(i)
        results.append(
            {
                "turn_id": r.id,
                "session_id": r.session_id,
                "session": r.session,
                "title": r.title,
                "source": r.source,
                "speaker": r.speaker,
                "role": r.role,
                "timestamp": r.ts,
                "text": _clip(r.text),
                "score": round(h.score, 5) if h else None,
                "words": h.words if h else None,
                "meaning": h.meaning if h else None,
                "lists": list(h.lists) if h else [],
            }
        )
    return {
        "query": query,
        "filters": clean,
        "match": match,
        "ranked": bool(query.strip()),
        "total": total,
        "page": page,
        "per_page": per_page,
        "pages": max(1, -(-total // per_page)),
        "results": results,
    }


def session(store: Store, session_id: int, turn: int | None = None, offset: int | None = None) -> dict[str, Any]:
    """A session's head and a window of its turns (texts whole): the window holding
    ``turn`` when given (``focus``), else the one from ``offset`` (default the start)."""
    head = reads.session_head(store.conn, session_id)
    if head is None:
        raise NotFound(f"no session with id {session_id}")
    focus = None
    if turn is not None:
        at = browse.place_in_session(store.conn, turn)
        if at is None or at[0] != session_id:
            raise NotFound(f"no turn {turn} in session {session_id}")
        focus = turn
        offset = max(0, at[1] - SESSION_WINDOW // 4)
    offset = offset or 0
    if offset < 0:
        raise InputError("offset must not be negative")
    got = browse.session_window(store.conn, session_id, offset, SESSION_WINDOW)
    topics = [
        {"topic_id": pid, "label": label, "summary": summary, "theme_id": tid, "theme": theme}
        for _sid, pid, label, summary, tid, theme in reads.session_topics(store.conn, [session_id])
    ]
    nxt = offset + len(got.items)
    return {
        "session_id": head.id,
        "key": head.key,
        "source": head.source,
        "title": head.title,
        "started_at": head.started_at,
        "client": head.client,
        "project": {"cwd": head.cwd, "repository": head.repository, "branch": head.branch} if head.cwd else None,
        "total": got.total,
        "offset": offset,
        "next": nxt if nxt < got.total else None,
        "previous": max(0, offset - SESSION_WINDOW) if offset > 0 else None,
        "focus": focus,
        "turns": [
            {"turn_id": r.id, "ord": r.ord, "speaker": r.speaker, "role": r.role, "timestamp": r.ts, "text": r.text}
            for r in got.items
        ],
        "topics": topics,
    }
