"""How much of the store each model layer covers, and the queue's state (``localmem stats``)."""

from __future__ import annotations

from typing import Any

from localmem.enrichment.antecedent import cable_stats
from localmem.enrichment.topics import KIND as TOPICS
from localmem.storage.layers import calls, cues
from localmem.storage.layers.queue import counts, parked
from localmem.storage.write.store import Store


def layer_stats(store: Store) -> dict[str, Any]:
    """How much of the store each model layer covers, and the queue's state."""
    conn = store.conn
    c = cues.extraction_counts(conn)
    turns, enriched, kept, rejected = c["turns"], c["enriched_turns"], c["cues_kept"], c["cues_rejected"]
    return {
        "turns": turns,
        "enriched_turns": enriched,
        "enriched_pct": round(100.0 * enriched / turns, 1) if turns else 0.0,
        "low_information_turns": c["low_information_turns"],
        "turns_with_extracted_cues": c["turns_with_extracted_cues"],
        "memory_types": {t: int(c["memory_types"].get(t, 0)) for t in ("event", "opinion", "plan", "state_change")},
        "memory_type_from_model": c["memory_type_from_model"],
        "cues_kept": kept,
        "cues_rejected": rejected,
        "rejected_cue_rate": round(rejected / (kept + rejected), 3) if kept + rejected else 0.0,
        "tags": c["tags"],
        "themes": c["themes"],
        "models": c["models"],
        "jobs": counts(conn),
        "topic_jobs": counts(conn, TOPICS),
        # parsed / unparsed model replies per purpose, over the store's life (localmem/storage/layers/calls.py)
        "model_calls": calls.totals(conn),
        "recent_reply_failures": calls.recent_failures(conn),
        "antecedent": cable_stats(store),
        "parked": parked(conn),
    }
