"""The one door for changes to the facts, and their journal (table ``changes``, migration 0011).

Every mutation of the facts goes through one function here, one per kind; each performs
the mutation inside the caller's write transaction and appends one journal row in it,
so the row exists exactly when the change committed (a rollback takes both away):

===============  ==============================  =====================  ================================
kind             function                        key                    data (JSON)
===============  ==============================  =====================  ================================
``session``      ``add_session`` (new, or its    ``session_key``        source, key, title, started_at;
                 start time, client or project                          client and project {cwd,
                 filled in)                                             repository, branch, commit}
                                                                        when known
``turn``         ``add_turn``                    the turn's hash        NULL: the row, read by its hash
``forget``       ``forget``                      the turn's hash        NULL
``enrichment``   ``add_enrichment``              the turn's hash        memory type, its source, counts
``cue``          ``add_cue`` (triple / keyword   ``cue_key``            turn hash, kind, text, s/r/o,
                 / fact)                                                span, tags
``antecedent``   ``add_antecedents``             ``src>dst`` hashes     src, dst, weight, reason
``topic``        ``put_topic`` (new, relabelled  the topic's key        kind, label, summary, update
                 or its membership changed)                             time, turns added / removed,
                                                                        topics grouped
``topic_removed``  ``remove_topic``              the topic's key        NULL
===============  ==============================  =====================  ================================

``key`` means the same on every device (content hashes; a topic's random key, given when
it is made and kept wherever it is folded), never a local rowid; ``model`` is the model
id that derived the change (NULL for sessions, turns and forgets); ``origin`` is NULL for
a change made on this device, else the device id it was folded from (sync passes it;
``Store.write`` / ``Store.forget`` take it as a keyword). Writing content already stored
(a re-ingested turn, a cue the turn has, an edge that exists) changes nothing and writes
no row. Derived rows (vectors, FTS, statement cues, temporal and semantic edges, the
mirrors, jobs, the theme pass's ``themed`` flag) are not journaled: each device rebuilds
them. Rows removed by a cascade of a journaled change (a forgotten turn's cues, edges and
topic memberships, a session left without turns) are not journaled either: they follow
from it. The journal starts at schema version 11; nothing here reads it back.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from localmem.storage.engine.db import Conn
from localmem.storage.engine.inlist import chunks, marks, rows_in
from localmem.storage.write.prepare import content_hash
from localmem.storage.write.sessions import SessionWrite as SessionWrite  # re-exported: the door takes it
from localmem.storage.write.sessions import session_from_data as session_from_data


@dataclass(frozen=True)
class TurnWrite:
    session_id: int
    ord: int
    speaker: str
    role: str
    text: str
    ts: str | None
    source_id: str | None
    hash: str
    words: int


@dataclass(frozen=True)
class EnrichmentWrite:
    """A turn's extraction record: its memory type and what grounding kept."""

    memory_type: str | None
    type_source: str  # model / keyword / none
    low_info: bool
    cues_kept: int
    cues_rejected: int


@dataclass(frozen=True)
class CueWrite:
    """A model-derived cue of a turn (kind triple / keyword / fact) and its tags."""

    kind: str
    text: str
    start: int
    end: int
    subject: str | None = None
    relation: str | None = None
    object: str | None = None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class LinkWrite:
    """An antecedent edge: the earlier turn ``src`` explains the later ``dst``."""

    src: int
    dst: int
    weight: float
    reason: str


@dataclass(frozen=True)
class TopicWrite:
    """A topic or theme made (``id`` None) or changed: its label, turns added and
    removed, session topics grouped (a theme's), and the theme pass's ``themed`` flag."""

    id: int | None
    kind: str  # session / theme
    label: str
    summary: str
    updated_at: str
    add_turns: tuple[int, ...] = ()
    remove_turns: tuple[int, ...] = ()
    add_topics: tuple[int, ...] = ()
    themed: bool = False


def session_key(source: str, key: str) -> str:
    return content_hash("session", source, key)


def cue_key(turn_hash: str, kind: str, text: str) -> str:
    return content_hash("cue", turn_hash, kind, text)


