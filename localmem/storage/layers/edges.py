"""CABLE's antecedent edges in the store: what the construction reads, and its result.

``commit_antecedents`` is step 6 of ``localmem/enrichment/antecedent.py``, ONE transaction:
the model-call records, ``done`` (only while this worker holds the job), the run in
``antecedent_runs`` (a turn is processed once: its primary key) and the accepted links as
edges m_j -> m_i of kind ``antecedent`` with the verifier's weight and reason, through the
door (``changes.add_antecedents``, journaled). An earlier turn forgotten since the search
takes its link with it. Temporal and semantic edges are derived (``storage/write/store.py``,
``storage/write/graph.py``) and never pass here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from localmem.models.replies import CallRecord
from localmem.storage.engine import db
from localmem.storage.layers import calls
from localmem.storage.layers.cues import session_speakers
from localmem.storage.layers.queue import Job, finish
from localmem.storage.write import changes
from localmem.storage.write.changes import LinkWrite


@dataclass(frozen=True)
class AntecedentInput:
    """What the construction reads of the new turn m_i."""

    speaker: str
    text: str
    ts: str | None
    session_id: int
    memory_type: str | None  # extraction's, None before or without it
    low_info: bool
    persons: list[str]  # the named speakers of its session


@dataclass(frozen=True)
class AntecedentRun:
    """The ``antecedent_runs`` record of one turn's construction."""

    turn_id: int
    memory_type: str | None
    skipped: str
    queries: list[str]
    direct: int
    retrieved: int
    candidates: int
    calls: int
    prompt_tokens: int
    generated_tokens: int
    variant: str
    model: str


def antecedent_input(conn: db.Conn, turn_id: int) -> AntecedentInput | None:
    """The turn, its extraction's memory type and flag, its session's speakers; None
    when it is gone."""
    row = conn.execute(
        "SELECT t.speaker, t.text, t.ts, t.session_id, e.memory_type, coalesce(e.low_info, 0) "
        "FROM turns t LEFT JOIN turn_enrichment e ON e.turn_id = t.id WHERE t.id = ?",
        (turn_id,),
    ).fetchone()
    if row is None:
        return None
    sid = int(row[3])
    mtype = None if row[4] is None else str(row[4])
    return AntecedentInput(str(row[0]), str(row[1]), row[2], sid, mtype, bool(row[5]), session_speakers(conn, [sid]))


def commit_antecedents(
    conn: db.Conn, job: Job, run: AntecedentRun, links: Sequence[LinkWrite], records: Sequence[CallRecord]
) -> bool:
    """Step 6 (see the module docstring). False when the job is no longer ours or the
    turn was processed before (then nothing but the call records is written)."""
    with db.transaction(conn):
        calls.write(conn, records)
        if not finish(conn, job.id) or run.skipped == "turn forgotten":
            return False
        return record_run(conn, run, links)


def record_run(conn: db.Conn, run: AntecedentRun, links: Sequence[LinkWrite]) -> bool:
    """Inside the caller's transaction: the turn's ``antecedent_runs`` record and its links
    through the door. False (nothing written) when the turn has a run already: a turn is
    processed once, by whichever construction (model or pair verifier) came first."""
    fresh = conn.execute(
        "INSERT INTO antecedent_runs(turn_id, memory_type, skipped, queries, direct, retrieved, candidates, "
        "accepted, calls, prompt_tokens, generated_tokens, variant, model) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(turn_id) DO NOTHING RETURNING turn_id",
        (
            run.turn_id,
            run.memory_type,
            run.skipped,
            json.dumps(run.queries),
            run.direct,
            run.retrieved,
            run.candidates,
            len(links),
            run.calls,
            run.prompt_tokens,
            run.generated_tokens,
            run.variant,
            run.model,
        ),
    ).fetchone()
    if fresh is None:
        return False
    changes.add_antecedents(conn, links, run.model)
    return True


def antecedent_totals(conn: db.Conn) -> dict[str, int]:
    """Sums over ``antecedent_runs`` (several stores' totals add up)."""
    row = conn.one(
        "SELECT count(*), sum(skipped != ''), sum(candidates), sum(accepted), sum(calls), "
        "sum(prompt_tokens), sum(generated_tokens) FROM antecedent_runs"
    )
    keys = ("runs", "skipped", "candidates", "accepted", "calls", "prompt_tokens", "generated_tokens")
    return dict(zip(keys, (int(x or 0) for x in row), strict=True))


def antecedent_edges(conn: db.Conn) -> int:
    """How many antecedent edges the store holds."""
    return int(conn.one("SELECT count(*) FROM edges WHERE kind = 'antecedent'")[0])
