"""GitHub Copilot CLI sessions: ``$COPILOT_HOME/session-state/<sessionId>/events.jsonl``
(``COPILOT_HOME`` defaults to ``~/.copilot``; ``copilot help environment``).

One event a line, the shape of the CLI's own schema (``@github/copilot`` 1.0.102:
``schemas/session-events.schema.json`` and ``copilot-sdk/generated/session-events.d.ts`` in
the package the CLI unpacks under ``~/.cache/copilot/pkg/``): ``{"type", "data", "id",
"timestamp", "parentId"}``, and ``agentId`` on a sub-agent's events. Read here:

- ``session.start`` (the first line): ``data.sessionId``, ``startTime`` and ``context``
  (``cwd``, ``gitRoot``, ``branch``, ``headCommit``, ``repository``): the session's key,
  start and project;
- ``user.message``: ``data.content``, the text as the person typed it (the CLI sends the
  model ``transformedContent``, the same text wrapped with ``<current_datetime>`` and the
  like: not read). Left out: a message with a ``source`` (a hidden skill injection
  ``skill-…``, another agent's prompt ``agent-…``) or ``isAutopilotContinuation``;
- ``assistant.message``: ``data.content``, the agent's text, and ``toolRequests``
  (``name``, ``arguments``) as compact tool lines; ``reasoningText`` and the encrypted
  reasoning fields are thinking, left out, as is every ``assistant.reasoning`` event;
- ``session.compaction_complete``: a compaction (nothing before it joins a turn after it).

Everything else is left out, counted by type: ``system.message`` (the system prompt),
``tool.execution_*`` (tool results), turn, usage, hook, permission and shutdown events.
A sub-agent's events (``agentId``) are session ``<sessionId>/<agentId>``: its prompt spoken
by the ``agent``, its replies by the ``subagent`` (as Claude Code's subagents). A turn's
native id is the event's ``id``. Source = ``copilot-cli``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest._agent import Break, Event, Said, Session, Skip, Tool, group, tool_line
from localmem.ingest._json import WINDOW, Cursor, Record, loads, records
from localmem.ingest._units import Unit, timestamp
from localmem.records import Project

SOURCE = CLIENT = "copilot-cli"
START = "session.start"
# The CLI's own tool names where they differ from the shared table's (``_agent.tool_line``),
# and its bookkeeping tools (background shells, sub-agents' status, intent and to-do lists).
_RENAMED = {"create": "write_file", "str_replace_editor": "edit_file", "powershell": "shell"}
_BOOKKEEPING = frozenset(
    {
        "read_bash",
        "write_bash",
        "stop_bash",
        "list_bash",
        "read_powershell",
        "write_powershell",
        "stop_powershell",
        "list_powershell",
        "read_agent",
        "list_agents",
        "report_intent",
        "update_todo",
        "think",
    }
)
_THINKING = ("reasoningText", "reasoningOpaque", "encryptedContent")


def units(path: Path, start: Cursor | None = None, tool_lines: str = "compact", hold: bool = False) -> Iterator[Unit]:
    start = start or Cursor()
    key, info = header(path)

    def events(rec: Record) -> list[Event]:
        return line_events(rec.value, path, rec.where, key, tool_lines)

    yield from group(records(path, start), events, lambda _key: info, start, hold=hold)


def header(path: Path) -> tuple[str, Session]:
    """The session id and what the ``session.start`` line says of the session."""
    try:
        with path.open("rb") as fh:
            obj = loads(fh.readline(WINDOW * 16).decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot read the session's first event: {exc}", path=str(path), where="line 1") from exc
    data = obj.get("data") if isinstance(obj, dict) and obj.get("type") == START else None
    if not isinstance(data, dict) or not isinstance(data.get("sessionId"), str) or not data["sessionId"]:
        raise InputError(
            "the first line is not a Copilot CLI session.start event with a sessionId", path=str(path), where="line 1"
        )
    ctx: dict[str, Any] = data["context"] if isinstance(data.get("context"), dict) else {}
    project = Project(
        cwd=_str(ctx.get("cwd")),
        branch=_str(ctx.get("branch")),
        repository=_str(ctx.get("repository")),
        commit=_str(ctx.get("headCommit")),
    )
    started = timestamp(data.get("startTime") or obj.get("timestamp"), path, "line 1.data.startTime")
    return data["sessionId"], Session(SOURCE, CLIENT, project if any(vars(project).values()) else None, started)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def line_events(obj: Any, path: Path, where: str, key: str, tool_lines: str) -> list[Event]:
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object", path=str(path), where=where)
    kind = obj.get("type")
    if not isinstance(kind, str):
        return [Skip("event without a type")]
    if kind == "session.compaction_complete":
        return [Skip("compaction summary"), Break()]
    if kind not in ("user.message", "assistant.message"):
        return [Skip("thinking" if kind == "assistant.reasoning" else kind)]
    data = obj.get("data")
    if not isinstance(data, dict):
        return [Skip(f"{kind} without data")]
    agent = obj.get("agentId")
    side = isinstance(agent, str) and bool(agent)
    sid = f"{key}/{agent}" if side else key
    ts = timestamp(obj.get("timestamp"), path, f"{where}.timestamp")
    native = obj["id"] if isinstance(obj.get("id"), str) and obj["id"] else None
    if kind == "user.message":
        return _user(data, sid, side, ts, native)
    return _assistant(data, sid, side, ts, native, tool_lines)


def _user(data: dict[str, Any], key: str, side: bool, ts: str | None, native: str | None) -> list[Event]:
    source = data.get("source")
    if isinstance(source, str) and source and source != "user":
        return [Skip("injected context")]
    if data.get("isAutopilotContinuation") is True:
        return [Skip("autopilot continuation")]
    text = data.get("content")
    text = text.strip() if isinstance(text, str) else ""
    if not text:
        return [Skip("empty message")]
    return [Said(key, "user", "agent" if side else "user", text, ts, native)]


def _assistant(
    data: dict[str, Any], key: str, side: bool, ts: str | None, native: str | None, tool_lines: str
) -> list[Event]:
    out: list[Event] = []
    text = data.get("content")
    text = text.strip() if isinstance(text, str) else ""
    if text:
        out.append(Said(key, "assistant", "subagent" if side else "assistant", text, ts, native))
    calls = data.get("toolRequests")
    for call in calls if isinstance(calls, list) else []:
        name = call.get("name") if isinstance(call, dict) else None
        if not isinstance(name, str) or not name:
            continue
        line = None if name in _BOOKKEEPING else tool_line(_RENAMED.get(name, name), call.get("arguments"))
        if tool_lines == "compact" and line is not None:
            out.append(Tool(key, line, ts, native))
        else:
            out.append(Skip("tool call"))
    if any(data.get(k) for k in _THINKING):
        out.append(Skip("thinking"))  # last: a record's first event says whether it opens a turn
    return out or [Skip("empty message")]
