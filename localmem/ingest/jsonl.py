"""Generic JSONL: one turn per line, ``{session, speaker|role, text|content, timestamp}``.

``session`` defaults to "default"; ``speaker`` defaults to ``role``; ``timestamp`` is
ISO-8601 (or any format ``localmem.text.parse_time`` accepts, or epoch seconds);
``id`` (optional) is kept as the native turn id. Lines keep their file order within a
session. Blank lines are skipped. Source = ``jsonl:<file name>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from localmem.errors import InputError
from localmem.records import SessionIn, TurnIn
from localmem.text import parse_time


def parse(path: Path) -> Iterator[SessionIn]:
    sessions: dict[str, list[TurnIn]] = {}
    try:
        fh = path.open("r", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    with fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"line {n}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"invalid JSON: {exc.msg}", path=str(path), where=f"{where} column {exc.colno}"
                ) from exc
            except UnicodeDecodeError as exc:
                raise InputError(f"not UTF-8: {exc}", path=str(path), where=where) from exc
            if not isinstance(obj, dict):
                raise InputError("expected a JSON object", path=str(path), where=where)
            text = obj.get("text", obj.get("content"))
            if not isinstance(text, str) or not text.strip():
                raise InputError("missing or empty 'text' (or 'content')", path=str(path), where=where)
            role = obj.get("role") or "user"
            speaker = obj.get("speaker") or role
            if not isinstance(role, str) or not isinstance(speaker, str):
                raise InputError("'speaker' and 'role' must be strings", path=str(path), where=where)
            ts = obj.get("timestamp")
            if ts is not None:
                try:
                    ts = parse_time(ts)
                except ValueError as exc:
                    raise InputError(str(exc), path=str(path), where=f"{where}.timestamp") from exc
            native = obj.get("id")
            session = str(obj.get("session") or "default")
            sessions.setdefault(session, []).append(
                TurnIn(
                    text=text.strip(),
                    speaker=speaker,
                    role=role,
                    timestamp=ts,
                    source_id=None if native is None else str(native),
                )
            )
    for key, turns in sessions.items():
        yield SessionIn(key=key, turns=tuple(turns), source=f"jsonl:{path.name}")
