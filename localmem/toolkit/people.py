"""People and topic tools: the aspects and facts known about a person, the topics and
their turns, a theme's session topics.

These read the two layers built over turns by the background jobs: facts (extraction)
and topics (the topic layer); both are empty until those jobs have run.

Invariants:
- facts are cues of kind ``fact``: ``subject`` = the person, ``relation`` = the
  aspect, ``object`` = the value (``localmem/extract.py``); a person and an aspect are
  matched case-insensitively;
- a topic is of kind ``session`` (a stretch of one session) or ``theme`` (session
  topics that recur across sessions, ``localmem/themes.py``); a theme's turns are its
  session topics' turns, so ``topic_turns`` opens either; a session topic names its
  theme (``theme_id``), a theme counts its session topics and ``theme_topics`` lists
  them;
- results are paged and capped as in :mod:`localmem.toolkit.common`; read-only.
"""

from __future__ import annotations

import re
from typing import Any

from localmem.errors import InputError, NotFound
from localmem.storage.store import Store
from localmem.toolkit.common import DEFAULT_LIMIT, _bounds, _page, _slice, snapshot_read, turn_refs
from localmem.toolkit.records import Aspect, Fact, Page, Topic, TurnRef


def _person(person: str) -> str:
    if not isinstance(person, str) or not person.strip():
        raise InputError("person must be a non-empty name")
    return person.strip()


