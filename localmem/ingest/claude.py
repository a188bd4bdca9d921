"""Claude.ai data export (``conversations.json``) -> one session per conversation.

Fields relied on, per conversation: ``uuid``, ``name`` (the title), ``created_at``
(ISO 8601) and ``chat_messages``; per message: ``uuid``, ``sender`` (``human`` is
stored as role ``user``, ``assistant`` as ``assistant``), ``created_at``, and the text:
the ``text`` blocks of ``content`` when there are any, else ``text``. Thinking, tool-use
and tool-result blocks are left out; ``attachments[].file_name`` and
``files[].file_name`` are kept as ``[attachment: name]`` / ``[file: name]``
placeholders. Messages that end up empty are skipped (counted). Source = ``claude``;
session key = conversation uuid; native turn id = message uuid. The file may be the
whole export (a JSON array, streamed) or one conversation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest._json import Cursor, field, records
from localmem.ingest._units import Unit, conversation_unit, timestamp
from localmem.records import SessionIn, TurnIn

SOURCE = "claude"
ROLE = {"human": "user", "user": "user", "assistant": "assistant"}
PLACEHOLDERS = {"image": "[image]", "document": "[document]"}
LEFT_OUT_BLOCKS = {"thinking", "redacted_thinking", "tool_use", "tool_result", "server_tool_use"}


def units(path: Path, start: Cursor | None = None) -> Iterator[Unit]:
    for rec in records(path, start):
        yield conversation_unit(rec, path, conversation)


def conversation(conv: Any, path: Path, where: str, skipped: Counter[str]) -> SessionIn:
    if not isinstance(conv, dict):
        raise InputError(f"expected a conversation object, got {type(conv).__name__}", path=str(path), where=where)
    cid = field(conv, "uuid", str, path, where)
    messages = field(conv, "chat_messages", list, path, where)
    title = conv.get("name") if isinstance(conv.get("name"), str) else ""
    started = timestamp(conv.get("created_at"), path, f"{where}.created_at")
    turns = []
    for mi, msg in enumerate(messages):
        turn = _message(msg, path, f"{where}.chat_messages[{mi}]", skipped)
        if turn is not None:
            turns.append(turn)
    return SessionIn(key=cid, turns=tuple(turns), started_at=started, source=SOURCE, title=title or "")


def _message(msg: Any, path: Path, where: str, skipped: Counter[str]) -> TurnIn | None:
    if not isinstance(msg, dict):
        raise InputError(f"a message should be an object, got {type(msg).__name__}", path=str(path), where=where)
    sender = field(msg, "sender", str, path, where)
    role = ROLE.get(sender)
    if role is None:
        skipped[f"{sender} message"] += 1
        return None
    pieces = _blocks(msg.get("content"))
    if not pieces and isinstance(msg.get("text"), str):
        pieces = [msg["text"].strip()]
    for key, label in (("attachments", "attachment"), ("files", "file")):
        items = msg.get(key)
        if isinstance(items, list):
            for item in items:
                name = item.get("file_name") if isinstance(item, dict) else None
                if isinstance(name, str) and name.strip():
                    pieces.append(f"[{label}: {name.strip()}]")
    text = "\n\n".join(p for p in pieces if p).strip()
    if not text:
        skipped["empty message"] += 1
        return None
    native = msg.get("uuid")
    return TurnIn(
        text=text,
        speaker=role,
        role=role,
        timestamp=timestamp(msg.get("created_at"), path, f"{where}.created_at"),
        source_id=native if isinstance(native, str) and native else None,
    )


def _blocks(content: Any) -> list[str]:
    if not isinstance(content, list):
        return []
    out = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type") if isinstance(block.get("type"), str) else None
        if kind in LEFT_OUT_BLOCKS:
            continue
        if isinstance(block.get("text"), str):
            out.append(str(block["text"]).strip())
        elif isinstance(kind, str):
            out.append(PLACEHOLDERS.get(kind, f"[{kind}]"))
    return out
