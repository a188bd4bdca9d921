"""Tell a file's format from its first record (JSON) or its first lines (text).

JSON: the first element of a top-level array, the first line of a JSON Lines file, or
the one object of the file is looked at: ``localmem`` -> localmem (a ``localmem export``),
``mapping`` -> chatgpt, ``chat_messages`` -> claude, ``conversation`` -> locomo,
``haystack_sessions`` -> longmemeval, ``messages`` (or an array of ``{role, content}``)
-> messages, any other JSON Lines -> jsonl. Coding agents' logs are told first:
``sessionId`` + ``projectHash`` -> gemini (a chat object or its JSON Lines header), a
``session_meta`` line or a bare ``{id, timestamp, instructions}`` header -> codex, a
Claude Code record type with ``sessionId`` / ``uuid`` / ``leafUuid`` -> claude-code, a VS
Code chat session (``sessionId`` + ``requests`` + ``creationDate``) or the first line of its
log (``{"kind": 0, "v": <that session>}``) -> vscode, a ``session.start`` event with a
``sessionId`` -> copilot, a JSON Lines ``{"role", "message": {…}}`` line -> cursor. Text:
``# aider chat started at …`` as the first line -> aider, a ``Name: text`` line among the
first 64 KiB -> transcript. Anything else is refused with a hint to pass ``--format``.
"""

from __future__ import annotations

from pathlib import Path

from localmem.errors import InputError
from localmem.ingest import transcript
from localmem.ingest._json import records, shape

FORMAT_NAMES = (
    "chatgpt",
    "claude",
    "messages",
    "transcript",
    "jsonl",
    "locomo",
    "longmemeval",
    "localmem",
    "claude-code",
    "codex",
    "gemini",
    "vscode",
    "copilot",
    "cursor",
    "aider",
)
# Claude Code's record types, and the keys its records carry besides ``type``.
CLAUDE_CODE_TYPES = frozenset(
    {"user", "assistant", "system", "summary", "file-history-snapshot", "queue-operation", "attachment", "progress"}
)
CLAUDE_CODE_KEYS = frozenset({"sessionId", "parentUuid", "leafUuid", "messageId", "uuid"})
CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
AIDER_START = "# aider chat started at "


def detect(path: Path) -> str:
    try:
        with path.open("rb") as fh:
            head = fh.read(65536)
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if not text:
        raise InputError("file is empty", path=str(path))
    if text[0] in "[{":
        return _json_format(path)
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the 64 KiB mark
            raise InputError("not a UTF-8 text or JSON file", path=str(path)) from exc
    if text.startswith(AIDER_START):
        return "aider"
    if any(transcript._SPEAKER.match(line) for line in text.splitlines()):
        return "transcript"
    raise _unknown(path)


def _json_format(path: Path) -> str:
    kind = shape(path)
    first = next(iter(records(path)), None)
    if first is None:
        raise InputError("an empty JSON list: nothing to ingest", path=str(path))
    if first.error is not None:
        raise first.error
    value = first.value
    keys = set(value) if isinstance(value, dict) else set()
    if agent := _agent_format(value, keys, kind):
        return agent
    for key, name in (
        ("localmem", "localmem"),  # a `localmem export` line
        ("mapping", "chatgpt"),
        ("chat_messages", "claude"),
        ("haystack_sessions", "longmemeval"),
        ("conversation", "locomo"),
        ("messages", "messages"),
    ):
        if key in keys:
            return name
    if kind == "array" and {"role", "content"} <= keys:
        return "messages"
    if kind == "lines":
        return "jsonl"
    raise _unknown(path)


def _agent_format(value: object, keys: set[str], kind: str) -> str | None:
    """A coding agent's log, told by its first record: a Gemini CLI chat (``sessionId`` +
    ``projectHash``), a VS Code chat session or its log, a Copilot CLI ``session.start``, a
    Cursor transcript line, a Codex rollout (``session_meta`` line or the older bare header), a
    Claude Code transcript (one of its record types with its keys)."""
    if not isinstance(value, dict):
        return None
    if {"sessionId", "projectHash"} <= keys:
        return "gemini"
    session = value.get("v") if keys == {"kind", "v"} and value.get("kind") == 0 else value
    if isinstance(session, dict) and {"sessionId", "requests", "creationDate"} <= set(session):
        return "vscode"
    if kind != "lines":
        return None
    kind_of = value.get("type")
    if kind_of == "session.start" and isinstance(value.get("data"), dict) and "sessionId" in value["data"]:
        return "copilot"
    if keys == {"role", "message"} and isinstance(value["message"], dict):
        return "cursor"
    if kind_of in CODEX_TYPES and "payload" in keys:
        return "codex"
    if {"id", "timestamp"} <= keys and "type" not in keys and keys <= {"id", "timestamp", "instructions", "git"}:
        return "codex"
    if kind_of in CLAUDE_CODE_TYPES and keys & CLAUDE_CODE_KEYS:
        return "claude-code"
    return None


def _unknown(path: Path) -> InputError:
    return InputError("cannot tell the format; pass --format (one of: " + ", ".join(FORMAT_NAMES) + ")", path=str(path))
