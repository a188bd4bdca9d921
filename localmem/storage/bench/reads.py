"""Named reads for the benchmarks: what they count and check in a store they built or
loaded (``localmem/bench/``), so the benches hold no SQL.

Every function takes an open connection and returns plain values or records; none
writes. They take ``apsw.Connection`` rather than ``Conn``, so a bench that polls a store
another process is writing may open it bare (read-only, no extension, its own busy
timeout). A count of an empty table is 0, never ``None``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import apsw

from localmem.errors import NotFound
from localmem.storage.engine.db import Row
from localmem.storage.layers.cues import TurnText  # one record of a turn's id, speaker, text and time


@dataclass(frozen=True)
class IndexCounts:
    """Rows of the indexes the write path keeps beside the turns and their statement cues."""

    turns_fts_rows: int
    turn_vectors: int
    statement_cues: int
    cues_fts_rows: int
    cue_vectors: int


def _first(conn: apsw.Connection, sql: str, args: tuple[Any, ...] = ()) -> Any:
    """The first cell of the first row, or None when there is no row."""
    row = conn.execute(sql, args).fetchone()
    return row[0] if row else None


def _count(conn: apsw.Connection, sql: str, args: tuple[Any, ...] = ()) -> int:
    return int(_first(conn, sql, args) or 0)


def count_turns(conn: apsw.Connection) -> int:
    return _count(conn, "SELECT count(*) FROM turns")


def count_cues(conn: apsw.Connection) -> int:
    """Cues of every kind."""
    return _count(conn, "SELECT count(*) FROM cues")


def count_jobs(conn: apsw.Connection) -> int:
    """Jobs of every kind and state."""
    return _count(conn, "SELECT count(*) FROM jobs")


def count_edges(conn: apsw.Connection, kind: str) -> int:
    """Edges of one kind (``temporal``, ``semantic``, ``antecedent``)."""
    return _count(conn, "SELECT count(*) FROM edges WHERE kind = ?", (kind,))


def index_counts(conn: apsw.Connection) -> IndexCounts:
    return IndexCounts(
        turns_fts_rows=_count(conn, "SELECT count(*) FROM turns_fts"),
        turn_vectors=_count(conn, "SELECT count(*) FROM turn_vec"),
        statement_cues=_count(conn, "SELECT count(*) FROM cues WHERE kind = 'statement'"),
        cues_fts_rows=_count(conn, "SELECT count(*) FROM cues_fts"),
        cue_vectors=_count(conn, "SELECT count(*) FROM cue_vec"),
    )


def turn_identities(conn: apsw.Connection) -> tuple[int, int]:
    """Turns stored, and how many distinct (session, native id) pairs they have."""
    row = conn.execute("SELECT count(*), count(DISTINCT session_id || ':' || source_id) FROM turns").fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def schema_objects(conn: apsw.Connection) -> int:
    """How many objects the schema holds: reading it reads page 1 (and needs the key)."""
    return _count(conn, "SELECT count(*) FROM sqlite_master")


def turn_text_counts(conn: apsw.Connection) -> Counter[str]:
    """How many stored turns hold each text."""
    return Counter(str(r[0]) for r in conn.execute("SELECT text FROM turns"))


def turn_texts(conn: apsw.Connection) -> list[TurnText]:
    """Every stored turn, in id order."""
    rows: list[Row] = conn.execute("SELECT id, speaker, text, ts FROM turns ORDER BY id").fetchall()
    return [TurnText(int(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows]


def max_turn_id(conn: apsw.Connection) -> int:
    """The highest turn id (0 when there are no turns)."""
    return _count(conn, "SELECT max(id) FROM turns")


def turn_from(conn: apsw.Connection, turn_id: int) -> TurnText:
    """The first stored turn whose id is ``turn_id`` or higher; none is ``NotFound``."""
    row = conn.execute("SELECT id, speaker, text, ts FROM turns WHERE id >= ? LIMIT 1", (turn_id,)).fetchone()
    if row is None:
        raise NotFound(f"no turn with an id of {turn_id} or more")
    return TurnText(int(row[0]), str(row[1]), str(row[2]), row[3])


def turn_id_of_source(conn: apsw.Connection, source_id: str) -> int:
    """The id of the turn with native id ``source_id``; none is ``NotFound``."""
    found = _first(conn, "SELECT id FROM turns WHERE source_id = ?", (source_id,))
    if found is None:
        raise NotFound(f"no turn with source id {source_id!r}")
    return int(found)


def source_ids(conn: apsw.Connection) -> dict[int, str | None]:
    """Every turn's id -> its native id."""
    return {int(r[0]): r[1] for r in conn.execute("SELECT id, source_id FROM turns")}


def turns_newest_first(conn: apsw.Connection, as_of: str | None = None) -> list[int]:
    """Turn ids, the latest session first and, in a session, the last turn first; only
    turns at or before ``as_of`` when given."""
    rows: list[Row] = conn.execute(
        "SELECT t.id FROM turns t JOIN sessions s ON s.id = t.session_id WHERE (? IS NULL OR t.ts <= ?) "
        "ORDER BY coalesce(s.started_at, t.ts) DESC, t.session_id DESC, t.ord DESC",
        (as_of, as_of),
    ).fetchall()
    return [int(r[0]) for r in rows]


def statement_spans(conn: apsw.Connection) -> dict[int, list[tuple[int, int]]]:
    """Per turn id, the spans of its statement cues in cue order."""
    spans: dict[int, list[tuple[int, int]]] = {}
    rows: list[Row] = conn.execute(
        "SELECT turn_id, span_start, span_end FROM cues WHERE kind = 'statement' ORDER BY id"
    ).fetchall()
    for tid, a, b in rows:
        spans.setdefault(int(tid), []).append((int(a), int(b)))
    return spans


def antecedent_reason(conn: apsw.Connection, src: int, dst: int) -> str | None:
    """The verifier's reason of the antecedent edge ``src`` -> ``dst``; None when there is none."""
    found = conn.execute(
        "SELECT reason FROM edges WHERE kind = 'antecedent' AND src = ? AND dst = ?", (src, dst)
    ).fetchone()
    return None if found is None else str(found[0])


def resume_unit(conn: apsw.Connection, path: str) -> int:
    """Where an ingest of ``path`` resumes (units before it are committed); 0 when never ingested."""
    return _count(conn, "SELECT resume_unit FROM ingest_files WHERE path = ?", (path,))


def jobs_held_by_pid(conn: apsw.Connection, pid: int) -> int:
    """Jobs running under a claim by process ``pid`` (any host)."""
    return _count(conn, "SELECT count(*) FROM jobs WHERE state = 'running' AND locked_by LIKE ?", (f"%:{pid}",))


def quick_check(conn: apsw.Connection) -> str | None:
    """``PRAGMA quick_check``'s first line: ``ok`` for a sound file."""
    found = _first(conn, "PRAGMA quick_check")
    return None if found is None else str(found)


def integrity_check(conn: apsw.Connection) -> str | None:
    """``PRAGMA integrity_check``'s first line: ``ok`` for a sound file."""
    found = _first(conn, "PRAGMA integrity_check")
    return None if found is None else str(found)


def foreign_key_violations(conn: apsw.Connection) -> int:
    return len(conn.execute("PRAGMA foreign_key_check").fetchall())
