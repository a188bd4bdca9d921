"""Export a store's sessions and turns as JSON Lines that ``localmem ingest`` reads back.

``export(conn, out, session=, since=)`` writes one self-contained JSON object per turn,
in session order (the order sessions were first written) and turn order within each:

    {"localmem": 1, "source": "mcp", "session": "chat-1", "title": "", "started_at": "2024-05-20T10:00:00",
     "id": "D1:3", "speaker": "Maya", "role": "user", "timestamp": "2024-05-20T10:00:00", "text": "..."}

A session that an agent wrote adds, on each of its lines, the agent (``"client"``) and
where it ran (``"cwd"``, ``"repository"``, ``"branch"``, ``"commit"``), each only when known,
so a project scope (``query --project``, a hook's) finds it in the store an export moves
to; a chat's lines are as before.

``units(path, start)`` is the ingest format ``localmem`` (detected by the ``localmem``
key): each line becomes a one-turn session with the exported source, key, title, client
and project, and the text exactly as exported (not stripped). Since a turn's identity (its content hash)
is made of source, session key, native id, speaker, role, time and text, a round trip
into an empty store reproduces every turn, and ingesting an export into the store it came
from writes nothing. Only turns travel: cues, tags, facts, topics and links are derived
data, rebuilt by the enrichment worker after an ingest.

Invariants: memory stays bounded (rows are streamed from one cursor,
``localmem.storage.reads.export_rows``, and written line by line; nothing is collected); output is UTF-8 whatever the terminal's encoding; a line
per turn, so an interrupted ingest of an export resumes like any JSON Lines file.
A session holding a turn stored without any time exports ``started_at`` as null, since
on ingest an untimed turn takes its session's start (and so would change identity).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from localmem.errors import InputError
from localmem.ingest._json import Cursor, records
from localmem.ingest._units import Unit, bad, timestamp
from localmem.records import Project, SessionIn, TurnIn
from localmem.storage.engine.db import Conn
from localmem.storage.reads.export_rows import export_rows, has_untimed_turn, origin
from localmem.util.text import parse_time

FORMAT = "localmem"
VERSION = 1
MARKER = "localmem"  # the key every exported line carries (its value: VERSION)
# Line breaks to Python's str.splitlines and to JavaScript that JSON leaves raw inside
# strings: escaped, so that any line reader sees one line per turn.
_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


@dataclass
class ExportReport:
    sessions: int = 0
    turns: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"sessions": self.sessions, "turns": self.turns}


def export(conn: Conn, out: IO[bytes], *, session: str | None = None, since: str | None = None) -> ExportReport:
    """Write the turns (of session key ``session``, said at or after ``since``) to ``out``."""
    try:
        since_ts = parse_time(since) if since else None
    except ValueError as exc:
        raise InputError(f"--since: {exc}") from exc
    report = ExportReport()
    current: int | None = None
    started: str | None = None
    ran: dict[str, str] = {}
    for sid, source, key, title, started_at, native, speaker, role, ts, text in export_rows(
        conn, session=session, since=since_ts
    ):
        if sid != current:
            current = sid
            report.sessions += 1
            started = None if has_untimed_turn(conn, sid) else started_at
            ran = origin(conn, sid)
        line = {
            MARKER: VERSION,
            "source": source,
            "session": key,
            "title": title,
            "started_at": started,
            "id": native,
            "speaker": speaker,
            "role": role,
            "timestamp": ts,
            "text": text,
            **ran,
        }
        out.write(json.dumps(line, ensure_ascii=False).translate(_BREAKS).encode("utf-8") + b"\n")
        report.turns += 1
    return report


# -- reading an export back (the ingest format ``localmem``) ----------------------------


def units(path: Path, start: Cursor | None = None) -> Iterator[Unit]:
    for rec in records(path, start):
        if rec.error is not None:
            yield bad(rec.index, rec.where, rec.after, rec.error)
            continue
        try:
            session = _line(rec.value, path, rec.where)
        except InputError as exc:
            yield bad(rec.index, rec.where, rec.after, exc)
            continue
        yield Unit(rec.index, rec.where, (session,), rec.after)


def _line(obj: Any, path: Path, where: str) -> SessionIn:
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object", path=str(path), where=where)
    if obj.get(MARKER) != VERSION:
        raise InputError(
            f"not a localmem export line of version {VERSION} ('{MARKER}': {obj.get(MARKER)!r})",
            path=str(path),
            where=where,
        )

    def text_field(name: str, *, required: bool = True, nullable: bool = False) -> str | None:
        value = obj.get(name)
        if value is None and (nullable or not required):
            return None if nullable else ""
        if not isinstance(value, str):
            raise InputError(f"field {name!r} should be a string", path=str(path), where=f"{where}.{name}")
        return value

    text = text_field("text")
    if not text or not text.strip():
        raise InputError("missing or empty 'text'", path=str(path), where=f"{where}.text")
    source, key = text_field("source"), text_field("session")
    if not source or not key:
        raise InputError("'source' and 'session' must be non-empty strings", path=str(path), where=where)
    turn = TurnIn(
        text=text,
        speaker=text_field("speaker", required=False) or "",
        role=text_field("role") or "",
        timestamp=timestamp(obj.get("timestamp"), path, f"{where}.timestamp"),
        source_id=text_field("id", nullable=True),
    )
    ran = {k: text_field(k, required=False) or "" for k in ("cwd", "repository", "branch", "commit")}
    return SessionIn(
        key=key,
        turns=(turn,),
        started_at=timestamp(obj.get("started_at"), path, f"{where}.started_at"),
        source=source,
        title=text_field("title", required=False) or "",
        client=text_field("client", required=False) or "",
        project=Project(**ran) if any(ran.values()) else None,
    )
