"""Reads of OpenCode's own database (``opencode.db``; the schema of ``opencode-ai`` 1.18.33,
``packages/opencode/src/session/session.sql.ts``), for ``localmem.ingest.opencode`` only.

Not localmem's store: a database another program writes while we read. Invariants: it is
opened read-only (``mode=ro`` URI flags and ``PRAGMA query_only``), so nothing here writes
to it or changes its journal mode; each read is one read transaction (a consistent
snapshot of a session's messages and parts) and is waited for while OpenCode holds a lock
(a short busy timeout, then ``retry.patiently``); rows come back as they are stored (the
``data`` columns as text: the caller parses them and reports what is malformed).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

import apsw

from localmem.storage.engine.retry import patiently

BUSY_MS = 200  # SQLite's own wait for OpenCode's lock before a retry.patiently pause


class SessionRow(NamedTuple):
    id: Any
    parent_id: Any
    directory: Any
    title: Any
    time_created: Any
    time_updated: Any


class MessageRow(NamedTuple):
    id: Any
    time_created: Any
    data: Any


class PartRow(NamedTuple):
    message_id: Any
    id: Any
    data: Any


class OpenCodeDb:
    """A read-only connection to OpenCode's database at ``path`` (a context manager);
    ``apsw.Error`` on open or read is the caller's to name."""

    def __init__(self, path: Path, on_wait: Callable[[], None] | None = None) -> None:
        self.on_wait = on_wait
        uri = "file:" + quote(str(path.resolve())) + "?mode=ro"
        self.conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        try:
            self.conn.setbusytimeout(BUSY_MS)
            self.conn.execute("PRAGMA query_only = 1")
        except apsw.Error:
            self.conn.close()
            raise

    def __enter__(self) -> OpenCodeDb:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def _read(self, fn: Callable[[], Any]) -> Any:
        def once() -> Any:
            self.conn.execute("BEGIN")
            try:
                return fn()
            finally:
                self.conn.execute("COMMIT")

        return patiently(once, self.on_wait)

    def sessions(self) -> list[SessionRow]:
        """Every session, oldest first."""
        sql = (
            "SELECT id, parent_id, directory, title, time_created, time_updated FROM session ORDER BY time_created, id"
        )
        return [SessionRow(*r) for r in self._read(lambda: self.conn.execute(sql).fetchall())]

    def messages(self, session: str, after: tuple[int, str] | None) -> tuple[list[MessageRow], list[PartRow]]:
        """The messages of ``session`` after ``(time_created, id)`` in OpenCode's order, and
        their parts (by message, then id), from one snapshot."""
        t, mid = after or (-1, "")
        where = "m.session_id = ? AND (m.time_created > ? OR (m.time_created = ? AND m.id > ?))"
        args = (session, t, t, mid)

        def read() -> tuple[list[MessageRow], list[PartRow]]:
            rows = self.conn.execute(
                f"SELECT m.id, m.time_created, m.data FROM message m WHERE {where} ORDER BY m.time_created, m.id", args
            ).fetchall()
            parts = self.conn.execute(
                "SELECT p.message_id, p.id, p.data FROM part p JOIN message m ON m.id = p.message_id "
                f"WHERE {where} ORDER BY p.message_id, p.id",
                args,
            ).fetchall()
            return [MessageRow(*r) for r in rows], [PartRow(*r) for r in parts]

        result: tuple[list[MessageRow], list[PartRow]] = self._read(read)
        return result
