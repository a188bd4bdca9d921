"""Read-side SQL: FTS5 bm25 rankings and lookups, turn rows, graph edges.

Scoring happens in ``localmem/reconstruct.py``; dense rankings come from the in-memory
mirrors (``localmem/vectors.py``). bm25 scores are returned positive (higher = better).
A ``keep`` callback filters ranked rows (as_of / scope); rankings fetch further down
until enough rows pass it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import apsw
import numpy as np

from localmem.text import fts_query

# Words too common in questions to say anything about which turn answers them; dropping
# them also keeps FTS5 from scoring nearly every row for every question.
STOPWORDS = frozenset(
    """a an the and or but if of to in on at by for with about from into as is are was were be been
    being am do does did done have has had having i me my we our you your he him his she her they them
    their it its this that these those what which who whom whose when where why how there here than
    then so not no yes can could would should will shall may might must just also very too any some
    all each both more most other such only own same s t don doesn didn ve ll re d m""".split()
)

FTS_TABLES = ("turns_fts", "cues_fts")
Keep = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Filter:
    as_of: str | None = None  # naive ISO-8601: turns after it are invisible
    scope: str | None = None  # a session source or a session key

    @property
    def active(self) -> bool:
        return self.as_of is not None or self.scope is not None


@dataclass(frozen=True)
class TurnRow:
    id: int
    session_id: int
    session_key: str
    session_started: str | None
    ord: int
    speaker: str
    role: str
    text: str
    ts: str | None
    source_id: str | None
    words: int


def lexical(conn: apsw.Connection, table: str, query: str, k: int, keep: Keep | None = None) -> list[tuple[int, float]]:
    """Top-k rows of an FTS table by bm25, best first: (rowid, score)."""
    if table not in FTS_TABLES:
        raise ValueError(f"not an FTS table: {table}")
    match = fts_query(query, STOPWORDS)
    if not match or k <= 0:
        return []
    limit = k if keep is None else 4 * k
    while True:
        rows = conn.execute(
            f"SELECT rowid, -bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}) LIMIT ?",
            (match, limit),
        ).fetchall()
        if keep is None:
            return [(int(r), float(s)) for r, s in rows]
        mask = keep(np.array([r[0] for r in rows], dtype=np.int64)) if rows else np.zeros(0, dtype=bool)
        out = [(int(r), float(s)) for (r, s), ok in zip(rows, mask, strict=True) if ok]
        if len(out) >= k or len(rows) < limit:
            return out[:k]
        limit *= 4


def lexical_scores_for(conn: apsw.Connection, table: str, query: str, rowids: Iterable[int]) -> dict[int, float]:
    """bm25 of the given rows for the query (rows that do not match are absent)."""
    if table not in FTS_TABLES:
        raise ValueError(f"not an FTS table: {table}")
    match = fts_query(query, STOPWORDS)
    ids = list(rowids)
    out: dict[int, float] = {}
    if not match:
        return out
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for r, s in conn.execute(
            f"SELECT rowid, -bm25({table}) FROM {table} WHERE {table} MATCH ? AND rowid IN ({marks})",
            [match, *chunk],
        ):
            out[int(r)] = float(s)
    return out


def turn_rows(conn: apsw.Connection, ids: Iterable[int]) -> dict[int, TurnRow]:
    ids = list(set(ids))
    out: dict[int, TurnRow] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for r in conn.execute(
            "SELECT t.id, t.session_id, s.key, s.started_at, t.ord, t.speaker, t.role, t.text, t.ts, "
            f"t.source_id, t.words FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.id IN ({marks})",
            chunk,
        ):
            out[int(r[0])] = TurnRow(*r)
    return out


def scope_sessions(conn: apsw.Connection, scope: str) -> list[int]:
    """Session ids a scope names: every session of that source, or sessions with that key."""
    return [int(r[0]) for r in conn.execute("SELECT id FROM sessions WHERE source = ? OR key = ?", (scope, scope))]


def edges_of(
    conn: apsw.Connection, ids: Iterable[int], kinds: tuple[str, ...]
) -> list[tuple[int, int, str, float, str]]:
    """Edges touching ``ids`` in either direction: (seed, other, kind, weight, reason)."""
    ids = list(ids)
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    kmarks = ",".join("?" * len(kinds))
    rows = conn.execute(
        f"SELECT src, dst, kind, weight, reason FROM edges WHERE src IN ({marks}) AND kind IN ({kmarks}) "
        f"UNION ALL SELECT dst, src, kind, weight, reason FROM edges WHERE dst IN ({marks}) AND kind IN ({kmarks})",
        [*ids, *kinds, *ids, *kinds],
    ).fetchall()
    return [(int(a), int(b), str(k), float(w), str(r)) for a, b, k, w, r in rows]
