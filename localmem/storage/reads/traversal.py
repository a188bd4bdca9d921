"""The traversal toolkit's reads over cues, tags, turns and sessions, as named records.

One function per step of MRAgent's walk (``localmem.toolkit``): cue text -> cue ids,
cue -> tags, (cue, tag) -> turns, turn -> cues / neighbours / edges / place, time range
-> turns, sessions and their turns. People, facts and topics are in
:mod:`localmem.storage.reads.topic_reads`.

Invariants:
- read-only, on the connection given; a caller that needs several reads to see one
  commit wraps them in ``Store.snapshot`` (the toolkit wraps every tool);
- lists of ids are read in chunks of ``inlist.CHUNK`` bound variables where they may be
  long;
- orders are part of the contract: each function says the order it returns, and rows
  of equal rank come in SQLite's order, as the toolkit has always shown them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from localmem.storage.engine.db import Conn
from localmem.storage.engine.inlist import marks, rows_in
from localmem.storage.reads.queries import FTS_TABLES

T = TypeVar("T")


@dataclass(frozen=True)
class Counted(Generic[T]):
    """One page of rows with the number of rows all pages hold together."""

    total: int
    items: list[T]


class CueRow(NamedTuple):
    id: int
    kind: str
    text: str
    turn_id: int
    subject: str | None
    relation: str | None
    object: str | None


class CueHitRow(NamedTuple):
    """A cue with the time and speaker of its turn."""

    cue: CueRow
    ts: str | None
    speaker: str


class TagRow(NamedTuple):
    tag: str
    turns: int  # distinct turns tagged so
    cue_ids: list[int]  # ascending


class TurnPosition(NamedTuple):
    ts: str | None
    session_key: str
    session_started: str | None
    position: int  # 1-based place in its session
    session_turns: int


class SessionSummary(NamedTuple):
    key: str
    source: str
    title: str
    started_at: str | None
    turns: int
    first: str | None
    last: str | None


_CUE_COLS = "c.id, c.kind, c.text, c.turn_id, c.subject, c.relation, c.object"


def _cue(r: Sequence[Any]) -> CueRow:
    return CueRow(int(r[0]), str(r[1]), str(r[2]), int(r[3]), r[4], r[5], r[6])


def _count(conn: Conn, sql: str, args: Sequence[Any]) -> int:
    return int(conn.one(sql, args)[0])


# -- cues and tags ----------------------------------------------------------------------


def cue_ids_with_text(conn: Conn, text: str, limit: int | None = None) -> list[int]:
    """Ids of the cues whose text equals ``text`` case-insensitively (at most ``limit``)."""
    if limit is None:
        return [int(r[0]) for r in conn.execute("SELECT id FROM cues WHERE lower(text) = lower(?)", (text,))]
    rows = conn.execute("SELECT id FROM cues WHERE lower(text) = lower(?) LIMIT ?", (text, limit)).fetchall()
    return [int(r[0]) for r in rows]


def cue_text(conn: Conn, cue_id: int) -> str | None:
    row = conn.execute("SELECT text FROM cues WHERE id = ?", (cue_id,)).fetchone()
    return None if row is None else str(row[0])


def fts_match(conn: Conn, table: str, match: str, limit: int) -> list[tuple[int, float]]:
    """The best ``limit`` rows of an FTS table for the MATCH expression ``match``, as
    (rowid, bm25) with bm25 positive, best first. Unlike ``queries.lexical`` the
    expression is used as given (the toolkit builds all-words and any-word ones)."""
    if table not in FTS_TABLES:
        raise ValueError(f"not an FTS table: {table}")
    rows = conn.execute(
        f"SELECT rowid, -bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}) LIMIT ?",
        (match, limit),
    ).fetchall()
    return [(int(i), float(s)) for i, s in rows]


def cue_hits(conn: Conn, ids: Sequence[int]) -> dict[int, CueHitRow]:
    """The cues of ``ids`` that exist, each with its turn's time and speaker, by cue id."""
    sql = f"SELECT {_CUE_COLS}, t.ts, t.speaker FROM cues c JOIN turns t ON t.id = c.turn_id WHERE c.id IN ({{marks}})"
    return {int(r[0]): CueHitRow(_cue(r), r[7], str(r[8])) for r in rows_in(conn, sql, ids)}


