"""The memory browser's reads: every session newest first (paged), counts per month, the
turns a filter lets through, the values each filter can take, and a window of a session.

A filter is a mapping of names in ``FILTERS`` to one value each (a date range, a source or
its family, a speaker, a role, the agent that wrote it, the project folder it ran in); each
name is one line of SQL on ``turns t JOIN sessions s``, so a new filter is one line there. A
session passes a filter when one of its turns does. (``project`` is a plain filter: the
sessions run in that folder or below. ``reconstruct``'s project scope, which also lets a
person's statements about themselves from elsewhere through, is ``retrieval.scope``.)

Invariants:
- read-only, on the connection given, inside the caller's snapshot;
- one order everywhere: sessions by start (their own, else their first turn's), newest
  first, undated last, then id; turns by time, newest first, undated last, then id. The
  months list follows the sessions' order, so the sessions before a month's first are the
  months before it: a page offset is a sum of counts;
- ids travel as one JSON parameter (``json_each``), never as IN lists of unbounded length.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from typing import NamedTuple

from localmem.errors import InputError
from localmem.storage.engine.db import Conn
from localmem.storage.reads.traversal import Counted
from localmem.util.text import parse_time

# Each filter's SQL on turns t JOIN sessions s, with its value bound as :name.
FILTERS: dict[str, str] = {
    "start": "t.ts >= :start",  # a date or time, inclusive
    "end": "t.ts < :end",  # a date (inclusive: the whole day) or a time (exclusive)
    "source": "(s.source = :source OR s.source LIKE :source || ':%')",  # a source, or its family (`locomo`)
    "speaker": "t.speaker = :speaker",
    "role": "t.role = :role",
    "client": "s.client = :client",  # the agent that wrote the session (claude-code, codex, gemini-cli)
    "project": "(s.cwd = :project OR substr(s.cwd, 1, length(:project) + 1) = :project || '/')",  # run in it
}
START = "coalesce(s.started_at, (SELECT min(x.ts) FROM turns x WHERE x.session_id = s.id))"
UNDATED = "undated"


class SessionRow(NamedTuple):
    id: int
    key: str
    source: str
    title: str
    start: str | None
    turns: int
    first: str | None
    last: str | None


class Month(NamedTuple):
    month: str  # YYYY-MM, or "undated"
    sessions: int
    turns: int


class TurnRow(NamedTuple):
    id: int
    session_id: int
    session: str
    source: str
    title: str
    ord: int
    speaker: str
    role: str
    ts: str | None
    text: str


class Facets(NamedTuple):
    sources: list[tuple[str, int]]  # families and sources, with sessions
    speakers: list[tuple[str, int]]  # with turns, most first
    roles: list[tuple[str, int]]
    clients: list[tuple[str, int]]  # with sessions, most first ('' left out)
    projects: list[tuple[str, int]]  # working folders, with sessions, most first


def clean(flt: Mapping[str, str | None]) -> dict[str, str]:
    """The filter's set values, checked: a known name each, dates made comparable."""
    out: dict[str, str] = {}
    for name, value in flt.items():
        if value is None or str(value).strip() == "":
            continue
        if name not in FILTERS:
            raise InputError(f"unknown filter {name!r}; known: {', '.join(FILTERS)}")
        value = str(value).strip()
        if name in ("start", "end"):
            value = _bound(name, value)
        out[name] = value
    return out


def _bound(name: str, value: str) -> str:
    try:
        if len(value) == 10 and value[4] == "-":  # a day: `end` takes all of it
            day = date.fromisoformat(value)
            return (day + timedelta(days=1) if name == "end" else day).isoformat()
        return parse_time(value)
    except ValueError as exc:
        raise InputError(f"{name}: {value!r} is not a date (YYYY-MM-DD) or time") from exc


def _where(flt: Mapping[str, str]) -> str:
    return " AND ".join(FILTERS[k] for k in flt) or "1"


def _sessions_where(flt: Mapping[str, str]) -> str:
    if not flt:
        return "1"
    return f"EXISTS (SELECT 1 FROM turns t WHERE t.session_id = s.id AND {_where(flt)})"


def months(conn: Conn, flt: Mapping[str, str]) -> list[Month]:
    """Sessions and turns per month of the sessions' start, newest first, undated last."""
    rows = conn.execute(
        f"SELECT coalesce(substr({START}, 1, 7), '{UNDATED}') AS m, count(DISTINCT s.id), count(*) "
        f"FROM sessions s JOIN turns t ON t.session_id = s.id WHERE {_where(flt)} GROUP BY m",
        dict(flt),
    ).fetchall()
    out = [Month(str(m), int(n), int(k)) for m, n, k in rows]
    return sorted((x for x in out if x.month != UNDATED), key=lambda x: x.month, reverse=True) + [
        x for x in out if x.month == UNDATED
    ]