def _journal(conn: Conn, kind: str, key: str, model: str | None, origin: str | None, data: Any = None) -> None:
    payload = None if data is None else json.dumps(data, ensure_ascii=False, sort_keys=True)
    conn.execute(
        "INSERT INTO changes(kind, key, model, origin, data, at) VALUES (?, ?, ?, ?, ?, ?)",
        (kind, key, model, origin, payload, time.time()),
    )


def _column_of(conn: Conn, table: str, column: str, ids: Iterable[int]) -> dict[int, str]:
    """``column`` (hash, key) of the rows ``ids`` of ``table`` that exist."""
    sql = f"SELECT id, {column} FROM {table} WHERE id IN ({{marks}})"
    return {int(r[0]): str(r[1]) for r in rows_in(conn, sql, (int(i) for i in ids))}


# -- sessions and turns -----------------------------------------------------------------


def add_session(conn: Conn, s: SessionWrite, *, origin: str | None = None) -> int:
    """The id of session (source, key), made if new; a stored session takes what it lacks
    of ``s``: a start time, a client, a project (whole, when it has none).
    Journaled when made or filled in, with the session as it then stands."""
    row = conn.execute(
        "INSERT INTO sessions(source, key, title, started_at, client, cwd, repository, branch, git_commit) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(source, key) DO NOTHING RETURNING id",
        (s.source, s.key, s.title, s.started_at, s.client, *s.project),
    ).fetchone()
    stored = s
    if row is None and (s.started_at is not None or s.client or any(s.project)):
        # The project is taken whole, only by a session that has none: two logs that
        # disagree never leave it half one, half the other.
        bare = "(cwd = '' AND repository = '' AND branch = '' AND git_commit = '')"
        has = int(any(s.project))
        row = conn.execute(
            "UPDATE sessions SET started_at = coalesce(started_at, ?), "
            "client = CASE client WHEN '' THEN ? ELSE client END, "
            f"cwd = CASE WHEN {bare} THEN ? ELSE cwd END, repository = CASE WHEN {bare} THEN ? ELSE repository END, "
            f"branch = CASE WHEN {bare} THEN ? ELSE branch END, git_commit = CASE WHEN {bare} THEN ? ELSE git_commit END "
            "WHERE source = ? AND key = ? AND ((started_at IS NULL AND ? IS NOT NULL) OR (client = '' AND ? != '') "
            f"OR ({bare} AND ?)) "
            "RETURNING id, title, started_at, client, cwd, repository, branch, git_commit",
            (s.started_at, s.client, *s.project, s.source, s.key, s.started_at, s.client, has),
        ).fetchone()
        if row is not None:
            title, started, *known = row[1:]
            stored = SessionWrite(s.source, s.key, str(title), started, *(str(v) for v in known))
    if row is None:
        return int(conn.one("SELECT id FROM sessions WHERE source = ? AND key = ?", (s.source, s.key))[0])
    _journal(conn, "session", session_key(s.source, s.key), None, origin, stored.data())
    return int(row[0])


def add_turn(conn: Conn, t: TurnWrite, *, origin: str | None = None) -> int:
    """Insert a new turn (its hash not stored: the caller looked) and journal it."""
    tid = int(
        conn.one(
            "INSERT INTO turns(session_id, ord, speaker, role, text, ts, source_id, hash, words) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (t.session_id, t.ord, t.speaker, t.role, t.text, t.ts, t.source_id, t.hash, t.words),
        )[0]
    )
    _journal(conn, "turn", t.hash, None, origin)
    return tid


def forget(conn: Conn, hashes: Sequence[str], *, origin: str | None = None) -> int:
    """Delete the turns with these hashes (their cues, edges, vectors, index rows and
    topic memberships by cascade), then sessions left without turns; a row per turn
    deleted. Returns how many were."""
    gone = 0
    for chunk in chunks(hashes):
        rows = conn.execute(f"DELETE FROM turns WHERE hash IN ({marks(len(chunk))}) RETURNING hash", chunk).fetchall()
        for r in rows:
            _journal(conn, "forget", str(r[0]), None, origin)
        gone += len(rows)
    conn.execute("DELETE FROM sessions WHERE id NOT IN (SELECT DISTINCT session_id FROM turns)")
    return gone


# -- model-derived: extraction, antecedents, topics -------------------------------------


