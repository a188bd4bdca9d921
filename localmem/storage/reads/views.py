"""The web view's reads (the Turn and Health pages, session heads and topics) and doctor's engine
probe and damage check, as named records.

Invariants:
- read-only, on the connection given; the web app runs each page in one snapshot
  (``Store.snapshot``), so a page's several reads see one commit;
- orders are part of the contract (each function says its own); texts come back whole,
  a page clips them itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import apsw

from localmem.storage.engine import db
from localmem.storage.engine.db import Conn
from localmem.storage.engine.inlist import marks


class SessionTopic(NamedTuple):
    """A session topic touching a session, with its theme (if any)."""

    session_id: int
    topic_id: int
    label: str
    summary: str
    theme_id: int | None
    theme: str | None


class SessionHead(NamedTuple):
    id: int
    key: str
    source: str
    title: str
    started_at: str | None
    client: str  # the agent that wrote it ('' for chat exports, MCP, the API)
    cwd: str  # its project, as the agent's log says ('' when none)
    repository: str
    branch: str


class CueSpan(NamedTuple):
    start: int
    end: int
    extractor: str


class TurnMeta(NamedTuple):
    session_id: int
    session_key: str
    source: str
    ord: int
    speaker: str
    role: str
    ts: str | None
    text: str
    source_id: str | None


class Enrichment(NamedTuple):
    memory_type: str | None
    type_source: str | None
    low_info: bool
    model: str | None


class EdgeRow(NamedTuple):
    direction: str  # out (this turn -> other) / in (other -> this turn)
    other: int
    kind: str
    weight: float
    reason: str | None


class TurnPreview(NamedTuple):
    speaker: str
    text: str
    ts: str | None


class JobCount(NamedTuple):
    kind: str
    state: str
    jobs: int


class RunningJob(NamedTuple):
    id: int
    kind: str
    turn_id: int | None
    owner: str | None
    until: Any  # the lease's end, as stored
    attempts: int
    error: str | None


class Engine(NamedTuple):
    sqlite: str
    apsw: str
    sqlite_vec: str


# -- timeline and session pages ---------------------------------------------------------


def session_topics(conn: Conn, session_ids: Sequence[int]) -> list[SessionTopic]:
    """Session topics with a turn in ``session_ids``, by session, then topic id."""
    if not session_ids:
        return []
    rows = conn.execute(
        "SELECT DISTINCT t.session_id, p.id, p.label, p.summary, th.id, th.label "
        "FROM topic_turns tt JOIN turns t ON t.id = tt.turn_id JOIN topics p ON p.id = tt.topic_id "
        "LEFT JOIN theme_topics x ON x.topic_id = p.id LEFT JOIN topics th ON th.id = x.theme_id "
        f"WHERE p.kind = 'session' AND t.session_id IN ({marks(len(session_ids))}) ORDER BY t.session_id, p.id",
        list(session_ids),
    ).fetchall()
    return [
        SessionTopic(int(s), int(p), label, summary, theme_id, theme) for s, p, label, summary, theme_id, theme in rows
    ]


def opening_turns(conn: Conn, session_ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """The first turn of each session of ``session_ids`` that has one: (speaker, text)."""
    if not session_ids:
        return {}
    return {
        int(sid): (speaker, str(text))
        for sid, speaker, text in conn.execute(
            "SELECT t.session_id, t.speaker, t.text FROM turns t WHERE t.id IN (SELECT (SELECT id FROM turns "
            f"WHERE session_id = s.id ORDER BY ord LIMIT 1) FROM sessions s WHERE s.id IN ({marks(len(session_ids))}))",
            list(session_ids),
        )
    }


def session_head(conn: Conn, session_id: int) -> SessionHead | None:
    row = conn.execute(
        "SELECT id, key, source, title, started_at, client, cwd, repository, branch FROM sessions WHERE id = ?",
        (session_id,),
    ).fetchone()
    return None if row is None else SessionHead(int(row[0]), *row[1:])


def turn_hash(conn: Conn, turn_id: int) -> str:
    """A turn's content hash (its identity on every device); an unknown turn is ``NotFound``."""
    return str(conn.one("SELECT hash FROM turns WHERE id = ?", (turn_id,))[0])


