"""Enrichment results into the store: extracted cues, tags, memory types.

``enrich_jobs`` is one worker step for claimed jobs (``localmem/storage/queue.py``):
read the turns, extract (model calls), embed the new cues, then ONE short transaction
writes the cues (with FTS rows and vectors), their tags, the turn's memory type and
counts, the semantic edges of the new cues, marks the jobs done, records the failed
attempts of the turns the model's reply did not cover (back-off, then parked: see
``localmem/models/replies.py`` for what fails) and logs the model calls
(``localmem/storage/calls.py``). A failed turn is never marked enriched. A job the
worker no longer holds, or a turn already enriched, is skipped, so a turn is enriched
exactly once.

Extracted cues are indexed like statement cues (the FTS document and the embedded text
carry who said it and when, ``turn_doc``), in an FTS table of their own
(``extracted_cues_fts``, so the statement cues' bm25 statistics never shift); the
store's cue mirror picks the new vectors up, so they take part in retrieval
(``RetrievalParams.extracted_cues``) and in semantic linking at once.
"""

from __future__ import annotations

import numpy as np

from localmem.enrichment.extract import ExtractedCue, TurnExtraction, TurnInput, extract
from localmem.enrichment.stats import WorkerStats
from localmem.models.llm import Generator
from localmem.storage import calls, db
from localmem.storage.graph import link_semantic
from localmem.storage.queue import Job, finish, record_failure, worker_id
from localmem.storage.store import Store
from localmem.storage.vectorize import turn_doc

EXTRACTED_KINDS = ("triple", "keyword", "fact")


def load_turns(store: Store, turn_ids: list[int]) -> tuple[list[TurnInput], list[str]]:
    """The turns in session order, and the speakers of their sessions."""
    marks = ",".join("?" * len(turn_ids))
    rows = store.conn.execute(
        f"SELECT id, speaker, text, ts, session_id FROM turns WHERE id IN ({marks}) ORDER BY session_id, ord",
        turn_ids,
    ).fetchall()
    sessions = sorted({int(r[4]) for r in rows})
    people: list[str] = []
    if sessions:
        smarks = ",".join("?" * len(sessions))
        people = [
            str(r[0])
            for r in store.conn.execute(
                f"SELECT DISTINCT speaker FROM turns WHERE session_id IN ({smarks}) AND speaker != '' ORDER BY speaker",
                sessions,
            )
        ]
    return [TurnInput(int(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows], people


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
    owner = worker_id()
    written: list[int] = []
    at = 0
    with db.transaction(store.conn):
        calls.write(store.conn, result.records)
        for ex in result.turns:
            cue_vecs = vecs[at : at + len(ex.cues)]
            at += len(ex.cues)
            if ex.error:
                state = record_failure(store.conn, job_of[ex.turn_id], ex.error, max_attempts, owner=owner)
                stats.failed += 1
                stats.parked += state == "parked"
                continue
            if not finish(store.conn, job_of[ex.turn_id].id, owner):
                continue  # reclaimed by another worker after our lease lapsed
            if _write_turn(store, by_turn[ex.turn_id], ex, cue_vecs, gen.model_id):
                written.append(ex.turn_id)
                # CABLE's construction needs the memory type stored just now.
                store.conn.execute("INSERT OR IGNORE INTO jobs(kind, turn_id) VALUES ('antecedent', ?)", (ex.turn_id,))
                stats.turns += 1
                stats.cues_kept += len(ex.cues)
                stats.cues_rejected += ex.rejected
        if written:
            link_semantic(store.conn, store.mirrors(), written, store.params.semantic_k)
    return len(written)


def _write_turn(store: Store, turn: TurnInput, ex: TurnExtraction, vecs: np.ndarray, model_id: str) -> bool:
    conn = store.conn
    row = conn.execute(
        "INSERT INTO turn_enrichment(turn_id, memory_type, type_source, low_info, cues_kept, cues_rejected, model) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(turn_id) DO NOTHING RETURNING turn_id",
        (turn.turn_id, ex.memory_type, ex.type_source, int(ex.low_info), len(ex.cues), ex.rejected, model_id),
    ).fetchone()
    if row is None:
        return False  # enriched before: never twice
    for cue, vec in zip(ex.cues, vecs, strict=True):
        cid = _insert_cue(store, turn, cue, model_id)
        if cid is None:
            continue
        conn.execute("INSERT INTO cue_vec(cue_id, embedding) VALUES (?, ?)", (cid, vec.astype(np.float32).tobytes()))
        for tag in cue.tags:
            conn.execute("INSERT OR IGNORE INTO tags(name) VALUES (?)", (tag,))
            conn.execute(
                "INSERT OR IGNORE INTO cue_tags(cue_id, tag_id, turn_id) SELECT ?, id, ? FROM tags WHERE name = ?",
                (cid, turn.turn_id, tag),
            )
    return True


def _insert_cue(store: Store, turn: TurnInput, cue: ExtractedCue, model_id: str) -> int | None:
    row = store.conn.execute(
        "INSERT INTO cues(turn_id, kind, text, subject, relation, object, span_start, span_end, extractor) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id",
        (turn.turn_id, cue.kind, cue.text, cue.subject, cue.relation, cue.object, cue.start, cue.end, model_id),
    ).fetchone()
    if row is None:
        return None
    cid = int(row[0])
    store.conn.execute(
        "INSERT INTO extracted_cues_fts(rowid, doc) VALUES (?, ?)", (cid, turn_doc(turn.speaker, cue.text, turn.ts))
    )
    return cid
