"""What each page of the web view shows, as JSON-ready dicts. Read-only except ``forget``.

One function per page (``ask``, ``timeline``, ``session``, ``turn``, ``health``) plus
``forget``. They reuse the library where it has the answer (``retrieval.trace`` for
Ask, ``toolkit`` for a turn's cues and tags, ``enrichment.layers`` for coverage,
``Store.forget``) and otherwise run plain SELECTs on ``store.conn``, as the toolkit
does. Errors are the library's (``InputError``, ``NotFound``); the app translates them.
"""

from __future__ import annotations

from typing import Any

from localmem.enrichment.layers import layer_stats
from localmem.errors import InputError, NotFound
from localmem.retrieval.trace import trace
from localmem.storage.queue import parked
from localmem.storage.store import Store
from localmem.toolkit.turns import turn_cues

TEXT_PREVIEW = 240  # characters of a turn shown in lists
JOB_STATES = ("pending", "running", "done", "parked")


def ask(store: Store, query: str, budget: int | None, as_of: str | None, scope: str | None) -> dict[str, Any]:
    """The context a client gets for ``query`` and the trace of how it was chosen."""
    return trace(store, query, budget, as_of or None, scope or None).to_dict()


def _topics_by_session(store: Store, session_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """Session topics touching each session, each with its theme (if any)."""
    if not session_ids:
        return {}
    marks = ",".join("?" * len(session_ids))
    rows = store.conn.execute(
        "SELECT DISTINCT t.session_id, p.id, p.label, p.summary, th.id, th.label "
        "FROM topic_turns tt JOIN turns t ON t.id = tt.turn_id JOIN topics p ON p.id = tt.topic_id "
        "LEFT JOIN theme_topics x ON x.topic_id = p.id LEFT JOIN topics th ON th.id = x.theme_id "
        f"WHERE p.kind = 'session' AND t.session_id IN ({marks}) ORDER BY t.session_id, p.id",
        session_ids,
    ).fetchall()
    out: dict[int, list[dict[str, Any]]] = {}
    for sid, pid, label, summary, theme_id, theme in rows:
        out.setdefault(int(sid), []).append(
            {"topic_id": int(pid), "label": label, "summary": summary, "theme_id": theme_id, "theme": theme}
        )
    return out


def timeline(store: Store, limit: int = 200, offset: int = 0) -> dict[str, Any]:
    """Sessions, newest first, grouped by day, with their topics and themes."""
    if limit <= 0 or offset < 0:
        raise InputError("limit must be positive and offset not negative")
    total = int(store.conn.one("SELECT count(*) FROM sessions")[0])
    rows = store.conn.execute(
        "SELECT s.id, s.key, s.source, s.title, coalesce(s.started_at, min(t.ts)), count(t.id), min(t.ts), max(t.ts) "
        "FROM sessions s LEFT JOIN turns t ON t.session_id = s.id GROUP BY s.id "
        "ORDER BY coalesce(s.started_at, min(t.ts)) IS NULL, coalesce(s.started_at, min(t.ts)) DESC, s.id DESC "
        "LIMIT ? OFFSET ?",
        (limit, offset),
    ).fetchall()
    ids = [int(r[0]) for r in rows]
    topics = _topics_by_session(store, ids)
    opening: dict[int, str] = {}
    if ids:
        for sid, speaker, text in store.conn.execute(
            "SELECT t.session_id, t.speaker, t.text FROM turns t WHERE t.id IN (SELECT (SELECT id FROM turns "
            f"WHERE session_id = s.id ORDER BY ord LIMIT 1) FROM sessions s WHERE s.id IN ({','.join('?' * len(ids))}))",
            ids,
        ):
            opening[int(sid)] = _clip(f"{speaker}: {text}" if speaker else str(text))
    days: list[dict[str, Any]] = []
    for sid, key, source, title, start, n, first, last in rows:
        day = start[:10] if start else "undated"
        if not days or days[-1]["day"] != day:
            days.append({"day": day, "sessions": []})
        tps = topics.get(int(sid), [])
        themes = sorted({(t["theme_id"], t["theme"]) for t in tps if t["theme_id"] is not None})
        days[-1]["sessions"].append(
            {
                "session_id": int(sid),
                "key": key,
                "source": source,
                "title": title,
                "started_at": start,
                "turns": int(n),
                "first": first,
                "last": last,
                "preview": opening.get(int(sid), ""),
                "topics": tps,
                "themes": [{"theme_id": int(i), "label": label} for i, label in themes],
            }
        )
    return {"total": total, "offset": offset, "limit": limit, "days": days}


def session(store: Store, session_id: int) -> dict[str, Any]:
    """One session and its turns in order (texts in full)."""
    row = store.conn.execute(
        "SELECT id, key, source, title, started_at FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    if row is None:
        raise NotFound(f"no session with id {session_id}")
    turns = [
        {"turn_id": int(i), "ord": int(o), "speaker": sp, "role": ro, "timestamp": ts, "text": tx, "source_id": src}
        for i, o, sp, ro, ts, tx, src in store.conn.execute(
            "SELECT id, ord, speaker, role, ts, text, source_id FROM turns WHERE session_id = ? ORDER BY ord",
            (session_id,),
        )
    ]
    return {
        "session_id": int(row[0]),
        "key": row[1],
        "source": row[2],
        "title": row[3],
        "started_at": row[4],
        "turns": turns,
        "topics": _topics_by_session(store, [session_id]).get(session_id, []),
    }


def _clip(text: str) -> str:
    return text if len(text) <= TEXT_PREVIEW else text[:TEXT_PREVIEW].rstrip() + " …"


def turn(store: Store, turn_id: int) -> dict[str, Any]:
    """A turn in full: text, cues with their spans and tags, facts, memory type, and its
    edges in and out (with the verifier's reason on antecedent links)."""
    page = turn_cues(store, turn_id, limit=100)  # raises NotFound for an unknown turn
    cues = page.items[0].cues
    spans = {
        int(c): (int(a), int(b), str(x))
        for c, a, b, x in store.conn.execute(
            "SELECT id, span_start, span_end, extractor FROM cues WHERE turn_id = ?", (turn_id,)
        )
    }
    meta = store.conn.one(
        "SELECT t.session_id, s.key, s.source, t.ord, t.speaker, t.role, t.ts, t.text, t.source_id "
        "FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.id = ?",
        (turn_id,),
    )
    sid, key, source, ord_, speaker, role, ts, text, source_id = meta
    enr = store.conn.execute(
        "SELECT memory_type, type_source, low_info, model FROM turn_enrichment WHERE turn_id = ?", (turn_id,)
    ).fetchone()
    edges = []
    for direction, sql in (
        ("out", "SELECT e.dst, e.kind, e.weight, e.reason FROM edges e WHERE e.src = ?"),
        ("in", "SELECT e.src, e.kind, e.weight, e.reason FROM edges e WHERE e.dst = ?"),
    ):
        for other, kind, weight, reason in store.conn.execute(sql, (turn_id,)):
            edges.append(
                {"direction": direction, "turn_id": int(other), "kind": kind, "weight": weight, "reason": reason}
            )
    others = (
        {
            int(i): (sp, tx, ts2)
            for i, sp, tx, ts2 in store.conn.execute(
                f"SELECT id, speaker, text, ts FROM turns WHERE id IN ({','.join('?' * len(edges))})",
                [e["turn_id"] for e in edges],
            )
        }
        if edges
        else {}
    )
    for e in edges:
        sp, tx, ts2 = others.get(e["turn_id"], ("", "", None))
        e.update(speaker=sp, text=_clip(tx), timestamp=ts2)
    edges.sort(key=lambda e: ({"antecedent": 0, "semantic": 1, "temporal": 2}.get(e["kind"], 3), -e["weight"]))
    cue_list = []
    for c in cues:
        start, end, extractor = spans.get(c.cue_id, (0, 0, ""))
        cue_list.append(
            {
                "cue_id": c.cue_id,
                "kind": c.kind,
                "text": c.text,
                "tags": c.tags,
                "span": [start, end],
                "extractor": extractor,
                "subject": c.subject,
                "relation": c.relation,
                "object": c.object,
            }
        )
    return {
        "turn_id": turn_id,
        "session_id": int(sid),
        "session": key,
        "source": source,
        "position": int(ord_),
        "speaker": speaker,
        "role": role,
        "timestamp": ts,
        "text": text,
        "source_id": source_id,
        "cues": cue_list,
        "tags": sorted({t for c in cues for t in c.tags}),
        "facts": [c for c in cue_list if c["kind"] == "fact" or c["relation"]],
        "memory_type": enr[0] if enr else None,
        "type_source": enr[1] if enr else None,
        "low_info": bool(enr[2]) if enr else False,
        "enriched_by": enr[3] if enr else None,
        "edges": edges,
    }


def health(store: Store) -> dict[str, Any]:
    """Layer coverage, the job queue by kind and state (running and parked ones with
    their errors), the models, and the database's size."""
    stats = store.stats()
    layers = layer_stats(store)
    jobs: dict[str, dict[str, int]] = {}
    for kind, state, n in store.conn.execute("SELECT kind, state, count(*) FROM jobs GROUP BY kind, state"):
        jobs.setdefault(str(kind), dict.fromkeys(JOB_STATES, 0))[str(state)] = int(n)
    running = [
        {"job": int(j), "kind": k, "turn_id": t, "owner": o, "until": u, "attempts": a, "error": e}
        for j, k, t, o, u, a, e in store.conn.execute(
            "SELECT id, kind, turn_id, locked_by, locked_until, attempts, last_error FROM jobs "
            "WHERE state = 'running' ORDER BY id LIMIT 50"
        )
    ]
    settings = store.settings
    return {
        "db": stats["db"],
        "bytes": stats["bytes"],
        "schema_version": stats["schema_version"],
        "sessions": stats["sessions"],
        "turns": stats["turns"],
        "cues": stats["cues"],
        "edges": stats["edges"],
        "topics": stats["topics"],
        "themes": stats["themes"],
        "first_turn": stats["first_turn"],
        "last_turn": stats["last_turn"],
        "embedder": stats["embedder"],
        "embedder_dim": stats["embedder_dim"],
        "model": settings.model or "embedded default (SmolLM2-135M, a test model)",
        "enrichment_models": layers["models"],
        "layers": layers,
        "jobs": jobs,
        "running": running,
        "parked": parked(store.conn, limit=50),
    }


def forget(store: Store, turn_id: int | None = None, session_id: int | None = None) -> dict[str, Any]:
    """Forget one turn or one whole session; returns how many turns were deleted."""
    if (turn_id is None) == (session_id is None):
        raise InputError("forget needs exactly one of turn_id and session_id")
    if turn_id is not None:
        if store.conn.execute("SELECT 1 FROM turns WHERE id = ?", (turn_id,)).fetchone() is None:
            raise NotFound(f"no turn with id {turn_id}")
        return {"forgotten": store.forget([turn_id])}
    row = store.conn.execute("SELECT key, source FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        raise NotFound(f"no session with id {session_id}")
    return {"forgotten": store.forget(session=row[0], source=row[1]), "session": row[0]}
