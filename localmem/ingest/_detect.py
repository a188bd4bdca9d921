"""Tell a file's format from its first record (JSON) or its first lines (text).

JSON: the first element of a top-level array, the first line of a JSON Lines file, or
the one object of the file is looked at: ``localmem`` -> localmem (a ``localmem export``),
``mapping`` -> chatgpt, ``chat_messages`` -> claude, ``conversation`` -> locomo,
``haystack_sessions`` -> longmemeval, ``messages`` (or an array of ``{role, content}``)
-> messages, any other JSON Lines -> jsonl. Text:
a ``Name: text`` line among the first 64 KiB -> transcript. Anything else is refused
with a hint to pass ``--format``.
"""

from __future__ import annotations

from pathlib import Path

from localmem.errors import InputError
from localmem.ingest import transcript
from localmem.ingest._json import records, shape

FORMAT_NAMES = ("chatgpt", "claude", "messages", "transcript", "jsonl", "locomo", "longmemeval", "localmem")


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


def _unknown(path: Path) -> InputError:
    return InputError("cannot tell the format; pass --format (one of: " + ", ".join(FORMAT_NAMES) + ")", path=str(path))
