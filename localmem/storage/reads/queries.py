"""Read-side SQL of the read path: FTS5 bm25 rankings and lookups, turn rows, graph edges.

Scoring happens in ``localmem/retrieval/``; dense rankings come from the in-memory
mirrors (``localmem/storage/vectors/mirrors.py``, ``vectors.py``). bm25 scores are returned positive (higher = better).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from localmem.records import ProjectScope
from localmem.storage.engine.db import Conn
from localmem.storage.engine.inlist import marks, rows_in
from localmem.util.text import fts_query

# Words too common in questions to say anything about which turn answers them; dropping
# them also keeps FTS5 from scoring nearly every row for every question.
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

FTS_TABLES = ("turns_fts", "cues_fts", "extracted_cues_fts")
_TERM_COUNTS = 20_000  # cached document counts per connection (~3 MB at most)


@dataclass(frozen=True)
class Filter:
    as_of: str | None = None  # naive ISO-8601: turns after it are invisible
    scope: str | None = None  # a session source or a session key
    project: ProjectScope | None = None  # its sessions, and what a person said anywhere (retrieval/scope.py)
    exclude: str | None = None  # a session key whose turns are not seen (the agent's current session)
    # Only turns strictly earlier than this turn id in conversation order (time, then
    # session, then place in session): CABLE's construction searches M_<i.
    before: int | None = None


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


def lexical(
    conn: Conn,
    table: str,
    query: str,
    limit: int = 1000,
    *,
    common: tuple[float, int] | None = None,
    max_rows: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """The best ``limit`` matches (-1: all) of an FTS table with their bm25: (rowids, scores).

    Far more than a top-k list needs: the scorer wants bm25 for pool turns below the top
    too (rows past ``limit`` score 0, as weak matches nearly do). FTS5 scores every match
    for ``ORDER BY bm25`` anyway (2.4 ms for 2.3k matches vs 1.2 ms for the top 30 at
    10k turns); per-row lookups with ``rowid IN (...)`` re-ran the query per row (86 ms
    for a 300-turn pool).

    ``common`` = (share, rows): terms in more than that share of the rows are left out
    (:func:`choose_terms`). ``max_rows`` > 0 bounds the work whatever the store's size:
    the rarest terms are kept while their matches add up to at most ``max_rows``, so
    FTS5 scores at most that many rows, with or without ``limit`` (-1 under a filter)."""
    if table not in FTS_TABLES:
        raise ValueError(f"not an FTS table: {table}")
    terms = choose_terms(conn, table, fts_query(query, STOPWORDS), common, max_rows)
    if not terms:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    rows = conn.execute(
        f"SELECT rowid, -bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}) LIMIT ?",
        (" OR ".join(terms), limit),
    ).fetchall()
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    ids, scores = zip(*rows, strict=True)
    return np.array(ids, dtype=np.int64), np.array(scores, dtype=np.float64)


def choose_terms(conn: Conn, table: str, match: str, common: tuple[float, int] | None, max_rows: int) -> list[str]:
    """The OR-ed terms of ``match`` worth ranking, in query order.

    The common-term rule: leave out terms found in more than ``share`` of ``rows``
    documents (unless that would leave none). Their bm25 weight is small, but FTS5 scores
    every document they match: on 10k synthetic turns, dropping terms in >10% of turns
    took ranking from 5.6 ms to 0.7 ms (+0.6 ms for these counts).

    The row bound (``max_rows`` > 0): a share grows with the store (10% of 1M turns is
    100k rows, ~4 us each to score), so the remaining terms are taken rarest first while
    their document counts add up to at most ``max_rows``; terms past it are left out, all
    of them if even the rarest matches more rows. Each count stops at ``max_rows`` + 1
    rows, so no step of a query reads more than ``max_rows`` rows per term."""
    terms = match.split(" OR ") if match else []
    if not terms or (max_rows <= 0 and (common is None or len(terms) < 2)):
        return terms
    probe = max_rows + 1 if max_rows > 0 else -1
    sql = f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT ?)"
    # Document counts are the same for every query until the store changes, and a user's
    # queries repeat terms (names, their topics): counted once per store state.
    known = conn.content_cache("fts_term_counts")
    if len(known) > _TERM_COUNTS:
        known.clear()
    df = {}
    for t in terms:
        if (table, t, probe) not in known:
            known[(table, t, probe)] = int(conn.one(sql, (t, probe))[0])
        df[t] = known[(table, t, probe)]
    if common is not None:
        share, rows = common
        rare = [t for t in terms if df[t] <= share * rows]
        terms = rare or terms
    if max_rows > 0:
        kept, total = set(), 0
        for t in sorted(terms, key=lambda t: df[t]):
            if total + df[t] > max_rows:
                break
            kept.add(t)
            total += df[t]
        terms = [t for t in terms if t in kept]
    return terms


def turn_rows(conn: Conn, ids: Iterable[int]) -> dict[int, TurnRow]:
    sql = (
        "SELECT t.id, t.session_id, s.key, s.started_at, t.ord, t.speaker, t.role, t.text, t.ts, "
        "t.source_id, t.words FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.id IN ({marks})"
    )
    # set order, as before the one IN-list helper: the chunks, and so the dict's order, stay the same
    return {int(r[0]): TurnRow(*r) for r in rows_in(conn, sql, list(set(ids)))}


def project_sessions(conn: Conn, project: ProjectScope) -> list[int]:
    """Session ids of a project: run in its root or a folder inside it, or in a clone of
    its repository."""
    root = project.root.rstrip("/") or "/"
    inside = root if root.endswith("/") else root + "/"
    rows = conn.execute(
        "SELECT id FROM sessions WHERE (cwd != '' AND (cwd = ? OR substr(cwd, 1, ?) = ?)) "
        "OR (? != '' AND repository = ?)",
        (root, len(inside), inside, project.repository, project.repository),
    )
    return [int(r[0]) for r in rows]


def latest_project_turns(conn: Conn, project: ProjectScope, exclude_key: str, limit: int) -> list[TurnRow]:
    """The last ``limit`` turns (in order) of the project's most recently active session
    other than ``exclude_key``; none when it has no other session."""
    ids = project_sessions(conn, project)
    if not ids:
        return []
    # one JSON parameter: a project may have more sessions than a statement can bind
    row = conn.execute(
        "SELECT s.id FROM sessions s JOIN turns t ON t.session_id = s.id "
        "WHERE s.id IN (SELECT value FROM json_each(?)) AND s.key != ? "
        "GROUP BY s.id ORDER BY max(coalesce(t.ts, s.started_at, '')) DESC, s.id DESC LIMIT 1",
        (json.dumps([int(i) for i in ids]), exclude_key),
    ).fetchone()
    if row is None:
        return []
    last = [
        int(r[0])
        for r in conn.execute("SELECT id FROM turns WHERE session_id = ? ORDER BY ord DESC LIMIT ?", (row[0], limit))
    ]
    rows = turn_rows(conn, last)
    return sorted(rows.values(), key=lambda r: r.ord)


def sessions_with_key(conn: Conn, key: str) -> list[int]:
    """Session ids with this key (of any source)."""
    return [int(r[0]) for r in conn.execute("SELECT id FROM sessions WHERE key = ?", (key,))]


def scope_sessions(conn: Conn, scope: str) -> list[int]:
    """Session ids a scope names: every session of that source, or sessions with that key."""
    return [int(r[0]) for r in conn.execute("SELECT id FROM sessions WHERE source = ? OR key = ?", (scope, scope))]


def edges_of(conn: Conn, ids: Iterable[int], kinds: tuple[str, ...]) -> list[tuple[int, int, str, float, str]]:
    """Edges touching ``ids`` in either direction: (seed, other, kind, weight, reason)."""
    ids = list(ids)
    if not ids:
        return []
    at, of = marks(len(ids)), marks(len(kinds))
    rows = conn.execute(
        f"SELECT src, dst, kind, weight, reason FROM edges WHERE src IN ({at}) AND kind IN ({of}) "
        f"UNION ALL SELECT dst, src, kind, weight, reason FROM edges WHERE dst IN ({at}) AND kind IN ({of})",
        [*ids, *kinds, *ids, *kinds],
    ).fetchall()
    return [(int(a), int(b), str(k), float(w), str(r)) for a, b, k, w, r in rows]


class AntecedentEdge(NamedTuple):
    seed: int  # the turn asked about
    other: int  # the turn linked to it
    earlier: bool  # True: ``other`` is the seed's antecedent (edge other -> seed)
    reason: str  # the verifier's one line


def antecedent_edges(conn: Conn, seeds: list[int]) -> list[AntecedentEdge]:
    """Antecedent edges touching ``seeds``, seen from the seed's side: first those into
    a seed, then those out of one."""
    if not seeds:
        return []
    at = marks(len(seeds))
    rows = conn.execute(
        f"SELECT dst, src, 1, reason FROM edges WHERE kind = 'antecedent' AND dst IN ({at}) "
        f"UNION ALL SELECT src, dst, 0, reason FROM edges WHERE kind = 'antecedent' AND src IN ({at})",
        [*seeds, *seeds],
    ).fetchall()
    return [AntecedentEdge(int(a), int(b), bool(e), str(r)) for a, b, e, r in rows]