def add_enrichment(
    conn: Conn, turn_id: int, e: EnrichmentWrite, model: str, *, origin: str | None = None
) -> str | None:
    """Record that extraction ran on ``turn_id``; returns the turn's hash, or None when it
    was enriched before (a turn is enriched once) or is gone."""
    row = conn.execute(
        "INSERT INTO turn_enrichment(turn_id, memory_type, type_source, low_info, cues_kept, cues_rejected, model) "
        "SELECT id, ?, ?, ?, ?, ?, ? FROM turns WHERE id = ? ON CONFLICT(turn_id) DO NOTHING RETURNING turn_id",
        (e.memory_type, e.type_source, int(e.low_info), e.cues_kept, e.cues_rejected, model, turn_id),
    ).fetchone()
    if row is None:
        return None
    turn_hash = str(conn.one("SELECT hash FROM turns WHERE id = ?", (turn_id,))[0])
    _journal(conn, "enrichment", turn_hash, model, origin, _enrichment_data(e))
    return turn_hash


def merge_enrichment(
    conn: Conn, turn_id: int, turn_hash: str, e: EnrichmentWrite, model: str, *, origin: str | None = None
) -> None:
    """A turn's extraction record from a second model, as a fold brings it: the smaller
    model id's record is kept, whatever order the two arrive in."""
    conn.execute(
        "UPDATE turn_enrichment SET memory_type = ?, type_source = ?, low_info = ?, cues_kept = ?, "
        "cues_rejected = ?, model = ? WHERE turn_id = ? AND model > ?",
        (e.memory_type, e.type_source, int(e.low_info), e.cues_kept, e.cues_rejected, model, turn_id, model),
    )
    _journal(conn, "enrichment", turn_hash, model, origin, _enrichment_data(e))


def _enrichment_data(e: EnrichmentWrite) -> dict[str, Any]:
    return {
        "memory_type": e.memory_type,
        "type_source": e.type_source,
        "low_info": e.low_info,
        "cues_kept": e.cues_kept,
        "cues_rejected": e.cues_rejected,
    }


def add_cue(
    conn: Conn, turn_id: int, turn_hash: str, c: CueWrite, model: str, *, origin: str | None = None
) -> int | None:
    """Insert a model-derived cue of turn ``turn_id`` with its (cue, tag, turn) triples;
    returns its id, None when the turn has that cue already. Its FTS row and vector are
    the caller's (derived)."""
    row = conn.execute(
        "INSERT INTO cues(turn_id, kind, text, subject, relation, object, span_start, span_end, extractor) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id",
        (turn_id, c.kind, c.text, c.subject, c.relation, c.object, c.start, c.end, model),
    ).fetchone()
    if row is None:
        return None
    cid = int(row[0])
    _tag(conn, cid, turn_id, c.tags)
    _journal(conn, "cue", cue_key(turn_hash, c.kind, c.text), model, origin, _cue_data(turn_hash, c))
    return cid


def merge_cue(conn: Conn, turn_id: int, turn_hash: str, c: CueWrite, model: str, *, origin: str | None = None) -> None:
    """Another model's version of a cue the turn has already (same kind and text), as a
    fold brings it: the row keeps the version of the smaller model id and gains the
    incoming tags, so every device ends with the same row whatever order the two arrive in."""
    cid = int(conn.one("SELECT id FROM cues WHERE turn_id = ? AND kind = ? AND text = ?", (turn_id, c.kind, c.text))[0])
    conn.execute(
        "UPDATE cues SET extractor = ?, subject = ?, relation = ?, object = ?, span_start = ?, span_end = ? "
        "WHERE id = ? AND extractor > ?",
        (model, c.subject, c.relation, c.object, c.start, c.end, cid, model),
    )
    _tag(conn, cid, turn_id, c.tags)
    _journal(conn, "cue", cue_key(turn_hash, c.kind, c.text), model, origin, _cue_data(turn_hash, c))


def _tag(conn: Conn, cue_id: int, turn_id: int, tags: Sequence[str]) -> None:
    for tag in tags:
        conn.execute("INSERT OR IGNORE INTO tags(name) VALUES (?)", (tag,))
        conn.execute(
            "INSERT OR IGNORE INTO cue_tags(cue_id, tag_id, turn_id) SELECT ?, id, ? FROM tags WHERE name = ?",
            (cue_id, turn_id, tag),
        )


