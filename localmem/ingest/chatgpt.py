"""ChatGPT data export (``conversations.json``) -> one session per conversation.

Fields relied on, per conversation: ``conversation_id`` (or ``id``), ``title``,
``create_time`` (epoch seconds), ``current_node`` and ``mapping`` (node id ->
``{message, parent, children}``). The conversation shown in the app is the branch from
``current_node`` up its ``parent`` links to the root; other branches (regenerated or
edited replies) are left out. Per message: ``id``, ``author.role``, ``create_time``,
``content.content_type`` with ``parts`` (strings, or objects such as
``image_asset_pointer``, kept as placeholders like ``[image]``) or ``text``,
``recipient``, ``metadata.is_visually_hidden_from_conversation`` and
``metadata.attachments[].name``.

Left out, counted by reason: system and tool messages, hidden messages, assistant
messages addressed to a tool (``recipient`` other than ``all``), reasoning and
context content types, empty messages, and messages off the current branch.
Source = ``chatgpt``; session key = conversation id; native turn id = message id.
The file may be the whole export (a JSON array, streamed) or one conversation.
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

SOURCE = "chatgpt"
ROLES = {"user", "assistant"}
HIDDEN_CONTENT = {
    "thoughts",
    "reasoning_recap",
    "user_editable_context",
    "model_editable_context",
    "system_error",
    "tether_browsing_display",
}
PLACEHOLDERS = {
    "image_asset_pointer": "[image]",
    "audio_asset_pointer": "[audio]",
    "video_container_asset_pointer": "[video]",
    "real_time_user_audio_video_asset_pointer": "[audio/video]",
}


def units(path: Path, start: Cursor | None = None) -> Iterator[Unit]:
    for rec in records(path, start):
        yield conversation_unit(rec, path, conversation)


def conversation(conv: Any, path: Path, where: str, skipped: Counter[str]) -> SessionIn:
    if not isinstance(conv, dict):
        raise InputError(f"expected a conversation object, got {type(conv).__name__}", path=str(path), where=where)
    cid = conv.get("conversation_id") or conv.get("id")
    if not isinstance(cid, str) or not cid:
        raise InputError("missing conversation id ('conversation_id' or 'id')", path=str(path), where=where)
    mapping = field(conv, "mapping", dict, path, where)
    title = conv.get("title") if isinstance(conv.get("title"), str) else ""
    started = timestamp(conv.get("create_time"), path, f"{where}.create_time")
    branch = _branch(conv, mapping, path, where)
    off_branch = sum(1 for node in mapping.values() if isinstance(node, dict) and node.get("message")) - sum(
        1 for nid in branch if mapping[nid].get("message")
    )
    if off_branch > 0:
        skipped["not on the current branch"] += off_branch
    turns = []
    for nid in branch:
        mwhere = f"{where}.mapping.{nid}.message"
        msg = mapping[nid].get("message")
        if msg is None:
            continue
        turn = _message(msg, nid, path, mwhere, skipped)
        if turn is not None:
            turns.append(turn)
    return SessionIn(key=cid, turns=tuple(turns), started_at=started, source=SOURCE, title=title or "")


def _branch(conv: dict[str, Any], mapping: dict[str, Any], path: Path, where: str) -> list[str]:
    """Node ids from the root to ``current_node`` (or, lacking one, to the last leaf)."""
    current = conv.get("current_node")
    if current is None:
        current = _last_leaf(mapping)
        if current is None:
            return []
    if not isinstance(current, str) or current not in mapping:
        raise InputError(
            f"current_node {current!r} is not in the mapping", path=str(path), where=f"{where}.current_node"
        )
    chain: list[str] = []
    seen: set[str] = set()
    node_id: Any = current
    while isinstance(node_id, str) and node_id in mapping:
        if node_id in seen:
            raise InputError(f"the mapping has a cycle at node {node_id!r}", path=str(path), where=f"{where}.mapping")
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise InputError("a mapping node should be an object", path=str(path), where=f"{where}.mapping.{node_id}")
        chain.append(node_id)
        node_id = node.get("parent")
    chain.reverse()
    return chain


def _last_leaf(mapping: dict[str, Any]) -> str | None:
    leaves = [nid for nid, node in mapping.items() if isinstance(node, dict) and not node.get("children")]
    return leaves[-1] if leaves else None


def _message(msg: Any, nid: str, path: Path, where: str, skipped: Counter[str]) -> TurnIn | None:
    if not isinstance(msg, dict):
        raise InputError(f"a message should be an object, got {type(msg).__name__}", path=str(path), where=where)
    author = msg.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    if not isinstance(role, str):
        raise InputError("message without author.role", path=str(path), where=f"{where}.author")
    meta = msg.get("metadata")
    metadata: dict[str, Any] = meta if isinstance(meta, dict) else {}
    content = msg.get("content")
    ctype = content.get("content_type") if isinstance(content, dict) else None
    ctype = ctype if isinstance(ctype, str) else None
    if role not in ROLES:
        skipped[f"{role} message"] += 1
        return None
    if metadata.get("is_visually_hidden_from_conversation"):
        skipped["hidden message"] += 1
        return None
    if role == "assistant" and msg.get("recipient") not in (None, "all"):
        skipped["tool call"] += 1
        return None
    if ctype in HIDDEN_CONTENT:
        skipped[f"{ctype} content"] += 1
        return None
    text = _content_text(content)
    attachments = metadata.get("attachments")
    if isinstance(attachments, list):
        names = [a.get("name") for a in attachments if isinstance(a, dict)]
        text = "\n".join([text, *(f"[attachment: {n}]" for n in names if isinstance(n, str) and n.strip())]).strip()
    if not text:
        skipped["empty message"] += 1
        return None
    native = msg.get("id") if isinstance(msg.get("id"), str) and msg.get("id") else nid
    return TurnIn(
        text=text,
        speaker=role,
        role=role,
        timestamp=timestamp(msg.get("create_time"), path, f"{where}.create_time"),
        source_id=native,
    )


def _content_text(content: Any) -> str:
    if not isinstance(content, dict):
        return ""
    parts = content.get("parts")
    if isinstance(parts, list):
        pieces = [_part(p) for p in parts]
        return "\n".join(p for p in pieces if p).strip()
    text = content.get("text")
    return text.strip() if isinstance(text, str) else ""


def _part(part: Any) -> str:
    if isinstance(part, str):
        return part.strip()
    if isinstance(part, dict):
        if isinstance(part.get("text"), str):
            return str(part["text"]).strip()
        kind = part.get("content_type")
        if isinstance(kind, str):
            return PLACEHOLDERS.get(kind, f"[{kind}]")
        return "[attachment]"
    return ""
