"""How much of the store each model layer covers, and the queue's state (``localmem stats``)."""

from __future__ import annotations

from typing import Any

from localmem.enrichment.antecedent import cable_stats
from localmem.enrichment.topics import KIND as TOPICS
from localmem.storage import calls
from localmem.storage.queue import counts, parked
from localmem.storage.store import Store


def layer_stats(store: Store) -> dict[str, Any]:
    """How much of the store each model layer covers, and the queue's state."""
    conn = store.conn

    def one(sql: str) -> int:
        row = conn.execute(sql).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    turns = one("SELECT count(*) FROM turns")
    enriched = one("SELECT count(*) FROM turn_enrichment")
    kept = one("SELECT sum(cues_kept) FROM turn_enrichment")
    rejected = one("SELECT sum(cues_rejected) FROM turn_enrichment")
    types: dict[str | None, int] = dict(
        conn.execute("SELECT memory_type, count(*) FROM turn_enrichment GROUP BY memory_type").fetchall()
    )
    with_cues = one("SELECT count(DISTINCT turn_id) FROM cues WHERE kind IN ('triple', 'keyword', 'fact')")
    return {
        "turns": turns,
        "enriched_turns": enriched,
        "enriched_pct": round(100.0 * enriched / turns, 1) if turns else 0.0,
        "low_information_turns": one("SELECT count(*) FROM turn_enrichment WHERE low_info = 1"),
        "turns_with_extracted_cues": with_cues,
        "memory_types": {t: int(types.get(t, 0)) for t in ("event", "opinion", "plan", "state_change")},
        "memory_type_from_model": one("SELECT count(*) FROM turn_enrichment WHERE type_source = 'model'"),
        "cues_kept": kept,
        "cues_rejected": rejected,
        "rejected_cue_rate": round(rejected / (kept + rejected), 3) if kept + rejected else 0.0,
        "tags": one("SELECT count(*) FROM tags"),
        "themes": one("SELECT count(*) FROM topics WHERE kind = 'theme'"),
        "models": [str(r[0]) for r in conn.execute("SELECT DISTINCT model FROM turn_enrichment WHERE model != ''")],
        "jobs": counts(conn),
        "topic_jobs": counts(conn, TOPICS),
        # parsed / unparsed model replies per purpose, over the store's life (localmem/storage/calls.py)
        "model_calls": calls.totals(conn),
        "recent_reply_failures": calls.recent_failures(conn),
        "antecedent": cable_stats(store),
        "parked": parked(conn),
    }
