"""Topics and themes in the store: what the topic and theme passes read, and their writes.

A session topic (``kind = 'session'``) groups a stretch of one session's turns; a theme
(``kind = 'theme'``) groups session topics that recur across sessions (``theme_topics``),
its member turns being theirs (``topic_turns``, like a topic's). Every topic made,
relabelled, grown, shrunk or dissolved goes through the door (``changes.put_topic`` /
``remove_topic``, journaled under the topic's key); the ``themed`` flag, the theme pass's
work marker, is local.

Both writes are ONE transaction each and check first that what their pass read still
holds, writing nothing otherwise: ``commit_session_topics`` (the turns it adds are still
in no session topic and the topics it grows still exist; then the job's ``done``) and
``commit_themes`` (the topic tables are exactly as ``theme_snapshot`` read them). The
model-call records commit in the same transaction either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from localmem.models.replies import CallRecord
from localmem.storage.engine import db
from localmem.storage.engine.inlist import marks
from localmem.storage.layers import calls
from localmem.storage.layers.queue import Job, finish, record_failure
from localmem.storage.write import changes
from localmem.storage.write.changes import TopicWrite
from localmem.storage.write.jobs import enqueue

Snapshot = tuple[list[Any], list[Any]]
Planned = tuple[TopicWrite, str | None]  # a topic write and the model that labelled it (None: keywords)


def enqueue_jobs(conn: db.Conn, kind: str) -> int:
    """Queue a ``kind`` job (on its newest turn) for each session with turns outside
    every session topic; returns jobs queued."""
    with db.transaction(conn):
        newest = conn.execute(
            "SELECT max(t.id) FROM turns t WHERE t.id NOT IN "
            "(SELECT tt.turn_id FROM topic_turns tt JOIN topics p ON p.id = tt.topic_id AND p.kind = 'session') "
            "GROUP BY t.session_id"
        ).fetchall()
        return enqueue(conn, kind, (r[0] for r in newest))


def session_of(conn: db.Conn, turn_id: int) -> int | None:
    row = conn.execute("SELECT session_id FROM turns WHERE id = ?", (turn_id,)).fetchone()
    return None if row is None else int(row[0])


def session_turn_topics(conn: db.Conn, session_id: int) -> list[tuple[int, int | None]]:
    """Each turn of a session in order, with its session topic (None: in none)."""
    rows = conn.execute(
        "SELECT t.id, (SELECT tt.topic_id FROM topic_turns tt JOIN topics p ON p.id = tt.topic_id "
        "AND p.kind = 'session' WHERE tt.turn_id = t.id LIMIT 1) "
        "FROM turns t WHERE t.session_id = ? ORDER BY t.ord",
        (session_id,),
    ).fetchall()
    return [(int(r[0]), None if r[1] is None else int(r[1])) for r in rows]


def members(conn: db.Conn, topic_id: int) -> list[int]:
    """The member turns of a topic or theme."""
    return [int(r[0]) for r in conn.execute("SELECT turn_id FROM topic_turns WHERE topic_id = ?", (topic_id,))]


def has_work(conn: db.Conn) -> bool:
    """Whether a turn is in no topic or a topic awaits the theme pass."""
    return bool(
        conn.execute("SELECT 1 FROM turns WHERE id NOT IN (SELECT turn_id FROM topic_turns) LIMIT 1").fetchone()
        or unplaced(conn)
    )


def unplaced(conn: db.Conn) -> bool:
    """Whether a topic or theme awaits the theme pass (``themed = 0``)."""
    return conn.execute("SELECT 1 FROM topics WHERE themed = 0 LIMIT 1").fetchone() is not None


def commit_session_topics(
    conn: db.Conn, job: Job, records: Sequence[CallRecord], plan: Sequence[Planned], max_attempts: int
) -> str:
    """Write a topics job's plan and finish the job: ``done``; ``failed`` (a failed
    attempt: the session's topics changed meanwhile); ``lost`` (another worker
    reclaimed the job after our lease lapsed: its result counts)."""
    with db.transaction(conn):
        calls.write(conn, records)
        if not _still_valid(conn, [w for w, _m in plan]):
            record_failure(conn, job, "the session's topics changed meanwhile", max_attempts)
            return "failed"
        if not finish(conn, job.id):
            return "lost"
        for write, model in plan:
            changes.put_topic(conn, write, model)
    return "done"


def _still_valid(conn: db.Conn, plan: Sequence[TopicWrite]) -> bool:
    adds = [t for w in plan for t in w.add_turns]
    if adds:
        taken = conn.execute(
            f"SELECT 1 FROM topic_turns tt JOIN topics p ON p.id = tt.topic_id AND p.kind = 'session' "
            f"WHERE tt.turn_id IN ({marks(len(adds))}) LIMIT 1",
            adds,
        ).fetchone()
        if taken:
            return False
    grown = [w.id for w in plan if w.id is not None]
    return all(conn.execute("SELECT 1 FROM topics WHERE id = ? AND kind = 'session'", (t,)).fetchone() for t in grown)


def theme_snapshot(conn: db.Conn) -> Snapshot:
    """Everything a theme pass depends on: topics with their theme, member turns with
    their session and time."""
    rows = conn.execute(
        "SELECT p.id, p.kind, p.themed, p.label, p.summary, p.updated_at, x.theme_id "
        "FROM topics p LEFT JOIN theme_topics x ON x.topic_id = p.id ORDER BY p.id"
    ).fetchall()
    turns = conn.execute(
        "SELECT x.topic_id, x.turn_id, t.session_id, coalesce(t.ts, s.started_at, '') FROM topic_turns x "
        "JOIN turns t ON t.id = x.turn_id JOIN sessions s ON s.id = t.session_id ORDER BY x.topic_id, t.session_id, t.ord"
    ).fetchall()
    return rows, turns


def turns_matching(conn: db.Conn, phrase: str) -> list[int]:
    """The turns whose text holds an FTS5 ``phrase``."""
    return [int(r[0]) for r in conn.execute("SELECT rowid FROM turns_fts WHERE turns_fts MATCH ?", (phrase,))]


def commit_themes(
    conn: db.Conn,
    records: Sequence[CallRecord],
    snap: Snapshot,
    dissolved: Sequence[int],
    themes: Sequence[Planned],
    placed: Sequence[int],
) -> list[int] | None:
    """Write a theme pass: dissolve themes, make or change themes, mark the topics it
    looked at placed. Returns the themes' ids in order, or None (nothing written but
    the call records) when the topic tables changed since ``snap`` was read."""
    with db.transaction(conn):
        calls.write(conn, records)
        if theme_snapshot(conn) != snap:
            return None
        for key in dissolved:
            changes.remove_topic(conn, key, "theme")
        ids = [changes.put_topic(conn, write, model) for write, model in themes]
        conn.executemany("UPDATE topics SET themed = 1 WHERE id = ?", [(t,) for t in placed])
    return ids
