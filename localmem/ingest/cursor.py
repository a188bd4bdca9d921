"""Cursor agent transcripts: ``~/.cursor/projects/<project>/agent-transcripts/<id>.jsonl``
(the ``cursor-agent`` CLI), ``<id>/<id>.jsonl`` (the editor's agent) and a subagent's
``<id>/subagents/<subagent id>.jsonl``.

Cursor documents the file only as the ``transcript_path`` its hooks are given
(https://cursor.com/docs/agent/hooks), not its lines; what is read here is the shape
recorded from real sessions by entireio/cli (``cmd/entire/cli/agent/cursor/AGENT.md``,
``transcript.go``: Cursor CLI 2026.02.13): one message a line, ``{"role": "user" |
"assistant", "message": {"content": [blocks]}}``, the blocks in the Messages shape
(``text``; ``tool_use`` with ``name`` and ``input``: ``Shell`` {command}, ``Read`` /
``Write`` / ``StrReplace`` / ``Delete`` {path}, ``Grep`` {pattern}, ``Glob``
{glob_pattern}, ...). A person's words are wrapped in ``<user_query>`` … ``</user_query>``
and Cursor may put a ``<timestamp>`` line and other context in tags of its own before them.

Kept: the inside of each ``<user_query>`` (a user line without one: its text with every
``<tag>…</tag>`` block Cursor put in it cut out) and the agent's text, with its tool calls
as compact lines (setting ``ingest.tool_lines``). Left out (counted): thinking blocks, tool
results, other roles, context-only user lines. The lines carry no ids and no times: a turn's
native id is its line number, the session has no start time, and no project (the folder
name is the project's path with every other character than a letter or digit made ``-``,
which cannot be read back) unless the caller knows it: Cursor's hooks name it
(``workspace_roots``), and ``hooks.run`` passes it as ``project``. A subagent's file is session ``<parent id>/<subagent id>``, its
prompt spoken by the ``agent``, its replies by the ``subagent``. Source = ``cursor``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest._agent import Event, Said, Session, Skip, group, message_blocks, text_of, tool_line
from localmem.ingest._json import Cursor, Record, records
from localmem.ingest._units import Unit
from localmem.records import Project

SOURCE = CLIENT = "cursor"
_QUERY = re.compile(r"<user_query>(.*?)</user_query>", re.DOTALL)
_TAG_BLOCK = re.compile(r"<([a-z][a-z0-9_-]*)(?:\s[^>]*)?>.*?</\1>", re.DOTALL)
# Cursor's tool names as the shared table knows them (``_agent.tool_line``), with the key
# that holds the argument where it differs.
_TOOLS = {"strreplace": "edit", "delete": "edit", "shell": "shell", "glob": "glob", "ls": "ls"}
_BOOKKEEPING = frozenset({"todowrite", "todo_write", "updatetodos", "createplan"})


def units(
    path: Path, start: Cursor | None = None, tool_lines: str = "compact", hold: bool = False, project: str = ""
) -> Iterator[Unit]:
    start = start or Cursor()
    key, side = session_key(path)
    info = Session(SOURCE, CLIENT, Project(cwd=project) if project else None)

    def events(rec: Record) -> list[Event]:
        return line_events(rec.value, path, rec.where, key, side, rec.index + 1, tool_lines)

    yield from group(records(path, start), events, lambda _key: info, start, hold=hold)


def session_key(path: Path) -> tuple[str, bool]:
    """The session a transcript is (its file name), and whether it is a subagent's."""
    if path.parent.name == "subagents":
        return f"{path.parent.parent.name}/{path.stem}", True
    return path.stem, False


def line_events(obj: Any, path: Path, where: str, key: str, side: bool, line: int, tool_lines: str) -> list[Event]:
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object", path=str(path), where=where)
    role = obj.get("role")
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else obj.get("content")
    native = str(line)
    if role == "user":
        return _user(content, key, side, native)
    if role == "assistant":
        speaker = "subagent" if side else "assistant"
        return message_blocks(content, key, speaker, None, native, tool_lines, tool=_tool, thinking=_THINKING)
    return [Skip(f"{role} message" if isinstance(role, str) else "line without a role")]


def _user(content: Any, key: str, side: bool, native: str) -> list[Event]:
    if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return [Skip("tool result")]
    text = text_of(content, placeholders={"image": "[image]"})
    queries = _QUERY.findall(text)
    text = "\n\n".join(q.strip() for q in queries).strip() if queries else _TAG_BLOCK.sub("", text).strip()
    if not text:
        return [Skip("injected context")]
    return [Said(key, "user", "agent" if side else "user", text, None, native)]


_THINKING = ("thinking", "redacted_thinking", "reasoning")


def _tool(name: str, args: Any) -> str | None:
    low = name.lower()
    if low in _BOOKKEEPING:
        return None
    a = dict(args) if isinstance(args, dict) else {}
    if low == "glob" and "glob_pattern" in a:
        a["pattern"] = a["glob_pattern"]
    return tool_line(_TOOLS.get(low, name), a)
