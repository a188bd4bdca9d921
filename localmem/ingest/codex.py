"""Codex CLI rollouts: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``.

One JSON record per line, in one of two shapes.
- Current: ``{"timestamp", "type", "payload"}``. The first line is ``session_meta``
  (``id``, ``timestamp``, ``cwd``, ``originator``, ``cli_version``, ``instructions``,
  ``git`` {``commit_hash``, ``branch``, ``repository_url``}); then ``response_item``
  (``message`` with ``role`` and ``input_text`` / ``output_text`` parts, ``reasoning``,
  ``function_call`` {name, arguments}, ``local_shell_call`` {action}, ``custom_tool_call``
  {name, input}, ``web_search_call`` {action}, and their outputs), ``event_msg``,
  ``turn_context`` and ``compacted``.
- Older: a bare header ``{"id", "timestamp", "instructions"}`` as the first line, then
  bare items (``{"type": "message", "role", "content"}``, ``function_call``, …) and
  ``{"record_type": "state"}`` lines.

Every sentence is taken once: from the ``response_item`` messages. The ``event_msg``
``user_message`` / ``agent_message`` events repeat them for the UI and are left out, as
are reasoning, tool outputs, ``developer`` / ``system`` messages, compaction summaries
and the context Codex injects as user messages (``<environment_context>``,
``<user_instructions>``, ``# AGENTS.md instructions for …``, ``<skill>``,
``<user_shell_command>``, ``<turn_aborted>``, ``<subagent_notification>``, …). Tool calls
are compact lines in the agent's turn (``ingest.tool_lines``). The session key is the
header's ``id`` (read from the first line on every read, so a resumed read knows it); a
turn's native id is its line number. Source = ``codex``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest._agent import Break, Event, Said, Session, Skip, Tool, group, text_of, tool_line
from localmem.ingest._json import WINDOW, Cursor, Record, loads, records
from localmem.ingest._units import Unit, timestamp
from localmem.records import Project

SOURCE = CLIENT = "codex"
ITEM_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
# User messages that open with one of these are context Codex injected, not typed.
INJECTED = (
    "<environment_context",
    "<user_instructions",
    "# agents.md instructions for",
    "<instructions>",
    "<skill",
    "<user_shell_command",
    "<turn_aborted",
    "<subagent_notification",
    "<subagents",
    "<collaboration_mode",
    "<permissions instructions",
    "<hook_prompt",
    "<session_context",
)
_TOOL_CALLS = {"function_call", "local_shell_call", "custom_tool_call", "web_search_call", "tool_search_call"}
_TOOL_OUTPUTS = {"function_call_output", "custom_tool_call_output", "tool_search_output", "image_generation_call"}


def units(path: Path, start: Cursor | None = None, tool_lines: str = "compact", hold: bool = False) -> Iterator[Unit]:
    start = start or Cursor()
    key, info = header(path)

    def events(rec: Record) -> list[Event]:
        return line_events(rec.value, path, rec.where, key, rec.index + 1, tool_lines)

    yield from group(records(path, start), events, lambda _key: info, start, hold=hold)


def header(path: Path) -> tuple[str, Session]:
    """The session key and what the first line says of the session."""
    try:
        with path.open("rb") as fh:
            first = fh.readline(WINDOW * 16)
        obj = loads(first.decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot read the session header: {exc}", path=str(path), where="line 1") from exc
    meta = obj.get("payload") if isinstance(obj, dict) and obj.get("type") == "session_meta" else obj
    if not isinstance(meta, dict) or not isinstance(meta.get("id"), str) or not meta["id"]:
        raise InputError("the first line is not a Codex session header (no session id)", path=str(path), where="line 1")
    git: dict[str, Any] = meta["git"] if isinstance(meta.get("git"), dict) else {}
    project = Project(
        cwd=_str(meta.get("cwd")),
        branch=_str(git.get("branch")),
        repository=_str(git.get("repository_url")),
        commit=_str(git.get("commit_hash")),
    )
    started = timestamp(meta.get("timestamp"), path, "line 1.timestamp")
    return meta["id"], Session(SOURCE, CLIENT, project if any(vars(project).values()) else None, started)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def line_events(obj: Any, path: Path, where: str, key: str, line: int, tool_lines: str) -> list[Event]:
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object", path=str(path), where=where)
    kind = obj.get("type")
    if kind in ITEM_TYPES:
        item = obj.get("payload")
        if kind == "compacted":
            return [Skip("compaction summary"), Break()]
        if kind != "response_item":
            sub = item.get("type") if isinstance(item, dict) else None
            return [Skip(f"{kind} {sub}" if kind == "event_msg" and isinstance(sub, str) else str(kind))]
    elif "record_type" in obj or (line == 1 and "id" in obj and "type" not in obj):
        return [Skip("state" if "record_type" in obj else "session_meta")]
    else:
        item = obj  # the older shape: the item itself
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        return [Skip("record without a type")]
    ts = timestamp(obj.get("timestamp"), path, f"{where}.timestamp")
    native = str(line)
    t = item["type"]
    if t == "message":
        return _message(item, key, ts, native)
    if t in _TOOL_CALLS:
        if tool_lines != "compact" or (text := _call(item)) is None:
            return [Skip("tool call")]
        return [Tool(key, text, ts, native)]
    if t in _TOOL_OUTPUTS:
        return [Skip("tool result")]
    if t in ("reasoning", "compaction", "compaction_summary", "context_compaction"):
        return [Skip("reasoning" if t == "reasoning" else "compaction summary")]
    return [Skip(f"{t} item")]


def _message(item: dict[str, Any], key: str, ts: str | None, native: str) -> list[Event]:
    role = item.get("role")
    if role not in ("user", "assistant"):
        return [Skip("system message")]
    parts = item.get("content")
    if isinstance(parts, list):
        parts = [p for p in parts if not (isinstance(p, dict) and _injected(p.get("text")))]
        if not parts:
            return [Skip("injected context")]
    text = text_of(parts, ("input_text", "output_text", "text"), {"input_image": "[image]"})
    if not text:
        return [Skip("empty message")]
    if role == "user" and _injected(text):
        return [Skip("injected context")]
    return [Said(key, role, role, text, ts, native)]


def _injected(text: Any) -> bool:
    return isinstance(text, str) and text.lstrip()[:40].lower().startswith(INJECTED)


def _call(item: dict[str, Any]) -> str | None:
    t = item["type"]
    action: dict[str, Any] = item["action"] if isinstance(item.get("action"), dict) else {}
    if t == "local_shell_call":
        return tool_line("local_shell", {"command": action.get("command")})
    if t == "web_search_call":
        if action.get("type") == "open_page":
            return tool_line("web_fetch", {"url": action.get("url")})
        return tool_line("web_search", {"query": action.get("query")})
    name = item.get("name")
    if not isinstance(name, str):
        return None
    return tool_line(name, item.get("arguments", item.get("input")))
