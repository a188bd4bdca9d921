"""OpenCode's sessions, read from its SQLite database (``opencode-ai`` 1.x):
``$XDG_DATA_HOME/opencode/opencode.db`` (default ``~/.local/share/opencode``; a build of
another channel writes ``opencode-<channel>.db`` there: ``G4`` in the 1.18.33 binary, the
source's ``packages/opencode/src/storage/db.ts``).

The schema is OpenCode's own (``packages/opencode/src/session/session.sql.ts``, the migrations
bundled in the 1.18.33 binary, and a database the real CLI wrote): ``session`` (``id``,
``parent_id``, ``directory``, ``title``, ``time_created``, ``time_updated``, in ms),
``message`` (``id``, ``session_id``, ``time_created``, ``data``: JSON ``{role, time,
summary, finish, error, modelID, …}``) and ``part`` (``id``, ``message_id``, ``session_id``,
``data``: JSON ``{type, …}``); OpenCode orders messages by ``(time_created, id)`` and parts
by ``id`` (``message-v2.ts``). Part types (``message-v2.ts``): ``text`` (``text``, and
``synthetic`` / ``ignored`` flags), ``reasoning``, ``tool`` (``tool``, ``state.input``),
``file``, ``agent``, ``subtask``, ``compaction``, ``step-start``, ``step-finish``,
``snapshot``, ``patch``, ``retry``.

Kept: a user message's text parts (joined, one turn; native id = the message id), an
assistant message's text parts (native id = the part id) with its tool calls as compact
lines (``ingest.tool_lines``; OpenCode's ``filePath`` argument read as a path). Left out,
counted by reason: synthetic and ignored text (file contents OpenCode inlines, tool-result
stand-ins), reasoning, tool results, files, an assistant's compaction summary
(``summary: true``, with a compaction part: a ``Break``), and every bookkeeping part.
Localmem's own injected context is dropped by the write path (``localmem.util.injected``).
A sub-agent's session (``parent_id``) is ``<parent id>/<id>``, its prompt spoken by the
``agent``, its replies by the ``subagent``. Source = client = ``opencode``; project = the
session's ``directory``; the session's title unless it is OpenCode's placeholder.

Invariants: the database is opened read-only (``mode=ro``, ``query_only``): nothing here
writes to it or changes its journal mode, and its files are never opened through Python
(that would drop SQLite's POSIX locks on them: sqlite.org/howtocorrupt.html §2), only
``os.stat``-ed (:func:`signature`). Each session is read in one read transaction, waited
for while OpenCode holds a lock (``storage.reads.opencode_db``, where its SQL is). A row
that is not what the schema says is a bad unit naming the database, the session and the
message; the rest is read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from localmem.errors import InputError
from localmem.ingest._agent import Break, Event, Said, Session, Skip, Tool, group, tool_line
from localmem.ingest._json import Cursor, Record, loads
from localmem.ingest._units import Unit, checked
from localmem.records import Project
from localmem.storage.reads import opencode_db
from localmem.util.text import parse_time

SOURCE = CLIENT = "opencode"
NAME = "opencode.db"
PLACEHOLDER_TITLES = ("New session - ", "Child session - ")  # OpenCode's title before one is made
FINISHED = frozenset({"stop", "length", "content-filter", "error", "other"})  # not "tool-calls": the loop goes on


def is_database(path: Path) -> bool:
    """Whether ``path`` is named as OpenCode's database (``opencode.db``, ``opencode-<channel>.db``)."""
    return path.name == NAME or (path.name.startswith("opencode-") and path.suffix == ".db")


def database_of(path: Path) -> Path | None:
    """The database ``path`` is (or whose ``-wal`` it is); None for anything else."""
    name = path.name.removesuffix("-wal")
    db = path.with_name(name)
    return db if is_database(db) else None


