"""Gemini CLI chats: ``~/.gemini/tmp/<project>/chats/session-*.json`` (one object) and
``session-*.jsonl`` (one record a line; subagents under ``chats/<parent session>/``).

The object: ``sessionId``, ``projectHash`` (sha256 of the project's root), ``startTime``,
``lastUpdated``, ``summary``, ``kind`` (``main`` / ``subagent``) and ``messages``; the
JSON Lines file: that object without ``messages`` on its first line, then one message
per line, ``{"$set": {…}}`` metadata updates and ``{"$rewindTo": id}``. A message has
``id``, ``timestamp``, ``type`` (``user``, ``gemini``; ``info`` / ``error`` / ``warning``
are left out), ``content`` (a string or parts; ``text`` parts kept, ``thought`` parts,
function calls and responses not), ``displayContent`` (what the person typed, where it
differs from what was sent), and on ``gemini`` messages ``thoughts`` (left out) and
``toolCalls`` (``id``, ``name``, ``args``, ``timestamp``).

Gemini CLI appends a message again each time it changes (tool calls added, tokens
counted), with the same id and text: the first version of an id is taken, and each tool
call is a turn of its own (``ran: …``, native id the call's id), so a later version adds
nothing and a file read again finds every turn already stored. Tool responses (sent as
user messages of function responses), slash commands and ``?`` help, injected
``<session_context>`` and ``$set`` checkpoints of the whole history are left out, and so
is every ``<hook_context>`` block a hook's reply became (Gemini CLI puts a session start's
before the person's first prompt, in the same text: the prompt after it is kept). A ``.project_root`` file beside the chats folder whose path hashes to
``projectHash`` gives the project. Source = ``gemini-cli``; session = ``sessionId``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest._agent import Event, Said, Session, Skip, group, text_of, tool_line
from localmem.ingest._json import WINDOW, Cursor, Record, loads, records, shape
from localmem.ingest._units import Unit, timestamp
from localmem.records import Project

SOURCE = CLIENT = "gemini-cli"
IGNORED_PROMPTS = ("/", "?", "<session_context>", "<hook_context>")
# What a hook added to a prompt (Gemini CLI 0.61 puts a session start's context before the
# typed text, in the message and its ``displayContent``, and a prompt hook's as a part of
# its own); the CLI escapes ``<`` inside, so the first closing tag is the block's own.
_HOOK_CONTEXT = re.compile(r"<hook_context>.*?</hook_context>", re.DOTALL)


def units(path: Path, start: Cursor | None = None, tool_lines: str = "compact", hold: bool = False) -> Iterator[Unit]:
    start = start or Cursor()
    seen: set[str] = set()  # message and tool call ids taken in this read
    if shape(path) == "object":
        head: dict[str, Any] = {}
    else:
        head = _first_line(path)
    info = _session(head, path)

    def events(rec: Record) -> list[Event]:
        obj = rec.value
        if not isinstance(obj, dict):
            raise InputError("expected a JSON object", path=str(path), where=rec.where)
        if isinstance(obj.get("messages"), list):  # the whole chat in one object
            info.project = info.project or _project(obj, path)
            key = _key(obj, path, rec.where)
            info.started_at = timestamp(obj.get("startTime"), path, f"{rec.where}.startTime")
            out: list[Event] = []
            for i, msg in enumerate(obj["messages"]):
                out.extend(_message(msg, path, f"{rec.where}.messages[{i}]", key, seen, tool_lines))
            return out
        if "$set" in obj:
            return [Skip("checkpoint" if isinstance(obj["$set"], dict) and "messages" in obj["$set"] else "metadata")]
        if "$rewindTo" in obj:
            return [Skip("rewind")]
        if rec.index == 0 and "sessionId" in obj:
            return [Skip("metadata")]
        return _message(obj, path, rec.where, _key(head, path, "line 1"), seen, tool_lines)

    yield from group(records(path, start), events, lambda _key: info, start, hold=hold)


def _first_line(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            obj = loads(fh.readline(WINDOW * 16).decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot read the chat's first line: {exc}", path=str(path), where="line 1") from exc
    if not isinstance(obj, dict):
        raise InputError("the first line is not a Gemini CLI chat header", path=str(path), where="line 1")
    return obj


def _session(head: dict[str, Any], path: Path) -> Session:
    started = timestamp(head.get("startTime"), path, "line 1.startTime") if head else None
    return Session(SOURCE, CLIENT, _project(head, path) if head else None, started)


def _key(obj: dict[str, Any], path: Path, where: str) -> str:
    sid = obj.get("sessionId")
    if not isinstance(sid, str) or not sid:
        raise InputError("missing field 'sessionId'", path=str(path), where=where)
    return sid


def _project(obj: dict[str, Any], path: Path) -> Project | None:
    """The project root from a ``.project_root`` file above the chat, if it hashes to ``projectHash``."""
    want = obj.get("projectHash")
    if not isinstance(want, str):
        return None
    for folder in list(path.parents)[1:4]:
        marker = folder / ".project_root"
        try:
            root = marker.read_text("utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if hashlib.sha256(root.encode("utf-8")).hexdigest() == want:
            return Project(cwd=root)
    return None


def _message(msg: Any, path: Path, where: str, key: str, seen: set[str], tool_lines: str) -> list[Event]:
    if not isinstance(msg, dict):
        raise InputError(f"a message should be an object, got {type(msg).__name__}", path=str(path), where=where)
    mid, kind = msg.get("id"), msg.get("type")
    if not isinstance(mid, str) or not isinstance(kind, str):
        raise InputError("a message needs a string 'id' and 'type'", path=str(path), where=where)
    if kind not in ("user", "gemini"):
        return [Skip(f"{kind} message")]
    out: list[Event] = []
    if mid not in seen:
        seen.add(mid)
        out.extend(_said(msg, path, where, key, mid, kind))
    calls = msg.get("toolCalls") if kind == "gemini" else None
    for call in calls if isinstance(calls, list) else []:
        cid = call.get("id") if isinstance(call, dict) else None
        if not isinstance(cid, str) or cid in seen:
            continue
        seen.add(cid)
        line = tool_line(str(call.get("name") or ""), call.get("args")) if tool_lines == "compact" else None
        if line is None:
            out.append(Skip("tool call"))
            continue
        ts = timestamp(call.get("timestamp") or msg.get("timestamp"), path, f"{where}.toolCalls.timestamp")
        out.append(Said(key, "assistant", "assistant", line, ts, cid, step=False))
    if kind == "gemini" and msg.get("thoughts"):
        out.append(Skip("thinking"))
    return out or [Skip("repeated message")]


def _said(msg: dict[str, Any], path: Path, where: str, key: str, mid: str, kind: str) -> list[Event]:
    content = msg.get("displayContent") if kind == "user" and msg.get("displayContent") else msg.get("content")
    parts = content if isinstance(content, list) else [content] if isinstance(content, dict) else content
    if isinstance(parts, list):
        parts = [p for p in parts if not (isinstance(p, dict) and p.get("thought") is True)]
        parts = [{"type": "text", "text": p["text"]} if isinstance(p, dict) and "text" in p else p for p in parts]
    text = text_of(parts)
    if kind == "user" and "<hook_context>" in text:
        text = _HOOK_CONTEXT.sub("", text).strip()
        if not text:
            return [Skip("injected context")]
    if not text:
        return [Skip("tool result" if kind == "user" else "empty message")]
    if kind == "user" and text.startswith(IGNORED_PROMPTS):
        return [Skip("command or injected context")]
    ts = timestamp(msg.get("timestamp"), path, f"{where}.timestamp")
    role = "user" if kind == "user" else "assistant"
    return [Said(key, role, role, text, ts, mid, step=False)]
