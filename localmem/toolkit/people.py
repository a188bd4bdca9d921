"""People and topic tools: the aspects and facts known about a person, the topics and
their turns, a theme's session topics.

These read the two layers built over turns by the background jobs: facts (extraction)
and topics (the topic layer); both are empty until those jobs have run.

Invariants:
- facts are cues of kind ``fact``: ``subject`` = the person, ``relation`` = the
  aspect, ``object`` = the value (``localmem/enrichment/extract.py``); a person and an aspect are
  matched case-insensitively;
- a topic is of kind ``session`` (a stretch of one session) or ``theme`` (session
  topics that recur across sessions, ``localmem/enrichment/themes.py``); a theme's turns are its
  session topics' turns, so ``topic_turns`` opens either; a session topic names its
  theme (``theme_id``), a theme counts its session topics and ``theme_topics`` lists
  them;
- results are paged and capped as in :mod:`localmem.toolkit.common`; read-only
  (``localmem.storage.reads.topic_reads``' reads).
"""

from __future__ import annotations

from localmem.errors import InputError, NotFound
from localmem.storage.reads import topic_reads
from localmem.storage.write.store import Store
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
    rows = topic_reads.person_aspects(store.conn, _person(person))
    return _slice([Aspect(a, n, ts) for a, n, ts in rows], limit, offset)


@snapshot_read
def person_facts(
    store: Store, person: str, aspect: str | None = None, *, limit: int = DEFAULT_LIMIT, offset: int = 0
) -> Page[Fact]:
    """Facts about a person (of one aspect, when given), newest first: the latest
    statement of a fact is the one most likely still true."""
    limit, offset = _bounds(limit, offset)
    got = topic_reads.person_facts(store.conn, _person(person), aspect.strip() if aspect else None, limit, offset)
    return _page([Fact(*r) for r in got.items], got.total, limit, offset)


TOPIC_KINDS = ("session", "theme")


def _topics(rows: list[topic_reads.TopicRow]) -> list[Topic]:
    return [Topic(*r) for r in rows]


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
    got = topic_reads.topics(store.conn, kind, text.strip() if text and text.strip() else None, limit, offset)
    return _page(_topics(got.items), got.total, limit, offset)


@snapshot_read
def theme_topics(store: Store, theme_id: int, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[Topic]:
    """The session topics a theme groups, in time order (by each one's first turn), so
    the theme reads as the story of how it came back."""
    limit, offset = _bounds(limit, offset)
    found = topic_reads.topic_kind(store.conn, theme_id)
    if found is None:
        raise NotFound(f"no topic with id {theme_id}; use topics to list them")
    if found.kind != "theme":
        where = f"its theme is {found.theme_id}" if found.theme_id is not None else "it is in no theme"
        raise InputError(f"topic {theme_id} is a session topic, not a theme; {where}")
    got = topic_reads.theme_members(store.conn, theme_id, limit, offset)
    return _page(_topics(got.items), got.total, limit, offset)


@snapshot_read
def topic_turns(store: Store, topic_id: int, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[TurnRef]:
    """The member turns of a topic or theme in time order."""
    limit, offset = _bounds(limit, offset)
    if not topic_reads.topic_exists(store.conn, topic_id):
        raise NotFound(f"no topic with id {topic_id}; use topics to list them")
    got = topic_reads.topic_turn_ids(store.conn, topic_id, limit, offset)
    refs = turn_refs(store, got.items)
    return _page([refs[t] for t in got.items if t in refs], got.total, limit, offset)