def signature(db: Path) -> tuple[int, int, int, int] | None:
    """Size and mtime of the database and its ``-wal`` (0, 0 when there is none or it is
    empty), by ``os.stat`` only; None when the database is gone."""
    try:
        st = os.stat(db)
    except OSError:
        return None
    try:
        wal = os.stat(f"{db}-wal")
    except OSError:
        return (st.st_size, st.st_mtime_ns, 0, 0)
    # An empty -wal holds nothing (a reader's connection may make one): the same as none.
    return (st.st_size, st.st_mtime_ns, wal.st_size, wal.st_mtime_ns if wal.st_size else 0)


@dataclass(frozen=True)
class SessionRow:
    id: str
    parent_id: str
    directory: str
    title: str
    created_ms: int
    updated_ms: int

    @property
    def key(self) -> str:
        return f"{self.parent_id}/{self.id}" if self.parent_id else self.id


@dataclass(frozen=True)
class Message:
    id: str
    created_ms: int
    data: Any  # the message row's JSON (a dict when well-formed)
    parts: tuple[tuple[str, Any], ...]  # (part id, its JSON), in OpenCode's order
    error: str | None = None  # why a row of it is not JSON

    def finished(self) -> bool:
        """Whether this message ends the agent's loop: an assistant message completed with
        a final reason or an error (a user message never does)."""
        d = self.data if isinstance(self.data, dict) else {}
        if d.get("role") != "assistant":
            return False
        done = isinstance(d.get("time"), dict) and d["time"].get("completed") is not None
        return bool(d.get("error")) or (done and d.get("finish") in FINISHED)

    def complete(self) -> bool:
        """Whether OpenCode is done writing it (a user message is written whole)."""
        d = self.data if isinstance(self.data, dict) else {}
        if d.get("role") != "assistant":
            return True
        return bool(d.get("error")) or (isinstance(d.get("time"), dict) and d["time"].get("completed") is not None)


class Database:
    """OpenCode's database, read-only (``storage.reads.opencode_db``), as sessions and
    messages; a context manager. What cannot be opened or read is an ``InputError``."""

    def __init__(self, db: Path, on_wait: Callable[[], None] | None = None) -> None:
        self.path = db
        try:
            self.src = opencode_db.OpenCodeDb(db, on_wait)
        except apsw.Error as exc:
            raise InputError(f"cannot open OpenCode's database read-only: {exc}", path=str(db)) from exc

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.src.__exit__()

    def sessions(self) -> list[SessionRow]:
        """Every session, oldest first."""
        try:
            rows = self.src.sessions()
        except apsw.Error as exc:
            raise InputError(f"cannot read OpenCode's sessions: {exc}", path=str(self.path)) from exc
        out = []
        for r in rows:
            if not isinstance(r.id, str) or not isinstance(r.time_created, int) or not isinstance(r.time_updated, int):
                raise InputError(f"session {r.id!r} has no id or times", path=str(self.path), where="table session")
            out.append(
                SessionRow(r.id, r.parent_id or "", r.directory or "", r.title or "", r.time_created, r.time_updated)
            )
        return out

    def messages(self, session: str, after: tuple[int, str] | None = None) -> list[Message]:
        """The messages of ``session`` after ``(time_created, id)``, with their parts, in
        OpenCode's order (one snapshot); a row that is not JSON is marked, not raised."""
        try:
            rows, part_rows = self.src.messages(session, after)
        except apsw.Error as exc:
            raise InputError(
                f"cannot read OpenCode's messages: {exc}", path=str(self.path), where=f"session {session}"
            ) from exc
        by_message: dict[str, list[tuple[str, Any]]] = {}
        bad: dict[str, str] = {}
        for p in part_rows:
            try:
                by_message.setdefault(p.message_id, []).append((str(p.id), loads(p.data)))
            except (TypeError, ValueError) as exc:
                bad.setdefault(p.message_id, f"part {p.id}: data is not JSON ({exc})")
        out = []
        for m in rows:
            error = bad.get(m.id)
            try:
                info = loads(m.data)
            except (TypeError, ValueError) as exc:
                info, error = None, f"data is not JSON ({exc})"
            out.append(Message(str(m.id), int(m.time_created), info, tuple(by_message.get(m.id, ())), error))
        return out


