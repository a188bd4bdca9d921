"""Claude Code transcripts: ``~/.claude/projects/<encoded cwd>/<sessionId>.jsonl`` and its
subagents' ``<sessionId>/subagents/agent-<id>.jsonl``.

One JSON record per line. Fields relied on: ``type`` (``user``, ``assistant``,
``attachment``; ``summary``, ``system``, ``file-history-snapshot``, ``queue-operation``,
``progress`` and the like are left out, counted), ``sessionId``, ``uuid`` (the native turn
id), ``timestamp``, ``cwd`` and ``gitBranch`` (the session's project), ``isSidechain`` and
``agentId`` (a subagent's lines: session ``<sessionId>/<agentId>``, its prompt spoken by
the ``agent``, its replies by the ``subagent``), ``isMeta``, ``isCompactSummary``,
``isVisibleInTranscriptOnly``, ``isApiErrorMessage``, and ``message`` in the Messages
shape: ``content`` a string or blocks (``text``, ``image``, ``thinking``,
``redacted_thinking``, ``tool_use`` {name, input}, ``tool_result``). An assistant reply is
written over several lines that share ``message.id``, one block a line; see
``localmem.ingest._agent`` for how text and tool calls become turns. A prompt the person
typed while the agent worked is an ``attachment`` of type ``queued_command``
(``commandMode`` ``prompt``, ``origin.kind`` ``human``).

Kept: what the person typed (a slash command only with its arguments: ``/review the auth
change``) and the agent's text, with its tool calls as compact lines (setting
``ingest.tool_lines``). Left out: thinking, tool results, meta lines (skill and command
expansions, hook feedback), compaction summaries, command wrappers and their output
(``<command-name>``, ``<local-command-stdout>``, ``<bash-stdout>``, …), interruptions,
``<system-reminder>`` blocks and API error stand-ins. Source = ``claude-code``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest._agent import Break, Event, Said, Session, Skip, group, message_blocks, text_of
from localmem.ingest._json import Cursor, Record, records
from localmem.ingest._units import Unit, timestamp
from localmem.records import Project

SOURCE = CLIENT = "claude-code"
TYPES = frozenset({"user", "assistant", "attachment", "system", "summary", "file-history-snapshot", "queue-operation"})
_REMINDER = re.compile(r"<(system-reminder|user-prompt-submit-hook)>.*?</\1>", re.DOTALL)
_COMMAND = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.DOTALL)
_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
# A user line that starts with one of these is the harness's, not the person's.
NOT_TYPED = (
    "<local-command-",
    "<command-message>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<task-notification>",
    "<agent-message",
    "<channel",
    "Caveat: The messages below were generated",
    "[Request interrupted",
    "This session is being continued from a previous conversation",
)


def units(path: Path, start: Cursor | None = None, tool_lines: str = "compact", hold: bool = False) -> Iterator[Unit]:
    start = start or Cursor()
    projects: dict[str, Project] = {}

    def events(rec: Record) -> list[Event]:
        return line_events(rec.value, path, rec.where, tool_lines, projects)

    def session(key: str) -> Session:
        return Session(SOURCE, CLIENT, projects.get(key))

    yield from group(records(path, start), events, session, start, hold=hold)


def line_events(obj: Any, path: Path, where: str, tool_lines: str, projects: dict[str, Project]) -> list[Event]:
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object", path=str(path), where=where)
    kind = obj.get("type")
    if kind not in ("user", "assistant", "attachment"):
        if kind == "summary" or (kind == "system" and obj.get("subtype") == "compact_boundary"):
            return [Skip("compaction summary"), Break()]
        return [Skip(f"{kind} record" if isinstance(kind, str) else "record without a type")]
    sid = obj.get("sessionId")
    if not isinstance(sid, str) or not sid:
        return [Skip("record without a sessionId")]
    side = obj.get("isSidechain") is True
    agent = obj.get("agentId")
    key = f"{sid}/{agent if isinstance(agent, str) and agent else 'sidechain'}" if side else sid
    if key not in projects and isinstance(obj.get("cwd"), str):
        branch = obj.get("gitBranch")
        projects[key] = Project(cwd=obj["cwd"], branch=branch if isinstance(branch, str) else "")
    if obj.get("isMeta") is True or obj.get("isVisibleInTranscriptOnly") is True:
        return [Skip("meta")]
    if obj.get("isCompactSummary") is True:
        return [Skip("compaction summary"), Break()]
    ts = timestamp(obj.get("timestamp"), path, f"{where}.timestamp")
    native = obj["uuid"] if isinstance(obj.get("uuid"), str) and obj["uuid"] else None
    if kind == "attachment":
        return _attachment(obj.get("attachment"), key, side, ts, native)
    message = obj.get("message")
    if not isinstance(message, dict):
        return [Skip("record without a message")]
    if kind == "user":
        return _user(message.get("content"), key, side, ts, native)
    if obj.get("isApiErrorMessage") is True or message.get("model") == "<synthetic>":
        return [Skip("api error")]
    speaker = "subagent" if side else "assistant"
    return message_blocks(message.get("content"), key, speaker, ts, native, tool_lines, placeholder="(no content)")


def _user(content: Any, key: str, side: bool, ts: str | None, native: str | None) -> list[Event]:
    if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return [Skip("tool result")]
    text = _REMINDER.sub("", text_of(content, placeholders={"image": "[image]", "document": "[document]"})).strip()
    if not text:
        return [Skip("empty message")]
    if (m := _COMMAND.search(text)) is not None:
        args = _ARGS.search(text)
        said = (m.group(1) + " " + args.group(1).strip()) if args and args.group(1).strip() else ""
        if not said:
            return [Skip("command")]
        text = said
    elif text.startswith(NOT_TYPED):
        return [Skip("command output or notice")]
    return [Said(key, "user", "agent" if side else "user", text, ts, native)]


def _attachment(att: Any, key: str, side: bool, ts: str | None, native: str | None) -> list[Event]:
    if not isinstance(att, dict) or att.get("type") != "queued_command":
        return [Skip("attachment")]
    origin = att.get("origin")
    human = not isinstance(origin, dict) or origin.get("kind") == "human"
    if att.get("commandMode") != "prompt" or not human or att.get("isMeta") is True or side:
        return [Skip("attachment")]
    text = _REMINDER.sub("", text_of(att.get("prompt"))).strip()
    if not text or text.startswith(NOT_TYPED):
        return [Skip("attachment")]
    return [Said(key, "user", "user", text, ts, native)]