@snapshot_read
def person_aspects(store: Store, person: str, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[Aspect]:
    """The aspects (work, family, hobby, ...) the store holds facts about for a person,
    most facts first."""
    limit, offset = _bounds(limit, offset)
    rows = store.conn.execute(
        "SELECT c.relation, count(*), max(t.ts) FROM cues c JOIN turns t ON t.id = c.turn_id "
        "WHERE c.kind = 'fact' AND lower(c.subject) = lower(?) GROUP BY lower(c.relation) "
        "ORDER BY 2 DESC, 1",
        (_person(person),),
    ).fetchall()
    return _slice([Aspect(str(a), int(n), ts) for a, n, ts in rows], limit, offset)


@snapshot_read
def person_facts(
    store: Store, person: str, aspect: str | None = None, *, limit: int = DEFAULT_LIMIT, offset: int = 0
) -> Page[Fact]:
    """Facts about a person (of one aspect, when given), newest first: the latest
    statement of a fact is the one most likely still true."""
    limit, offset = _bounds(limit, offset)
    where = "c.kind = 'fact' AND lower(c.subject) = lower(?)"
    args: list[Any] = [_person(person)]
    if aspect:
        where += " AND lower(c.relation) = lower(?)"
        args.append(aspect.strip())
    total = int(store.conn.one(f"SELECT count(*) FROM cues c WHERE {where}", args)[0])
    rows = store.conn.execute(
        f"SELECT c.id, c.subject, c.relation, c.object, c.turn_id, t.ts, s.key FROM cues c "
        f"JOIN turns t ON t.id = c.turn_id JOIN sessions s ON s.id = t.session_id WHERE {where} "
        "ORDER BY t.ts IS NULL, t.ts DESC, c.id DESC LIMIT ? OFFSET ?",
        [*args, limit, offset],
    ).fetchall()
    items = [Fact(int(a), str(b), str(c), str(d), int(e), f, str(g)) for a, b, c, d, e, f, g in rows]
    return _page(items, total, limit, offset)


_TOPIC_COLS = (
    "p.id, p.kind, p.label, p.summary, (SELECT count(*) FROM topic_turns tt WHERE tt.topic_id = p.id), "
    "(SELECT x.theme_id FROM theme_topics x WHERE x.topic_id = p.id), "
    "CASE p.kind WHEN 'theme' THEN (SELECT count(*) FROM theme_topics x WHERE x.theme_id = p.id) END"
)
TOPIC_KINDS = ("session", "theme")


def _topics(rows: list[Any]) -> list[Topic]:
    """Rows of :data:`_TOPIC_COLS` as topic records."""
    return [
        Topic(int(a), str(k), str(b), str(c), int(n), None if t is None else int(t), None if m is None else int(m))
        for a, k, b, c, n, t, m in rows
    ]


@snapshot_read
def topics(
    store: Store, text: str | None = None, *, kind: str | None = None, limit: int = DEFAULT_LIMIT, offset: int = 0
) -> Page[Topic]:
    """Topics (labelled groups of turns) and themes (session topics recurring across
    sessions), only those of ``kind`` and whose label or summary holds ``text`` when
    given; most recently updated first. Empty until the topic layer has run."""
    limit, offset = _bounds(limit, offset)
    if kind is not None and kind not in TOPIC_KINDS:
        raise InputError(f"kind must be one of {', '.join(TOPIC_KINDS)}; got {kind!r}")
    conds: list[str] = []
    args: list[Any] = []
    if kind is not None:
        conds.append("p.kind = ?")
        args.append(kind)
    if text and text.strip():
        conds.append("(p.label LIKE ? ESCAPE '\\' OR p.summary LIKE ? ESCAPE '\\')")
        like = "%" + re.sub(r"([%_\\])", r"\\\1", text.strip()) + "%"
        args += [like, like]
    where = "WHERE " + " AND ".join(conds) if conds else ""
    total = int(store.conn.one(f"SELECT count(*) FROM topics p {where}", args)[0])
    rows = store.conn.execute(
        f"SELECT {_TOPIC_COLS} FROM topics p {where} ORDER BY p.updated_at DESC, p.id DESC LIMIT ? OFFSET ?",
        [*args, limit, offset],
    ).fetchall()
    return _page(_topics(rows), total, limit, offset)


@snapshot_read
def theme_topics(store: Store, theme_id: int, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[Topic]:
    """The session topics a theme groups, in time order (by each one's first turn), so
    the theme reads as the story of how it came back."""
    limit, offset = _bounds(limit, offset)
    row = store.conn.execute(
        "SELECT p.kind, x.theme_id FROM topics p LEFT JOIN theme_topics x ON x.topic_id = p.id WHERE p.id = ?",
        (theme_id,),
    ).fetchone()
    if row is None:
        raise NotFound(f"no topic with id {theme_id}; use topics to list them")
    if row[0] != "theme":
        where = f"its theme is {row[1]}" if row[1] is not None else "it is in no theme"
        raise InputError(f"topic {theme_id} is a session topic, not a theme; {where}")
    total = int(store.conn.one("SELECT count(*) FROM theme_topics WHERE theme_id = ?", (theme_id,))[0])
    rows = store.conn.execute(
        f"SELECT {_TOPIC_COLS}, (SELECT min(t.ts) FROM topic_turns tt JOIN turns t ON t.id = tt.turn_id "
        "WHERE tt.topic_id = p.id) AS first FROM theme_topics y JOIN topics p ON p.id = y.topic_id "
        "WHERE y.theme_id = ? ORDER BY first IS NULL, first, p.id LIMIT ? OFFSET ?",
        (theme_id, limit, offset),
    ).fetchall()
    return _page(_topics([r[:-1] for r in rows]), total, limit, offset)


@snapshot_read
def topic_turns(store: Store, topic_id: int, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[TurnRef]:
    """The member turns of a topic or theme in time order."""
    limit, offset = _bounds(limit, offset)
    if store.conn.execute("SELECT 1 FROM topics WHERE id = ?", (topic_id,)).fetchone() is None:
        raise NotFound(f"no topic with id {topic_id}; use topics to list them")
    total = int(store.conn.one("SELECT count(*) FROM topic_turns WHERE topic_id = ?", (topic_id,))[0])
    ids = [
        int(r[0])
        for r in store.conn.execute(
            "SELECT t.id FROM topic_turns tt JOIN turns t ON t.id = tt.turn_id WHERE tt.topic_id = ? "
            "ORDER BY t.ts IS NULL, t.ts, t.session_id, t.ord LIMIT ? OFFSET ?",
            (topic_id, limit, offset),
        )
    ]
    refs = turn_refs(store, ids)
    return _page([refs[t] for t in ids if t in refs], total, limit, offset)
