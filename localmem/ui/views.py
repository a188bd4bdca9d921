"""What the Ask, Turn and Health pages show, as JSON-ready dicts. Read-only.

They reuse the library where it has the answer (``retrieval.trace`` for Ask, ``toolkit``
for a turn's cues and tags, ``enrichment.layers`` for coverage, the recall log for what
recalled a turn, ``models.llm`` for whether a model can answer at all) and otherwise the named reads of ``localmem.storage.reads.views`` (no SQL
here). The browser's pages (Find, Timeline, a session) are ``browse``, its writes
``forgetting``, the recall log's page ``injected``. Errors are the library's
(``InputError``, ``NotFound``); the app translates them.
"""

from __future__ import annotations

import re
from typing import Any

from localmem.enrichment.layers import layer_stats
from localmem.errors import ModelError
from localmem.models.llm import embedded_model_path, is_embedded_model, model_layer_installed
from localmem.retrieval.trace import trace
from localmem.storage.layers.queue import parked
from localmem.storage.reads import views
from localmem.storage.write.store import Store
from localmem.toolkit.turns import turn_cues
from localmem.ui import injected

TEXT_PREVIEW = 240  # characters of a turn shown in lists
JOB_STATES = ("pending", "running", "done", "parked")
# An agent's tool call as ingest keeps it: one compact line (``ingest/_agent.tool_line``).
TOOL_LINE = re.compile(r"^(ran|edited|read|searched|fetched|delegated|used): .+$", re.MULTILINE)


def ask(store: Store, query: str, budget: int | None, as_of: str | None, scope: str | None) -> dict[str, Any]:
    """The context a client gets for ``query`` and the trace of how it was chosen."""
    return trace(store, query, budget, as_of or None, scope or None).to_dict()


def _clip(text: str) -> str:
    return text if len(text) <= TEXT_PREVIEW else text[:TEXT_PREVIEW].rstrip() + " …"


def turn(store: Store, turn_id: int) -> dict[str, Any]:
    """A turn in full: text, cues with their spans and tags, facts, memory type, and its
    edges in and out (with the verifier's reason on antecedent links)."""
    page = turn_cues(store, turn_id, limit=100)  # raises NotFound for an unknown turn
    cues = page.items[0].cues
    spans = views.cue_spans(store.conn, turn_id)
    sid, key, source, ord_, speaker, role, ts, text, source_id = views.turn_meta(store.conn, turn_id)
    turn_hash = views.turn_hash(store.conn, turn_id)
    head = views.session_head(store.conn, sid)
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
        "hash": turn_hash,
        "client": head.client if head else "",
        "project": {"cwd": head.cwd, "repository": head.repository, "branch": head.branch}
        if head and head.cwd
        else None,
        "tool_lines": [m.group(0) for m in TOOL_LINE.finditer(text)] if role == "assistant" else [],
        "recalls": injected.of_turn(store, turn_id),
    }


def model_in_use(model: str | None) -> str:
    """The Health page's model card: the model that answers, or why none does (a lean
    install has no model layer; a configured model is then unused)."""
    if not model_layer_installed():
        unused = f"; the configured {model} is unused" if model else ""
        return f"not installed: the model layer (llama-cpp-python, the `llm` extra) is absent{unused}; enrich, answer and explore need it"
    if model and not is_embedded_model(model):
        return model
    try:
        path = embedded_model_path()
    except ModelError:
        return "none: no model configured and the embedded test model is not installed (set `model` to a GGUF file)"
    return f"embedded default ({path.name}, a test model)"


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
        "model": model_in_use(settings.model),
        "enrichment_models": layers["models"],
        "layers": layers,
        "jobs": jobs,
        "running": running,
        "parked": parked(store.conn, limit=50),
    }