def _cue_data(turn_hash: str, c: CueWrite) -> dict[str, Any]:
    return {
        "turn": turn_hash,
        "kind": c.kind,
        "text": c.text,
        "subject": c.subject,
        "relation": c.relation,
        "object": c.object,
        "span": [c.start, c.end],
        "tags": list(c.tags),
    }


def add_antecedents(conn: Conn, links: Sequence[LinkWrite], model: str, *, origin: str | None = None) -> int:
    """Insert antecedent edges whose two turns still exist (a turn forgotten since the
    search takes its link with it); returns edges added."""
    hashes = _column_of(conn, "turns", "hash", [x for link in links for x in (link.src, link.dst)])
    added = 0
    for link in links:
        if link.src not in hashes or link.dst not in hashes:
            continue
        row = conn.execute(
            "INSERT OR IGNORE INTO edges(src, dst, kind, weight, reason) VALUES (?, ?, 'antecedent', ?, ?) "
            "RETURNING src",
            (link.src, link.dst, link.weight, link.reason),
        ).fetchone()
        if row is None:
            continue
        src, dst = hashes[link.src], hashes[link.dst]
        data = {"src": src, "dst": dst, "weight": link.weight, "reason": link.reason}
        _journal(conn, "antecedent", f"{src}>{dst}", model, origin, data)
        added += 1
    return added


def put_topic(
    conn: Conn, t: TopicWrite, model: str | None, *, origin: str | None = None, key: str | None = None
) -> int:
    """Make (``t.id`` None; under ``key`` when given, else a new random one) or change a
    topic or theme: label, summary, member turns added and removed, session topics
    grouped; returns its id. The ``themed`` flag is set last, since removing turns marks
    the topic unplaced (migration 0006's trigger)."""
    if t.id is None:
        key = key or uuid.uuid4().hex
        tid = int(
            conn.one(
                "INSERT INTO topics(label, summary, updated_at, kind, themed, key) VALUES (?, ?, ?, ?, 0, ?) "
                "RETURNING id",
                (t.label, t.summary, t.updated_at, t.kind, key),
            )[0]
        )
    else:
        tid = t.id
        key = str(
            conn.one(
                "UPDATE topics SET label = ?, summary = ?, updated_at = ?, "
                "key = coalesce(key, lower(hex(randomblob(16)))) WHERE id = ? RETURNING key",
                (t.label, t.summary, t.updated_at, tid),
            )[0]
        )
    conn.executemany(
        "INSERT OR IGNORE INTO theme_topics(theme_id, topic_id) VALUES (?, ?)", [(tid, m) for m in t.add_topics]
    )
    conn.executemany(
        "INSERT OR IGNORE INTO topic_turns(topic_id, turn_id) VALUES (?, ?)", [(tid, x) for x in t.add_turns]
    )
    conn.executemany("DELETE FROM topic_turns WHERE topic_id = ? AND turn_id = ?", [(tid, x) for x in t.remove_turns])
    conn.execute("UPDATE topics SET themed = ? WHERE id = ?", (int(t.themed), tid))
    hashes = _column_of(conn, "turns", "hash", [*t.add_turns, *t.remove_turns])
    keys = _column_of(conn, "topics", "key", t.add_topics)
    data = {
        "kind": t.kind,
        "label": t.label,
        "summary": t.summary,
        "updated_at": t.updated_at,
        "add": [hashes[x] for x in t.add_turns if x in hashes],
        "remove": [hashes[x] for x in t.remove_turns if x in hashes],
        "topics": [keys[m] for m in t.add_topics if m in keys],
    }
    _journal(conn, "topic", key, model, origin, data)
    return tid


def remove_topic(conn: Conn, topic_id: int, kind: str, *, origin: str | None = None) -> bool:
    """Delete topic ``topic_id`` if it is of ``kind`` (its memberships by cascade)."""
    row = conn.execute("DELETE FROM topics WHERE id = ? AND kind = ? RETURNING key", (topic_id, kind)).fetchone()
    if row is None:
        return False
    _journal(conn, "topic_removed", str(row[0]), None, origin)
    return True
