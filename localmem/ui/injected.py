"""The Injected page and a turn's recall history: what each MCP ``reconstruct`` /
``answer``, ``localmem query`` or agent hook handed a client, and why, from the recall log
(``storage.layers.recalls``: bounded, private, never synced).

A call lists the turns it handed in their place in the context with their reason
(anchor / temporal / semantic / extracted / antecedent), score and the reason's detail;
turns forgotten since are counted, not shown (their rows went with them).
"""

from __future__ import annotations

from typing import Any

from localmem.errors import InputError, NotFound
from localmem.storage.layers import recalls
from localmem.storage.write.store import Store

TEXT = 240


def _call(c: recalls.RecallCall) -> dict[str, Any]:
    return {
        "call_id": c.id,
        "at": c.at,
        "client": c.client,
        "tool": c.tool,
        "session": c.session,
        "project": c.project,
        "query": c.query,
        "budget": c.budget,
        "as_of": c.as_of,
        "scope": c.scope,
        "tokens": c.tokens,
        "turns": c.turns,
        "kept": c.kept,
        "forgotten": c.turns - c.kept,
    }


def calls(store: Store, limit: int = 50, offset: int = 0, client: str | None = None) -> dict[str, Any]:
    """One page of the log, newest first, with its clients and the setting that bounds it."""
    if not 0 < limit <= 500 or offset < 0:
        raise InputError("limit must be 1..500 and offset not negative")
    got = recalls.calls(store.conn, limit, offset, client or None)
    nxt = offset + len(got.items)
    return {
        "total": got.total,
        "offset": offset,
        "limit": limit,
        "next": nxt if nxt < got.total else None,
        "keep": store.settings.recall_log,
        "clients": [{"client": c, "calls": n} for c, n in recalls.clients(store.conn)],
        "calls": [_call(c) for c in got.items],
    }


def call(store: Store, call_id: int) -> dict[str, Any]:
    """One call and the turns it handed, in their place in the context."""
    c = recalls.call(store.conn, call_id)
    if c is None:
        raise NotFound(f"no recall-log call with id {call_id} (the log keeps the newest {store.settings.recall_log})")
    out = _call(c)
    out["handed"] = [
        {
            "turn_id": t.turn_id,
            "place": t.place,
            "reason": t.reason,
            "score": round(t.score, 4),
            "why": t.why,
            "session_id": t.session_id,
            "session": t.session,
            "speaker": t.speaker,
            "timestamp": t.ts,
            "text": t.text if len(t.text) <= TEXT else t.text[:TEXT].rstrip() + " …",
        }
        for t in recalls.call_turns(store.conn, call_id)
    ]
    return out


def of_turn(store: Store, turn_id: int) -> dict[str, Any]:
    """How often the log's calls handed ``turn_id``, the queries that did most, and the
    client sessions (an agent's) that recalled it most."""
    got = recalls.turn_recalls(store.conn, turn_id)
    return {
        "calls": got.total,
        "queries": [{"query": q.query, "calls": q.calls, "clients": q.clients, "last": q.last} for q in got.items],
        "sessions": [
            {"client": c, "session": s, "calls": n, "last": last}
            for c, s, n, last in recalls.turn_recall_sessions(store.conn, turn_id)
        ],
        "keep": store.settings.recall_log,
    }


def clear(store: Store) -> dict[str, Any]:
    return {"cleared": recalls.clear(store.conn)}