def tags_of(conn: Conn, cue_ids: Sequence[int]) -> dict[int, list[str]]:
    """The tag names of each cue of ``cue_ids`` that has any, by name."""
    sql = "SELECT ct.cue_id, t.name FROM cue_tags ct JOIN tags t ON t.id = ct.tag_id WHERE ct.cue_id IN ({marks}) ORDER BY t.name"
    out: dict[int, list[str]] = {}
    for cid, name in rows_in(conn, sql, cue_ids):
        out.setdefault(int(cid), []).append(str(name))
    return out


def tag_counts(conn: Conn, cue_ids: Sequence[int]) -> list[TagRow]:
    """The tags of the cues ``cue_ids``, with how many distinct turns each tags and which
    of the cues carry it; most turns first, then by name."""
    rows = conn.execute(
        f"SELECT t.name, count(DISTINCT ct.turn_id), group_concat(DISTINCT ct.cue_id) FROM cue_tags ct "
        f"JOIN tags t ON t.id = ct.tag_id WHERE ct.cue_id IN ({marks(len(cue_ids))}) "
        "GROUP BY t.name ORDER BY 2 DESC, t.name",
        list(cue_ids),
    ).fetchall()
    return [TagRow(str(n), int(k), sorted(int(x) for x in str(c).split(","))) for n, k, c in rows]


def tagged_turns(conn: Conn, cue_ids: Sequence[int], tag: str) -> list[int]:
    """Distinct turns where one of ``cue_ids`` carries ``tag`` (case-insensitive)."""
    sql = (
        f"SELECT DISTINCT ct.turn_id FROM cue_tags ct JOIN tags t ON t.id = ct.tag_id "
        f"WHERE ct.cue_id IN ({marks(len(cue_ids))}) AND lower(t.name) = lower(?)"
    )
    return [int(r[0]) for r in conn.execute(sql, [*cue_ids, tag])]


def turns_of_cues(conn: Conn, cue_ids: Sequence[int]) -> list[int]:
    """Distinct turns the cues ``cue_ids`` point at."""
    sql = f"SELECT DISTINCT turn_id FROM cues WHERE id IN ({marks(len(cue_ids))})"
    return [int(r[0]) for r in conn.execute(sql, list(cue_ids))]


def cues_of_turn(conn: Conn, turn_id: int, limit: int, offset: int) -> Counted[CueRow]:
    """A turn's cues: facts, then triples, keywords and the rest (statements), each by id."""
    total = _count(conn, "SELECT count(*) FROM cues WHERE turn_id = ?", (turn_id,))
    rows = conn.execute(
        f"SELECT {_CUE_COLS} FROM cues c WHERE c.turn_id = ? "
        "ORDER BY CASE c.kind WHEN 'fact' THEN 0 WHEN 'triple' THEN 1 WHEN 'keyword' THEN 2 ELSE 3 END, c.id "
        "LIMIT ? OFFSET ?",
        (turn_id, limit, offset),
    ).fetchall()
    return Counted(total, [_cue(r) for r in rows])


# -- turns ------------------------------------------------------------------------------


def neighbours(conn: Conn, turn_id: int, window: int) -> tuple[list[int], list[int]]:
    """The turns up to ``window`` places before (nearest first) and after (nearest
    first) ``turn_id`` in its session; the turn must exist (else ``NotFound``)."""
    sid, ord_ = conn.one("SELECT session_id, ord FROM turns WHERE id = ?", (turn_id,))
    before = conn.execute(
        "SELECT id FROM turns WHERE session_id = ? AND ord < ? ORDER BY ord DESC LIMIT ?", (sid, ord_, window)
    ).fetchall()
    after = conn.execute(
        "SELECT id FROM turns WHERE session_id = ? AND ord > ? ORDER BY ord LIMIT ?", (sid, ord_, window)
    ).fetchall()
    return [int(r[0]) for r in before], [int(r[0]) for r in after]


def out_edges(conn: Conn, turn_id: int) -> set[tuple[int, int, str]]:
    """The edges leaving ``turn_id``, as (src, dst, kind)."""
    return {
        (int(a), int(b), str(k))
        for a, b, k in conn.execute("SELECT src, dst, kind FROM edges WHERE src = ?", (turn_id,))
    }


