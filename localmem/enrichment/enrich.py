"""Enrichment results into the store: extracted cues, tags, memory types.

``enrich_jobs`` is one worker step for claimed jobs (``localmem/storage/layers/queue.py``):
read the turns, extract (model calls), embed the new cues, then hand everything to
``localmem/storage/layers/cues.py`` (``commit_extractions``), whose ONE short transaction writes
the cues (with FTS rows and vectors), their tags, the turn's memory type and counts, the
semantic edges of the new cues, marks the jobs done, records the failed attempts of the
turns the model's reply did not cover (back-off, then parked: see
``localmem/models/replies.py`` for what fails) and logs the model calls. A failed turn is
never marked enriched. A job the worker no longer holds, or a turn already enriched, is
skipped, so a turn is enriched exactly once. No SQL here.

Extracted cues take part in retrieval (``RetrievalParams.extracted_cues``) and in
semantic linking as soon as they commit.
"""

from __future__ import annotations

import numpy as np

from localmem.enrichment.extract import TurnExtraction, TurnInput, extract
from localmem.enrichment.stats import WorkerStats
from localmem.models.llm import Generator
from localmem.storage.layers import cues
from localmem.storage.layers.cues import TurnCues, TurnText
from localmem.storage.layers.queue import Job, worker_id
from localmem.storage.write.changes import CueWrite, EnrichmentWrite
from localmem.storage.write.store import Store
from localmem.storage.write.vectorize import turn_doc


def load_turns(store: Store, turn_ids: list[int]) -> tuple[list[TurnInput], list[str]]:
    """The turns in session order, and the speakers of their sessions."""
    rows, people = cues.extraction_inputs(store.conn, turn_ids)
    return [TurnInput(r.turn_id, r.speaker, r.text, r.ts) for r in rows], people


def enrich_jobs(
    store: Store, gen: Generator, jobs: list[Job], stats: WorkerStats | None = None, max_attempts: int | None = None
) -> int:
    """Extract and store cues for the turns of ``jobs``; returns turns enriched. A turn
    the reply did not cover is a failed attempt of its job (``max_attempts``: default
    the settings' ``job_attempts``), counted in ``stats.failed`` / ``stats.parked``."""
    stats = stats if stats is not None else WorkerStats()
    max_attempts = max_attempts or store.settings.job_attempts
    turns, people = load_turns(store, [j.turn_id for j in jobs])
    attempt = max((j.attempts for j in jobs), default=1)  # a retry is claimed alone
    result = extract(gen, turns, people=people, batch_size=max(1, len(turns)), attempt=attempt)
    stats.calls += result.calls
    stats.prompt_tokens += result.prompt_tokens
    stats.generated_tokens += result.generated_tokens
    stats.unparsed_calls += result.unparsed_calls
    by_turn = {t.turn_id: t for t in turns}
    docs = [
        turn_doc(by_turn[ex.turn_id].speaker, c.text, by_turn[ex.turn_id].ts) for ex in result.turns for c in ex.cues
    ]
    vecs = store.embedder.embed(docs) if docs else np.zeros((0, store.embedder.dim), dtype=np.float32)
    job_of = {j.turn_id: j for j in jobs}
    todo: list[TurnCues] = []
    at = 0
    for ex in result.turns:
        todo.append(_turn_cues(job_of[ex.turn_id], by_turn[ex.turn_id], ex, vecs[at : at + len(ex.cues)]))
        at += len(ex.cues)
    states = cues.commit_extractions(
        store, todo, result.records, model=gen.model_id, owner=worker_id(), max_attempts=max_attempts
    )
    for ex in result.turns:
        state = states.get(ex.turn_id)
        if state in ("pending", "parked"):
            stats.failed += 1
            stats.parked += state == "parked"
        elif state == "written":
            stats.turns += 1
            stats.cues_kept += len(ex.cues)
            stats.cues_rejected += ex.rejected
    return sum(state == "written" for state in states.values())


def _turn_cues(job: Job, turn: TurnInput, ex: TurnExtraction, vecs: np.ndarray) -> TurnCues:
    record = EnrichmentWrite(ex.memory_type, ex.type_source, ex.low_info, len(ex.cues), ex.rejected)
    found = tuple(CueWrite(c.kind, c.text, c.start, c.end, c.subject, c.relation, c.object, c.tags) for c in ex.cues)
    text = TurnText(turn.turn_id, turn.speaker, turn.text, turn.ts)
    return TurnCues(job, text, record, found, vecs, ex.error)
