"""OpenAI-style messages: ``{"messages": [{"role", "content"}, ...]}`` per line (JSONL)
or per file, a JSON array of such objects, or a bare JSON array of messages.

Fields relied on: ``role`` and ``content`` (a string, or a list of parts: ``text`` /
``input_text`` / ``output_text`` parts give their ``text``; other parts such as
``image_url`` become placeholders like ``[image_url]``); optional ``name`` (the
speaker), ``timestamp`` / ``created_at`` on a message or the conversation, and ``id`` /
``conversation_id`` / ``session`` on the conversation (its session key; otherwise
``conv-<hash>`` of its first message and its time, so a conversation keeps its key in a
copied, renamed or re-exported file, and when it grows). ``system`` / ``developer`` and
``tool`` / ``function`` messages and assistant messages that only call tools are skipped
(counted by reason). Source = ``messages``; native turn id = ``<session key>:<message
index>``. Two conversations without ids that open with the same message at the same
time (or both untimed) share a session.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest._json import Cursor, read_json, records
from localmem.ingest._units import Unit, bad, conversation_unit, timestamp
from localmem.records import SessionIn, TurnIn

SOURCE = "messages"
SKIP_ROLES = {
    "system": "system message",
    "developer": "system message",
    "tool": "tool message",
    "function": "tool message",
}
TEXT_PARTS = {"text", "input_text", "output_text"}


def units(path: Path, start: Cursor | None = None) -> Iterator[Unit]:
    start = start or Cursor()
    first = True
    for rec in records(path, start):
        if first and rec.index == 0 and rec.where.startswith("$[") and _is_message(rec.value):
            # A bare array of messages: the whole file is one conversation.
            yield _bare(path)
            return
        first = False
        yield conversation_unit(rec, path, conversation)


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and "role" in value and "messages" not in value


def _bare(path: Path) -> Unit:
    # Resuming means reading it again from the start (stored turns are recognised).
    data = read_json(path)
    skipped: Counter[str] = Counter()
    try:
        session = conversation({"messages": data}, path, "$", skipped)
    except InputError as exc:
        return bad(0, "$", Cursor(), exc)
    return Unit(0, "$", (session,) if session.turns else (), Cursor(), skipped)


def conversation(conv: Any, path: Path, where: str, skipped: Counter[str]) -> SessionIn:
    if not isinstance(conv, dict):
        raise InputError(f"expected an object with 'messages', got {type(conv).__name__}", path=str(path), where=where)
    messages = conv.get("messages")
    if not isinstance(messages, list):
        raise InputError("missing list field 'messages'", path=str(path), where=where)
    conv_ts = timestamp(conv.get("timestamp", conv.get("created_at")), path, f"{where}.timestamp")
    named = next((conv[k] for k in ("id", "conversation_id", "session") if isinstance(conv.get(k), str | int)), None)
    key = str(named) if named is not None else _content_key(messages, conv_ts)
    turns = []
    for mi, msg in enumerate(messages):
        mwhere = f"{where}.messages[{mi}]"
        turn = _message(msg, path, mwhere, f"{key}:{mi}", skipped)
        if turn is not None:
            turns.append(turn)
    return SessionIn(key=key, turns=tuple(turns), started_at=conv_ts, source=SOURCE)


def _content_key(messages: list[Any], ts: str | None) -> str:
    first = json.dumps(messages[:1], sort_keys=True, ensure_ascii=False, default=str)
    return "conv-" + hashlib.sha256(f"{ts or ''}\x00{first}".encode("utf-8", "replace")).hexdigest()[:12]


def _message(msg: Any, path: Path, where: str, native: str, skipped: Counter[str]) -> TurnIn | None:
    if not isinstance(msg, dict):
        raise InputError(f"a message should be an object, got {type(msg).__name__}", path=str(path), where=where)
    role = msg.get("role")
    if not isinstance(role, str) or not role:
        raise InputError("message without a string 'role'", path=str(path), where=where)
    if role in SKIP_ROLES:
        skipped[SKIP_ROLES[role]] += 1
        return None
    content = msg.get("content")
    if content is None and msg.get("tool_calls"):
        skipped["tool call"] += 1
        return None
    text = _content(content, path, f"{where}.content")
    if not text:
        skipped["empty message"] += 1
        return None
    name = msg.get("name")
    ts = timestamp(msg.get("timestamp", msg.get("created_at")), path, f"{where}.timestamp")
    return TurnIn(
        text=text,
        speaker=name if isinstance(name, str) and name.strip() else role,
        role=role,
        timestamp=ts,
        source_id=native,
    )


def _content(content: Any, path: Path, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        raise InputError(
            f"'content' should be a string or a list of parts, got {type(content).__name__}",
            path=str(path),
            where=where,
        )
    pieces = []
    for part in content:
        if isinstance(part, str):
            pieces.append(part.strip())
        elif isinstance(part, dict):
            kind = part.get("type") if isinstance(part.get("type"), str) else None
            if kind in TEXT_PARTS and isinstance(part.get("text"), str):
                pieces.append(str(part["text"]).strip())
            elif isinstance(kind, str):
                pieces.append(f"[{kind}]")
    return "\n".join(p for p in pieces if p).strip()
