"""Chat-log parsers: one module per format, each turning a file into ``SessionIn``s.

``load(path, fmt)`` parses the whole file before anything is written, so a malformed
file stores nothing; errors are ``InputError`` naming the file and the JSON path or
line. ``detect(path)`` picks the format from the file's shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from localmem.errors import InputError
from localmem.ingest import jsonl, locomo, longmemeval
from localmem.records import SessionIn

Parser = Callable[..., Iterator[SessionIn]]

FORMATS: dict[str, Parser] = {
    "locomo": locomo.parse,
    "longmemeval": longmemeval.parse,
    "jsonl": jsonl.parse,
}


def detect(path: Path) -> str:
    """Guess the format from the first bytes and, for JSON, the first record's keys."""
    try:
        with path.open("rb") as fh:
            head = fh.read(65536).decode("utf-8", errors="replace").lstrip()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    if not head:
        raise InputError("file is empty", path=str(path))
    if head.startswith("["):
        try:
            data = json.loads(path.read_text("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"not valid JSON: {exc}", path=str(path)) from exc
        first = data[0] if isinstance(data, list) and data else {}
        if isinstance(first, dict) and "conversation" in first:
            return "locomo"
        if isinstance(first, dict) and "haystack_sessions" in first:
            return "longmemeval"
    if head.startswith("{"):
        return "jsonl"
    raise InputError("cannot tell the format; pass --format (one of: " + ", ".join(FORMATS) + ")", path=str(path))


def load(path: Path, fmt: str | None = None, **options: object) -> list[SessionIn]:
    name = fmt or detect(path)
    if name not in FORMATS:
        raise InputError(f"unknown format {name!r}; known: {', '.join(FORMATS)}", path=str(path))
    return list(FORMATS[name](path, **options))
