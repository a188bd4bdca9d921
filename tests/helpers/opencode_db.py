"""OpenCode databases for tests: the schema the real ``opencode-ai`` 1.18.33 creates
(``tests/ingest/fixtures/opencode/schema.sql``, dumped from a database its ``opencode run``
wrote) with sessions, messages and parts written as OpenCode writes them (``message.data``
and ``part.data`` JSON without their ids; ids that sort in time order)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import apsw

SCHEMA = Path(__file__).resolve().parents[1] / "ingest" / "fixtures" / "opencode" / "schema.sql"
OLD = 1_700_000_000_000  # ms: a session this old is settled (capture reads it whole)


class OpenCodeDb:
    """A database at ``path`` in OpenCode's schema; ``journal`` its journal mode."""

    def __init__(self, path: Path, journal: str = "wal") -> None:
        self.path = path
        self.conn = apsw.Connection(str(path))
        self.conn.execute(f"PRAGMA journal_mode = {journal}")
        if not self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'session'").fetchone():
            self.conn.execute(SCHEMA.read_text())
            self.conn.execute(
                "INSERT INTO project (id, worktree, time_created, time_updated, sandboxes) "
                "VALUES ('global', '/', 0, 0, '[]')"
            )
        self.n = 0

    def close(self) -> None:
        self.conn.close()

    def _id(self, prefix: str, t: int) -> str:
        self.n += 1
        return f"{prefix}_{t:012x}{self.n:04d}standin"

    def session(self, sid: str, directory: str, title: str = "", parent: str | None = None, t: int = OLD) -> str:
        self.conn.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created, "
            "time_updated) VALUES (?, 'global', ?, 'slug', ?, ?, '1.18.33', ?, ?)",
            (sid, parent, directory, title or f"New session - {t}", t, t),
        )
        return sid

    def message(self, sid: str, role: str, parts: list[dict[str, Any]], t: int, **data: Any) -> str:
        """A message of ``sid`` at ``t`` (ms) with ``parts``; an assistant message is
        completed with finish ``stop`` unless ``data`` says otherwise."""
        info: dict[str, Any] = {"role": role, "time": {"created": t}, "agent": "build"}
        if role == "assistant":
            info |= {"modelID": "claude-standin", "providerID": "anthropic", "time": {"created": t, "completed": t + 5}}
            info |= {"finish": "stop"}
        info |= data
        mid = self._id("msg", t)
        with self.conn:
            self.conn.execute(
                "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)",
                (mid, sid, t, t, json.dumps(info)),
            )
            for i, part in enumerate(parts):
                self.part(sid, mid, part, t + i)
            self.conn.execute("UPDATE session SET time_updated = max(time_updated, ?) WHERE id = ?", (t + 10, sid))
        return mid

    def part(self, sid: str, mid: str, part: dict[str, Any] | str, t: int) -> str:
        pid = self._id("prt", t)
        data = part if isinstance(part, str) else json.dumps(part)
        self.conn.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?, ?)",
            (pid, mid, sid, t, t, data),
        )
        return pid

    def raw_message(self, sid: str, data: str, t: int) -> str:
        mid = self._id("msg", t)
        self.conn.execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)",
            (mid, sid, t, t, data),
        )
        return mid

    def complete(self, mid: str, t: int, text: str) -> None:
        """An assistant message OpenCode was still writing: its text comes and it completes."""
        row = self.conn.execute("SELECT session_id, data FROM message WHERE id = ?", (mid,)).fetchone()
        info = json.loads(row[1]) | {"time": {"created": t, "completed": t + 5}, "finish": "stop"}
        with self.conn:
            self.part(row[0], mid, {"type": "text", "text": text}, t)
            self.conn.execute("UPDATE message SET data = ? WHERE id = ?", (json.dumps(info), mid))
            self.conn.execute("UPDATE session SET time_updated = ? WHERE id = ?", (t + 10, row[0]))


def now_ms() -> int:
    return int(time.time() * 1000)


def text(words: str, **flags: Any) -> dict[str, Any]:
    return {"type": "text", "text": words, **flags}
