"""The traversal toolkit's reads over the layers the background jobs build: people's
facts (extraction) and topics and themes (the topic layer), as named records.

Invariants:
- facts are cues of kind ``fact``: ``subject`` = the person, ``relation`` = the aspect,
  ``object`` = the value; a person and an aspect match case-insensitively;
- a topic is of kind ``session`` (a stretch of one session) or ``theme`` (session
  topics recurring across sessions, grouped by ``theme_topics``); a theme's turns are
  its session topics' turns;
- read-only, on the connection given; the toolkit runs each tool in one snapshot
  (``Store.snapshot``), so a tool's several reads see one commit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from localmem.storage.engine.db import Conn
from localmem.storage.reads.traversal import Counted


class AspectRow(NamedTuple):
    aspect: str
    facts: int
    latest: str | None  # time of the newest turn stating one


class FactRow(NamedTuple):
    cue_id: int
    person: str
    aspect: str
    value: str
    turn_id: int
    ts: str | None
    session_key: str


class TopicRow(NamedTuple):
    id: int
    kind: str
    label: str
    summary: str
    turns: int
    theme_id: int | None  # a session topic's theme
    session_topics: int | None  # a theme's number of session topics (None for a session topic)


class TopicKind(NamedTuple):
    kind: str
    theme_id: int | None


_TOPIC_COLS = (
    "p.id, p.kind, p.label, p.summary, (SELECT count(*) FROM topic_turns tt WHERE tt.topic_id = p.id), "
    "(SELECT x.theme_id FROM theme_topics x WHERE x.topic_id = p.id), "
    "CASE p.kind WHEN 'theme' THEN (SELECT count(*) FROM theme_topics x WHERE x.theme_id = p.id) END"
)


def _topic(r: Sequence[Any]) -> TopicRow:
    a, k, b, c, n, t, m = r[:7]
    return TopicRow(
        int(a), str(k), str(b), str(c), int(n), None if t is None else int(t), None if m is None else int(m)
    )


def person_aspects(conn: Conn, person: str) -> list[AspectRow]:
    """The aspects with facts about ``person``, most facts first, then by aspect."""
    rows = conn.execute(
        "SELECT c.relation, count(*), max(t.ts) FROM cues c JOIN turns t ON t.id = c.turn_id "
        "WHERE c.kind = 'fact' AND lower(c.subject) = lower(?) GROUP BY lower(c.relation) "
        "ORDER BY 2 DESC, 1",
        (person,),
    ).fetchall()
    return [AspectRow(str(a), int(n), ts) for a, n, ts in rows]


def person_facts(conn: Conn, person: str, aspect: str | None, limit: int, offset: int) -> Counted[FactRow]:
    """Facts about ``person`` (of ``aspect`` unless None), newest first, undated last."""
    where = "c.kind = 'fact' AND lower(c.subject) = lower(?)"
    args: list[Any] = [person]
    if aspect is not None:
        where += " AND lower(c.relation) = lower(?)"
        args.append(aspect)
    total = int(conn.one(f"SELECT count(*) FROM cues c WHERE {where}", args)[0])
    rows = conn.execute(
        f"SELECT c.id, c.subject, c.relation, c.object, c.turn_id, t.ts, s.key FROM cues c "
        f"JOIN turns t ON t.id = c.turn_id JOIN sessions s ON s.id = t.session_id WHERE {where} "
        "ORDER BY t.ts IS NULL, t.ts DESC, c.id DESC LIMIT ? OFFSET ?",
        [*args, limit, offset],
    ).fetchall()
    return Counted(total, [FactRow(int(a), str(b), str(c), str(d), int(e), f, str(g)) for a, b, c, d, e, f, g in rows])


def topics(conn: Conn, kind: str | None, text: str | None, limit: int, offset: int) -> Counted[TopicRow]:
    """Topics of ``kind`` (any when None) whose label or summary holds ``text`` (taken
    literally, case-insensitively as LIKE does), most recently updated first."""
    conds: list[str] = []
    args: list[Any] = []
    if kind is not None:
        conds.append("p.kind = ?")
        args.append(kind)
    if text:
        conds.append("(p.label LIKE ? ESCAPE '\\' OR p.summary LIKE ? ESCAPE '\\')")
        like = "%" + re.sub(r"([%_\\])", r"\\\1", text) + "%"
        args += [like, like]
    where = "WHERE " + " AND ".join(conds) if conds else ""
    total = int(conn.one(f"SELECT count(*) FROM topics p {where}", args)[0])
    rows = conn.execute(
        f"SELECT {_TOPIC_COLS} FROM topics p {where} ORDER BY p.updated_at DESC, p.id DESC LIMIT ? OFFSET ?",
        [*args, limit, offset],
    ).fetchall()
    return Counted(total, [_topic(r) for r in rows])


def topic_kind(conn: Conn, topic_id: int) -> TopicKind | None:
    """A topic's kind and its theme (if any); None for an unknown topic."""
    row = conn.execute(
        "SELECT p.kind, x.theme_id FROM topics p LEFT JOIN theme_topics x ON x.topic_id = p.id WHERE p.id = ?",
        (topic_id,),
    ).fetchone()
    return None if row is None else TopicKind(str(row[0]), None if row[1] is None else int(row[1]))


def theme_members(conn: Conn, theme_id: int, limit: int, offset: int) -> Counted[TopicRow]:
    """The session topics of a theme in time order of their first turns (undated last)."""
    total = int(conn.one("SELECT count(*) FROM theme_topics WHERE theme_id = ?", (theme_id,))[0])
    rows = conn.execute(
        f"SELECT {_TOPIC_COLS}, (SELECT min(t.ts) FROM topic_turns tt JOIN turns t ON t.id = tt.turn_id "
        "WHERE tt.topic_id = p.id) AS first FROM theme_topics y JOIN topics p ON p.id = y.topic_id "
        "WHERE y.theme_id = ? ORDER BY first IS NULL, first, p.id LIMIT ? OFFSET ?",
        (theme_id, limit, offset),
    ).fetchall()
    return Counted(total, [_topic(r) for r in rows])


def topic_exists(conn: Conn, topic_id: int) -> bool:
    return conn.execute("SELECT 1 FROM topics WHERE id = ?", (topic_id,)).fetchone() is not None


def topic_turn_ids(conn: Conn, topic_id: int, limit: int, offset: int) -> Counted[int]:
    """Ids of a topic's member turns in time order (undated last), then session, place."""
    total = int(conn.one("SELECT count(*) FROM topic_turns WHERE topic_id = ?", (topic_id,))[0])
    ids = [
        int(r[0])
        for r in conn.execute(
            "SELECT t.id FROM topic_turns tt JOIN turns t ON t.id = tt.turn_id WHERE tt.topic_id = ? "
            "ORDER BY t.ts IS NULL, t.ts, t.session_id, t.ord LIMIT ? OFFSET ?",
            (topic_id, limit, offset),
        )
    ]
    return Counted(total, ids)
