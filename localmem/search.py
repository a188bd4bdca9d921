"""Read-side SQL: ranked candidate lists (vec0 KNN, FTS5 bm25), turn rows, graph edges.

Every function takes a ``Filter`` (as_of, scope) and returns plain tuples; scoring
happens in ``localmem/reconstruct.py``. Filters are applied after the index lookup,
so lookups over-fetch when a filter is active. Dense lists come from the in-memory
vector mirrors (``localmem/vectors.py``), lexical ones from FTS5 bm25.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import apsw
import numpy as np

from localmem.text import fts_query
from localmem.vectors import VectorMirror

# Words too common in questions to say anything about which turn answers them.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "about",
        "from",
        "into",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "done",
        "have",
        "has",
        "had",
        "having",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "he",
        "him",
        "his",
        "she",
        "her",
        "they",
        "them",
        "their",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "there",
        "here",
        "than",
        "then",
        "so",
        "not",
        "no",
        "yes",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "just",
        "also",
        "very",
        "too",
        "any",
        "some",
        "all",
        "each",
        "both",
        "more",
        "most",
        "other",
        "such",
        "only",
        "own",
        "same",
        "s",
        "t",
        "don",
        "doesn",
        "didn",
        "ve",
        "ll",
        "re",
        "d",
        "m",
    ]
)


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


def _visible(conn: apsw.Connection, ids: Iterable[int], flt: Filter) -> set[int]:
    ids = list(ids)
    if not flt.active or not ids:
        return set(ids)
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT t.id FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.id IN ({marks}) "
        "AND (? IS NULL OR t.ts IS NULL OR t.ts <= ?) AND (? IS NULL OR s.source = ? OR s.key = ?)",
        [*ids, flt.as_of, flt.as_of, flt.scope, flt.scope, flt.scope],
    ).fetchall()
    return {int(r[0]) for r in rows}


def dense(conn: apsw.Connection, mirror: VectorMirror, qvec: np.ndarray, m: int, flt: Filter) -> list[tuple[int, float]]:
    """Best ``m`` visible turns by their best-matching row of ``mirror`` (turn vectors,
    or cue vectors voting once per source turn), best first: (turn id, cosine)."""
    k = m if mirror.table == "turn" else 2 * m
    while True:
        hits = mirror.top(qvec, k * 4 if flt.active else k)
        out = _best_per_turn(conn, [(t, s) for _row, t, s in hits], m, flt)
        if len(out) >= m or len(hits) >= len(mirror.ids):
            return out
        k *= 4  # the filter hid too many: look further down the ranking


def lexical_turns(conn: apsw.Connection, query: str, m: int, flt: Filter) -> list[tuple[int, float]]:
    match = fts_query(query, STOPWORDS)
    if not match:
        return []
    k = m * 4 if flt.active else m
    rows = conn.execute(
        "SELECT rowid, -bm25(turns_fts) FROM turns_fts WHERE turns_fts MATCH ? ORDER BY bm25(turns_fts) LIMIT ?",
        (match, k),
    ).fetchall()
    ok = _visible(conn, (r[0] for r in rows), flt)
    return [(int(t), float(s)) for t, s in rows if t in ok][:m]


def lexical_cues(conn: apsw.Connection, query: str, m: int, flt: Filter) -> list[tuple[int, float]]:
    match = fts_query(query, STOPWORDS)
    if not match:
        return []
    k = m * 4 if flt.active else m * 2
    rows = conn.execute(
        "SELECT c.turn_id, -bm25(cues_fts) AS s FROM cues_fts JOIN cues c ON c.id = cues_fts.rowid "
        "WHERE cues_fts MATCH ? ORDER BY bm25(cues_fts) LIMIT ?",
        (match, k),
    ).fetchall()
    return _best_per_turn(conn, [(int(t), float(s)) for t, s in rows], m, flt)


def _best_per_turn(
    conn: apsw.Connection, hits: list[tuple[int, float]], m: int, flt: Filter
) -> list[tuple[int, float]]:
    ok = _visible(conn, (t for t, _ in hits), flt)
    seen: set[int] = set()
    out: list[tuple[int, float]] = []
    for t, s in hits:  # already best first
        if t in ok and t not in seen:
            seen.add(t)
            out.append((t, s))
    return out[:m]


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


def turn_vectors(conn: apsw.Connection, ids: list[int], dim: int) -> np.ndarray:
    if not ids:
        return np.zeros((0, dim), dtype=np.float32)
    marks = ",".join("?" * len(ids))
    rows = dict(conn.execute(f"SELECT turn_id, embedding FROM turn_vec WHERE turn_id IN ({marks})", ids).fetchall())
    out = np.zeros((len(ids), dim), dtype=np.float32)
    for i, t in enumerate(ids):
        blob = rows.get(t)
        if blob is not None:
            out[i] = np.frombuffer(blob, dtype=np.float32)
    return out


def session_neighbours(conn: apsw.Connection, ids: Iterable[int], window: int) -> list[tuple[int, int]]:
    """(turn, neighbour) pairs for turns within ``window`` places in the same session."""
    ids = list(ids)
    if not ids or window <= 0:
        return []
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT a.id, b.id FROM turns a JOIN turns b ON b.session_id = a.session_id "
        f"AND b.ord BETWEEN a.ord - ? AND a.ord + ? AND b.id != a.id WHERE a.id IN ({marks})",
        [window, window, *ids],
    ).fetchall()
    return [(int(a), int(b)) for a, b in rows]


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