def session_info(s: SessionRow) -> Session:
    title = "" if s.title.startswith(PLACEHOLDER_TITLES) else s.title
    project = Project(cwd=s.directory) if s.directory else None
    return Session(SOURCE, CLIENT, project, parse_time(s.created_ms / 1000), title)


def units(
    db: Path, session: SessionRow, messages: list[Message], *, tool_lines: str = "compact", hold: bool = False
) -> Iterator[Unit]:
    """The units of ``messages`` (read after a session's resume point); a unit's
    ``after.index`` is how many of them it and the units before it took. ``hold``: a step
    the agent is still in (its last message not finished) is left for the next read."""
    if hold:  # an assistant message OpenCode is still writing, and all after it, wait
        cut = next((i for i, m in enumerate(messages) if not m.complete()), len(messages))
        messages = messages[:cut]
        hold = not (messages and messages[-1].finished())
    info = session_info(session)
    where = f"session {session.id}"  # with the message: where a bad row is

    def recs() -> Iterator[Record]:
        for i, m in enumerate(messages):
            at = f"{where}, message {m.id}"
            why = m.error or _malformed(m)
            err = InputError(why, path=str(db), where=at) if why else None
            yield Record(i, at, m, Cursor(i + 1, i + 1, 1), err)

    def events(rec: Record) -> list[Event]:
        return message_events(rec.value, session, tool_lines)

    for u in group(recs(), events, lambda _key: info, Cursor(), hold=hold):
        yield checked(u, db)


def _malformed(m: Message) -> str | None:
    if not isinstance(m.data, dict):
        return "data is not a JSON object"
    for part_id, part in m.parts:
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            return f"part {part_id} is not a JSON object with a type"
    return None


def message_events(m: Message, s: SessionRow, tool_lines: str) -> list[Event]:
    """What one message says, things said first (``_agent.group`` reads a record's first
    event to know whether it opens a turn), then what is left out."""
    role = m.data.get("role")
    side = bool(s.parent_id)
    created = m.data.get("time", {}).get("created") if isinstance(m.data.get("time"), dict) else None
    ms = created if isinstance(created, int | float) and not isinstance(created, bool) else m.created_ms
    ts = parse_time(ms / 1000)
    said: list[Event] = []
    skipped: list[Event] = []
    if role == "assistant" and m.data.get("summary") is True:
        return [Skip("compaction summary"), Break()]
    if role not in ("user", "assistant"):
        return [Skip(f"{role} message")]
    texts: list[str] = []
    for part_id, part in m.parts:
        kind = part["type"]
        if kind == "text":
            text = part.get("text")
            if part.get("synthetic") or part.get("ignored"):
                skipped.append(Skip("synthetic text" if part.get("synthetic") else "ignored text"))
            elif isinstance(text, str) and text.strip():
                if role == "user":
                    texts.append(text.strip())
                else:
                    said.append(
                        Said(s.key, "assistant", "subagent" if side else "assistant", text.strip(), ts, part_id)
                    )
        elif kind == "tool" and role == "assistant":
            said.append(_tool(part, s.key, ts, part_id, tool_lines) or Skip("tool call"))
        elif kind == "compaction":
            skipped += [Skip("compaction"), Break()]
        else:
            skipped.append(Skip("thinking" if kind == "reasoning" else kind))
    if texts:
        said.insert(0, Said(s.key, "user", "agent" if side else "user", "\n\n".join(texts), ts, m.id))
    if not said and not skipped:
        skipped.append(Skip("empty message"))
    return said + skipped


def _tool(part: dict[str, Any], key: str, ts: str | None, native: str, tool_lines: str) -> Tool | None:
    name = part.get("tool")
    state = part.get("state")
    if tool_lines != "compact" or not isinstance(name, str) or not name:
        return None
    args = state.get("input") if isinstance(state, dict) else None
    args = dict(args) if isinstance(args, dict) else {}
    if isinstance(args.get("filePath"), str):  # OpenCode's read/write/edit take camelCase filePath
        args.setdefault("file_path", args["filePath"])
    line = tool_line(name, args)
    return None if line is None else Tool(key, line, ts, native)