def turn_meta(conn: Conn, turn_id: int) -> TurnMeta:
    """A turn with its session's key and source; an unknown turn is ``NotFound``."""
    r = conn.one(
        "SELECT t.session_id, s.key, s.source, t.ord, t.speaker, t.role, t.ts, t.text, t.source_id "
        "FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.id = ?",
        (turn_id,),
    )
    return TurnMeta(int(r[0]), r[1], r[2], int(r[3]), r[4], r[5], r[6], r[7], r[8])


def cue_spans(conn: Conn, turn_id: int) -> dict[int, CueSpan]:
    """The character span and extractor of each cue of a turn, by cue id."""
    return {
        int(c): CueSpan(int(a), int(b), str(x))
        for c, a, b, x in conn.execute(
            "SELECT id, span_start, span_end, extractor FROM cues WHERE turn_id = ?", (turn_id,)
        )
    }


def turn_enrichment(conn: Conn, turn_id: int) -> Enrichment | None:
    """What the model layer recorded for a turn; None before it ran."""
    row = conn.execute(
        "SELECT memory_type, type_source, low_info, model FROM turn_enrichment WHERE turn_id = ?", (turn_id,)
    ).fetchone()
    return None if row is None else Enrichment(row[0], row[1], bool(row[2]), row[3])


def turn_edges(conn: Conn, turn_id: int) -> list[EdgeRow]:
    """Every edge of a turn: those leaving it, then those reaching it."""
    edges = []
    for direction, sql in (
        ("out", "SELECT e.dst, e.kind, e.weight, e.reason FROM edges e WHERE e.src = ?"),
        ("in", "SELECT e.src, e.kind, e.weight, e.reason FROM edges e WHERE e.dst = ?"),
    ):
        for other, kind, weight, reason in conn.execute(sql, (turn_id,)):
            edges.append(EdgeRow(direction, int(other), kind, weight, reason))
    return edges


def turn_previews(conn: Conn, ids: Sequence[int]) -> dict[int, TurnPreview]:
    """Speaker, whole text and time of the turns of ``ids`` that exist."""
    if not ids:
        return {}
    return {
        int(i): TurnPreview(sp, tx, ts)
        for i, sp, tx, ts in conn.execute(
            f"SELECT id, speaker, text, ts FROM turns WHERE id IN ({marks(len(ids))})", list(ids)
        )
    }


# -- health page and doctor -------------------------------------------------------------


def job_counts(conn: Conn) -> list[JobCount]:
    """Jobs by kind and state (only the pairs that have any)."""
    return [
        JobCount(str(k), str(s), int(n))
        for k, s, n in conn.execute("SELECT kind, state, count(*) FROM jobs GROUP BY kind, state")
    ]


def running_jobs(conn: Conn, limit: int = 50) -> list[RunningJob]:
    """Jobs a worker holds now, oldest first, with their owner, lease and last error."""
    return [
        RunningJob(int(j), k, t, o, u, a, e)
        for j, k, t, o, u, a, e in conn.execute(
            "SELECT id, kind, turn_id, locked_by, locked_until, attempts, last_error FROM jobs "
            "WHERE state = 'running' ORDER BY id LIMIT ?",
            (limit,),
        )
    ]


def engine() -> Engine:
    """The SQLite engine this process links, probed on a scratch in-memory database:
    loads sqlite-vec and makes an FTS5 table, or raises what failed."""
    conn = db.connect(":memory:")
    try:
        vec = str(conn.one("SELECT vec_version()")[0])
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    finally:
        conn.close()
    return Engine(apsw.sqlite_lib_version(), apsw.apsw_version(), vec)


def damage(conn: Conn, limit: int = 3) -> list[str]:
    """What ``PRAGMA quick_check`` finds wrong with the store, its first ``limit`` findings;
    empty for a sound file. Reads every page (seconds for a store of gigabytes), so doctor
    runs it, not ``stats``; SQLite may raise ``CorruptError`` instead of a finding."""
    found = [str(row[0]) for row in conn.execute(f"PRAGMA quick_check({int(limit)})")]
    return [] if found == ["ok"] else found


def antecedent_variants(conn: Conn, other_than: str) -> list[str]:
    """The CABLE variants (``antecedent_runs.variant``) that built this store's links,
    other than ``other_than``: a kept benchmark store must not mix two."""
    rows = conn.execute("SELECT DISTINCT variant FROM antecedent_runs WHERE variant != ?", (other_than,)).fetchall()
    return [str(r[0]) for r in rows]
