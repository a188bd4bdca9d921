"""What each page of the web view shows, as JSON-ready dicts. Read-only except ``forget``.

One function per page (``ask``, ``timeline``, ``session``, ``turn``, ``health``) plus
``forget``. They reuse the library where it has the answer (``retrieval.trace`` for
Ask, ``toolkit`` for a turn's cues and tags, ``enrichment.layers`` for coverage,
``Store.forget``) and otherwise the named reads of ``localmem.storage.reads.views`` (no SQL
here). Errors are the library's (``InputError``, ``NotFound``); the app translates them.
"""

from __future__ import annotations

from typing import Any

from localmem.enrichment.layers import layer_stats
from localmem.errors import InputError, NotFound
from localmem.retrieval.trace import trace
from localmem.storage.layers.queue import parked
from localmem.storage.reads import views
from localmem.storage.write.store import Store
from localmem.toolkit.turns import turn_cues

TEXT_PREVIEW = 240  # characters of a turn shown in lists
JOB_STATES = ("pending", "running", "done", "parked")


def ask(store: Store, query: str, budget: int | None, as_of: str | None, scope: str | None) -> dict[str, Any]:
    """The context a client gets for ``query`` and the trace of how it was chosen."""
    return trace(store, query, budget, as_of or None, scope or None).to_dict()


def _topics_by_session(store: Store, session_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """Session topics touching each session, each with its theme (if any)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for sid, pid, label, summary, theme_id, theme in views.session_topics(store.conn, session_ids):
        out.setdefault(sid, []).append(
            {"topic_id": pid, "label": label, "summary": summary, "theme_id": theme_id, "theme": theme}
        )
    return out


def timeline(store: Store, limit: int = 200, offset: int = 0) -> dict[str, Any]:
    """Sessions, newest first, grouped by day, with their topics and themes."""
    if limit <= 0 or offset < 0:
        raise InputError("limit must be positive and offset not negative")
    got = views.timeline_sessions(store.conn, limit, offset)
    total, rows = got.total, got.items
    ids = [r.id for r in rows]
    topics = _topics_by_session(store, ids)
    opening = {
        sid: _clip(f"{speaker}: {text}" if speaker else text)
        for sid, (speaker, text) in views.opening_turns(store.conn, ids).items()
    }
    days: list[dict[str, Any]] = []
    for sid, key, source, title, start, n, first, last in rows:
        day = start[:10] if start else "undated"
        if not days or days[-1]["day"] != day:
            days.append({"day": day, "sessions": []})
        tps = topics.get(sid, [])
        themes = sorted({(t["theme_id"], t["theme"]) for t in tps if t["theme_id"] is not None})
        days[-1]["sessions"].append(
            {
                "session_id": sid,
                "key": key,
                "source": source,
                "title": title,
                "started_at": start,
                "turns": n,
                "first": first,
                "last": last,
                "preview": opening.get(sid, ""),
                "topics": tps,
                "themes": [{"theme_id": int(i), "label": label} for i, label in themes],
            }
        )
    return {"total": total, "offset": offset, "limit": limit, "days": days}


def session(store: Store, session_id: int) -> dict[str, Any]:
    """One session and its turns in order (texts in full)."""
    row = views.session_head(store.conn, session_id)
    if row is None:
        raise NotFound(f"no session with id {session_id}")
    turns = [
        {"turn_id": i, "ord": o, "speaker": sp, "role": ro, "timestamp": ts, "text": tx, "source_id": src}
        for i, o, sp, ro, ts, tx, src in views.session_turns(store.conn, session_id)
    ]
    return {
        "session_id": row.id,
        "key": row.key,
        "source": row.source,
        "title": row.title,
        "started_at": row.started_at,
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
    spans = views.cue_spans(store.conn, turn_id)
    sid, key, source, ord_, speaker, role, ts, text, source_id = views.turn_meta(store.conn, turn_id)
    enr = views.turn_enrichment(store.conn, turn_id)
    edges: list[dict[str, Any]] = [
        {"direction": d, "turn_id": other, "kind": kind, "weight": weight, "reason": reason}
        for d, other, kind, weight, reason in views.turn_edges(store.conn, turn_id)
    ]
    others = views.turn_previews(store.conn, [e["turn_id"] for e in edges])
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
        "session_id": sid,
        "session": key,
        "source": source,
        "position": ord_,
        "speaker": speaker,
        "role": role,
        "timestamp": ts,
        "text": text,
        "source_id": source_id,
        "cues": cue_list,
        "tags": sorted({t for c in cues for t in c.tags}),
        "facts": [c for c in cue_list if c["kind"] == "fact" or c["relation"]],
        "memory_type": enr.memory_type if enr else None,
        "type_source": enr.type_source if enr else None,
        "low_info": enr.low_info if enr else False,
        "enriched_by": enr.model if enr else None,
        "edges": edges,
    }


def health(store: Store) -> dict[str, Any]:
    """Layer coverage, the job queue by kind and state (running and parked ones with
    their errors), the models, and the database's size."""
    stats = store.stats()
    layers = layer_stats(store)
    jobs: dict[str, dict[str, int]] = {}
    for kind, state, n in views.job_counts(store.conn):
        jobs.setdefault(kind, dict.fromkeys(JOB_STATES, 0))[state] = n
    running = [
        {"job": j, "kind": k, "turn_id": t, "owner": o, "until": u, "attempts": a, "error": e}
        for j, k, t, o, u, a, e in views.running_jobs(store.conn, limit=50)
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
    if turn_id is not None and session_id is None:
        if not views.turn_exists(store.conn, turn_id):
            raise NotFound(f"no turn with id {turn_id}")
        return {"forgotten": store.forget([turn_id])}
    if session_id is None or turn_id is not None:
        raise InputError("forget needs exactly one of turn_id and session_id")
    row = views.session_key_source(store.conn, session_id)
    if row is None:
        raise NotFound(f"no session with id {session_id}")
    return {"forgotten": store.forget(session=row[0], source=row[1]), "session": row[0]}