def turn_position(conn: Conn, turn_id: int) -> TurnPosition | None:
    """When and where in its session a turn was said; None for an unknown turn."""
    row = conn.execute(
        "SELECT t.ts, s.key, s.started_at, t.session_id, t.ord FROM turns t JOIN sessions s ON s.id = t.session_id "
        "WHERE t.id = ?",
        (turn_id,),
    ).fetchone()
    if row is None:
        return None
    ts, key, started, sid, ord_ = row
    place, n = conn.one("SELECT sum(ord <= ?), count(*) FROM turns WHERE session_id = ?", (ord_, sid))
    return TurnPosition(ts, str(key), started, int(place), int(n))


def turns_in_range(
    conn: Conn,
    lo: str | None,
    hi: str | None,
    scope: str | None,
    limit: int,
    offset: int,
    project: tuple[Sequence[int], Collection[str]] | None = None,
) -> Counted[int]:
    """Ids of the dated turns with ``lo`` <= time <= ``hi`` (either bound may be None),
    in sessions of source or key ``scope`` when given, and under ``project`` = (its
    session ids, agent speakers) in those sessions or spoken by anyone but an agent; by
    time, session, place."""
    where = ["t.ts IS NOT NULL"]
    args: list[Any] = []
    if lo is not None:
        where.append("t.ts >= ?")
        args.append(lo)
    if hi is not None:
        where.append("t.ts <= ?")
        args.append(hi)
    if scope:
        where.append("t.session_id IN (SELECT id FROM sessions WHERE source = ? OR key = ?)")
        args += [scope, scope]
    if project is not None:
        sessions, agents = list(project[0]), sorted(project[1])
        inside = f"t.session_id IN ({marks(len(sessions))})" if sessions else "0"
        where.append(f"({inside} OR lower(trim(t.speaker)) NOT IN ({marks(len(agents))}))")
        args += [*sessions, *agents]
    cond = " AND ".join(where)
    total = _count(conn, f"SELECT count(*) FROM turns t WHERE {cond}", args)
    ids = [
        int(r[0])
        for r in conn.execute(
            f"SELECT t.id FROM turns t WHERE {cond} ORDER BY t.ts, t.session_id, t.ord LIMIT ? OFFSET ?",
            [*args, limit, offset],
        )
    ]
    return Counted(total, ids)


# -- sessions ---------------------------------------------------------------------------


def session_summaries(conn: Conn, limit: int, offset: int) -> Counted[SessionSummary]:
    """Sessions with their turn counts and time span, newest first (by start, else by
    first turn; then by id)."""
    total = _count(conn, "SELECT count(*) FROM sessions", ())
    rows = conn.execute(
        "SELECT s.key, s.source, s.title, s.started_at, count(t.id), min(t.ts), max(t.ts) FROM sessions s "
        "LEFT JOIN turns t ON t.session_id = s.id GROUP BY s.id "
        "ORDER BY coalesce(s.started_at, min(t.ts)) DESC, s.id DESC LIMIT ? OFFSET ?",
        (limit, offset),
    ).fetchall()
    return Counted(total, [SessionSummary(k, src, ti, st, int(n), a, b) for k, src, ti, st, n, a, b in rows])


def sessions_with_key(conn: Conn, key: str) -> list[int]:
    """Ids of the sessions with key ``key`` (one per source that has it)."""
    return [int(r[0]) for r in conn.execute("SELECT id FROM sessions WHERE key = ?", (key,))]


def turns_of_sessions(conn: Conn, session_ids: Sequence[int], limit: int, offset: int) -> Counted[int]:
    """Ids of the turns of ``session_ids``, by session, then place."""
    sids = list(session_ids)
    cond = f"session_id IN ({marks(len(sids))})"
    total = _count(conn, f"SELECT count(*) FROM turns WHERE {cond}", sids)
    ids = [
        int(r[0])
        for r in conn.execute(
            f"SELECT id FROM turns WHERE {cond} ORDER BY session_id, ord LIMIT ? OFFSET ?", [*sids, limit, offset]
        )
    ]
    return Counted(total, ids)


def session_started(conn: Conn, source: str, key: str) -> str | None:
    """The start time of the session ``key`` of ``source``; None when it has none or
    does not exist."""
    row = conn.execute("SELECT started_at FROM sessions WHERE source = ? AND key = ?", (source, key)).fetchone()
    return str(row[0]) if row and row[0] else None
