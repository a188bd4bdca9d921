"""Model-extracted cues: what extraction reads, and its results into the store.

``commit_extractions`` is the write of one extraction step (``localmem/enrichment/enrich.py``),
ONE short transaction: the model-call records (``calls``), then per turn either its failed
attempt (``queue.record_failure``: back-off, then parked) or, while the worker still holds
its job, ``done`` with its extraction record and its cues (tags with them) through the
door (``changes.add_enrichment`` / ``add_cue``, journaled), each cue's FTS row and vector
(derived), and the turn's ``antecedent`` job (CABLE needs the memory type stored now);
last the semantic edges of the new cues. A turn already enriched, or whose job was taken
by another worker after our lease lapsed, is skipped, so a turn is enriched exactly once.

Extracted cues are indexed like statement cues (the FTS document and the embedded text
carry who said it and when, ``turn_doc``), in an FTS table of their own
(``extracted_cues_fts``, so the statement cues' bm25 statistics never shift); the cue
mirror picks the new vectors up at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from localmem.models.replies import CallRecord
from localmem.storage.engine import db
from localmem.storage.engine.inlist import marks
from localmem.storage.layers import calls
from localmem.storage.layers.queue import Job, finish, record_failure
from localmem.storage.write import binding, changes
from localmem.storage.write.changes import CueWrite, EnrichmentWrite
from localmem.storage.write.graph import link_semantic
from localmem.storage.write.jobs import ANTECEDENT, enqueue
from localmem.storage.write.store import Store
from localmem.storage.write.vectorize import turn_doc


@dataclass(frozen=True)
class TurnText:
    """What extraction reads of a turn."""

    turn_id: int
    speaker: str
    text: str
    ts: str | None


@dataclass(frozen=True)
class TurnCues:
    """One turn's extraction result for ``commit_extractions``: ``error`` set for a
    failed attempt (nothing else stored), else its record, cues and one vector per cue."""

    job: Job
    turn: TurnText
    enrichment: EnrichmentWrite
    cues: tuple[CueWrite, ...] = ()
    vectors: np.ndarray | None = None
    error: str = ""


def session_speakers(conn: db.Conn, session_ids: Sequence[int]) -> list[str]:
    """The distinct named speakers of some sessions, sorted."""
    if not session_ids:
        return []
    sql = (
        f"SELECT DISTINCT speaker FROM turns WHERE session_id IN ({marks(len(session_ids))}) AND speaker != '' "
        "ORDER BY speaker"
    )
    return [str(r[0]) for r in conn.execute(sql, list(session_ids))]


def extraction_inputs(conn: db.Conn, turn_ids: Sequence[int]) -> tuple[list[TurnText], list[str]]:
    """The turns in session order, and the speakers of their sessions."""
    rows = conn.execute(
        f"SELECT id, speaker, text, ts, session_id FROM turns WHERE id IN ({marks(len(turn_ids))}) "
        "ORDER BY session_id, ord",
        list(turn_ids),
    ).fetchall()
    people = session_speakers(conn, sorted({int(r[4]) for r in rows}))
    return [TurnText(int(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows], people


def commit_extractions(
    store: Store,
    results: Sequence[TurnCues],
    records: Sequence[CallRecord],
    *,
    model: str,
    owner: str,
    max_attempts: int,
) -> dict[int, str]:
    """Store one extraction step (see the module docstring); per turn what happened:
    ``written``, ``pending`` / ``parked`` (a failed attempt), ``skipped``."""
    conn = store.conn
    out: dict[int, str] = {}
    with db.transaction(conn):
        if any(r.vectors is not None and len(r.vectors) for r in results):
            # embedded before a reembed switched the store: refused, and the worker tries again
            binding.check_write(conn, store.embedder)
        calls.write(conn, records)
        for r in results:
            if r.error:
                out[r.turn.turn_id] = record_failure(conn, r.job, r.error, max_attempts, owner=owner)
            elif not finish(conn, r.job.id, owner):
                out[r.turn.turn_id] = "skipped"  # reclaimed by another worker after our lease lapsed
            elif _write_turn(conn, r, model):
                out[r.turn.turn_id] = "written"
            else:
                out[r.turn.turn_id] = "skipped"
        written = [t for t, state in out.items() if state == "written"]
        if written:
            link_semantic(conn, store.mirrors(), written, store.params.semantic_k)
    return out


def _write_turn(conn: db.Conn, r: TurnCues, model: str) -> bool:
    turn = r.turn
    turn_hash = changes.add_enrichment(conn, turn.turn_id, r.enrichment, model)
    if turn_hash is None:
        return False  # enriched before: never twice
    vecs = r.vectors if r.vectors is not None else np.zeros((len(r.cues), 0), dtype=np.float32)
    for cue, vec in zip(r.cues, vecs, strict=True):
        cid = changes.add_cue(conn, turn.turn_id, turn_hash, cue, model)
        if cid is None:
            continue
        conn.execute(
            "INSERT INTO extracted_cues_fts(rowid, doc) VALUES (?, ?)", (cid, turn_doc(turn.speaker, cue.text, turn.ts))
        )
        conn.execute("INSERT INTO cue_vec(cue_id, embedding) VALUES (?, ?)", (cid, vec.astype(np.float32).tobytes()))
    enqueue(conn, ANTECEDENT, (turn.turn_id,))
    return True


def keyword_texts(conn: db.Conn, turn_ids: Sequence[int]) -> list[str]:
    """The texts of the extracted keyword cues of some turns."""
    sql = f"SELECT text FROM cues WHERE kind = 'keyword' AND turn_id IN ({marks(len(turn_ids))})"
    return [str(r[0]) for r in conn.execute(sql, list(turn_ids))]


def extraction_counts(conn: db.Conn) -> dict[str, Any]:
    """How much of the store extraction covers (``localmem stats``)."""

    def one(sql: str) -> int:
        row = conn.execute(sql).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    types: dict[str | None, int] = dict(
        conn.execute("SELECT memory_type, count(*) FROM turn_enrichment GROUP BY memory_type").fetchall()
    )
    return {
        "turns": one("SELECT count(*) FROM turns"),
        "enriched_turns": one("SELECT count(*) FROM turn_enrichment"),
        "cues_kept": one("SELECT sum(cues_kept) FROM turn_enrichment"),
        "cues_rejected": one("SELECT sum(cues_rejected) FROM turn_enrichment"),
        "low_information_turns": one("SELECT count(*) FROM turn_enrichment WHERE low_info = 1"),
        "turns_with_extracted_cues": one(
            "SELECT count(DISTINCT turn_id) FROM cues WHERE kind IN ('triple', 'keyword', 'fact')"
        ),
        "memory_types": types,
        "memory_type_from_model": one("SELECT count(*) FROM turn_enrichment WHERE type_source = 'model'"),
        "tags": one("SELECT count(*) FROM tags"),
        "themes": one("SELECT count(*) FROM topics WHERE kind = 'theme'"),
        "models": [str(r[0]) for r in conn.execute("SELECT DISTINCT model FROM turn_enrichment WHERE model != ''")],
    }