def sessions(conn: Conn, flt: Mapping[str, str], limit: int, offset: int) -> Counted[SessionRow]:
    """One page of sessions in the timeline's order, with the number that pass ``flt``."""
    where = _sessions_where(flt)
    total = int(conn.one(f"SELECT count(*) FROM sessions s WHERE {where}", dict(flt))[0])
    page = conn.execute(
        f"SELECT s.id, {START} AS start FROM sessions s WHERE {where} "
        "ORDER BY start IS NULL, start DESC, s.id DESC LIMIT :limit OFFSET :offset",
        {**flt, "limit": limit, "offset": offset},
    ).fetchall()
    ids = [int(r[0]) for r in page]
    heads = {
        int(r[0]): r
        for r in conn.execute(
            "SELECT s.id, s.key, s.source, s.title, count(t.id), min(t.ts), max(t.ts) FROM sessions s "
            "JOIN turns t ON t.session_id = s.id WHERE s.id IN (SELECT value FROM json_each(?)) GROUP BY s.id",
            (json_ids(ids),),
        )
    }
    items = []
    for sid, start in page:
        h = heads.get(int(sid))
        if h is not None:  # a session has turns (forget removes emptied ones)
            items.append(SessionRow(int(sid), h[1], h[2], h[3], start, int(h[4]), h[5], h[6]))
    return Counted(total, items)


def turns(conn: Conn, flt: Mapping[str, str], limit: int, offset: int) -> Counted[int]:
    """Ids of the turns ``flt`` lets through, newest first, one page, with their number."""
    base = f"FROM turns t JOIN sessions s ON s.id = t.session_id WHERE {_where(flt)}"
    total = int(conn.one(f"SELECT count(*) {base}", dict(flt))[0])
    rows = conn.execute(
        f"SELECT t.id {base} ORDER BY t.ts IS NULL, t.ts DESC, t.id DESC LIMIT :limit OFFSET :offset",
        {**flt, "limit": limit, "offset": offset},
    ).fetchall()
    return Counted(total, [int(r[0]) for r in rows])


def turn_ids(conn: Conn, flt: Mapping[str, str]) -> list[int]:
    """Every turn id ``flt`` lets through, ascending. (As one JSON array: SQLite builds it, so
    a filter that lets 29k turns through costs no Python object per row here.)"""
    sql = (
        "SELECT json_group_array(id) FROM (SELECT t.id FROM turns t JOIN sessions s ON s.id = t.session_id "
        f"WHERE {_where(flt)} ORDER BY t.id)"
    )
    out: list[int] = json.loads(str(conn.one(sql, dict(flt))[0]))
    return out


def turn_rows(conn: Conn, ids: Sequence[int]) -> dict[int, TurnRow]:
    """The rows of the turns of ``ids`` that exist, by id."""
    return {
        int(r[0]): TurnRow(*r)
        for r in conn.execute(
            "SELECT t.id, t.session_id, s.key, s.source, s.title, t.ord, t.speaker, t.role, t.ts, t.text "
            "FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.id IN (SELECT value FROM json_each(?))",
            (json_ids(ids),),
        )
    }


def facets(conn: Conn, limit: int = 100) -> Facets:
    """What each filter can take: source families (the part before ``:``) and sources,
    speakers and roles, each with its count, most first."""
    exact = [(str(a), int(n)) for a, n in conn.execute("SELECT source, count(*) FROM sessions GROUP BY source")]
    families: dict[str, int] = {}
    for name, _n in exact:
        if ":" in name:
            families.setdefault(name.split(":", 1)[0], 0)
    for name, n in exact:  # a family's filter takes the source of its own name too
        family = name.split(":", 1)[0]
        if family in families:
            families[family] += n
    fams = sorted(families.items(), key=lambda x: (-x[1], x[0]))
    rest = sorted(((a, n) for a, n in exact if a not in families), key=lambda x: (-x[1], x[0]))
    return Facets(
        (fams + rest)[:limit],
        _counts(conn, "speaker", limit),
        _counts(conn, "role", limit),
        _session_counts(conn, "client", limit),
        _session_counts(conn, "cwd", limit),
    )


def _session_counts(conn: Conn, column: str, limit: int) -> list[tuple[str, int]]:
    return [
        (str(v), int(n))
        for v, n in conn.execute(
            f"SELECT {column}, count(*) FROM sessions WHERE {column} != '' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT ?",
            (limit,),
        )
    ]


def _counts(conn: Conn, column: str, limit: int) -> list[tuple[str, int]]:
    return [
        (str(v), int(n))
        for v, n in conn.execute(
            f"SELECT {column}, count(*) FROM turns GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT ?", (limit,)
        )
    ]


def session_window(conn: Conn, session_id: int, offset: int, limit: int) -> Counted[TurnRow]:
    """Turns ``offset`` .. ``offset + limit`` of a session in order, with its turn count."""
    total = int(conn.one("SELECT count(*) FROM turns WHERE session_id = ?", (session_id,))[0])
    rows = conn.execute(
        "SELECT t.id, t.session_id, s.key, s.source, s.title, t.ord, t.speaker, t.role, t.ts, t.text "
        "FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.session_id = ? ORDER BY t.ord LIMIT ? OFFSET ?",
        (session_id, limit, offset),
    ).fetchall()
    return Counted(total, [TurnRow(*r) for r in rows])


def place_in_session(conn: Conn, turn_id: int) -> tuple[int, int] | None:
    """(session id, the turn's 0-based place in it), None for an unknown turn."""
    row = conn.execute(
        "SELECT t.session_id, (SELECT count(*) FROM turns x WHERE x.session_id = t.session_id AND x.ord < t.ord) "
        "FROM turns t WHERE t.id = ?",
        (turn_id,),
    ).fetchone()
    return None if row is None else (int(row[0]), int(row[1]))


def json_ids(ids: Sequence[int]) -> str:
    """``ids`` as the one JSON parameter ``json_each`` reads."""
    return "[" + ",".join(str(int(i)) for i in ids) + "]"
