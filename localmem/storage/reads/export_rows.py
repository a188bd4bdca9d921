"""The rows ``localmem export`` streams: every turn with its session, in session order.

Invariants:
- rows are streamed from one cursor, never collected, so an export of any size runs in
  bounded memory; the caller writes each before asking for the next;
- order: sessions in the order they were first written (their ids), turns in their
  place within each.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from localmem.storage.engine.db import Conn


class ExportRow(NamedTuple):
    session_id: int
    source: str
    session_key: str
    title: str
    started_at: str | None
    source_id: str | None  # the turn's id in its source (e.g. ``D1:3``)
    speaker: str
    role: str
    ts: str | None
    text: str


_ROWS = """
SELECT t.session_id, s.source, s.key, s.title, s.started_at, t.source_id, t.speaker, t.role, t.ts, t.text
FROM turns t JOIN sessions s ON s.id = t.session_id
WHERE (:key IS NULL OR s.key = :key) AND (:since IS NULL OR t.ts >= :since)
ORDER BY t.session_id, t.ord
"""


def export_rows(conn: Conn, *, session: str | None = None, since: str | None = None) -> Iterator[ExportRow]:
    """The turns (of sessions with key ``session``, said at or after the ISO time
    ``since``; either None for all), one at a time."""
    for r in conn.execute(_ROWS, {"key": session, "since": since}):
        yield ExportRow(*r)


def has_untimed_turn(conn: Conn, session_id: int) -> bool:
    """Whether a session holds a turn stored without any time."""
    row = conn.execute("SELECT 1 FROM turns WHERE session_id = ? AND ts IS NULL LIMIT 1", (session_id,)).fetchone()
    return row is not None


ORIGIN = ("client", "cwd", "repository", "branch", "commit")  # the names ``origin`` gives


def origin(conn: Conn, session_id: int) -> dict[str, str]:
    """The agent that wrote a session and where it ran (``ORIGIN``), only those known."""
    row = conn.execute(
        "SELECT client, cwd, repository, branch, git_commit FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    return {} if row is None else {k: str(v) for k, v in zip(ORIGIN, row, strict=True) if v}
