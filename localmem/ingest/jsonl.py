"""Generic JSONL: one turn per line, ``{session, speaker|role, text|content, timestamp}``.

``session`` defaults to "default"; ``speaker`` defaults to ``role``; ``timestamp`` is
ISO-8601 (or any format ``localmem.util.text.parse_time`` accepts, or epoch seconds);
``id`` (optional) is kept as the native turn id. Lines keep their file order within a
session. Blank lines are skipped. Source = ``jsonl:<hash of the first line>``: the log's
content, not its file name, so a copied or renamed log writes nothing new. One unit per
line, so a log that grows by appended lines is read on from where the last ingest
stopped. A line longer than ``TURN_RECORD_BYTES`` is refused without being read whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest._json import Cursor, first_line_id, records
from localmem.ingest._units import TURN_RECORD_BYTES, Unit, bad, timestamp
from localmem.records import SessionIn, TurnIn


def units(path: Path, start: Cursor | None = None) -> Iterator[Unit]:
    source = f"jsonl:{first_line_id(path)}"
    for rec in records(path, start, TURN_RECORD_BYTES):
        if rec.error is not None:
            yield bad(rec.index, rec.where, rec.after, rec.error)
            continue
        try:
            session = _line(rec.value, path, rec.where, source)
        except InputError as exc:
            yield bad(rec.index, rec.where, rec.after, exc)
            continue
        yield Unit(rec.index, rec.where, (session,), rec.after)


def _line(obj: Any, path: Path, where: str, source: str) -> SessionIn:
    if not isinstance(obj, dict):
        raise InputError("expected a JSON object", path=str(path), where=where)
    text = obj.get("text", obj.get("content"))
    if not isinstance(text, str) or not text.strip():
        raise InputError("missing or empty 'text' (or 'content')", path=str(path), where=where)
    role = obj.get("role") or "user"
    speaker = obj.get("speaker") or role
    if not isinstance(role, str) or not isinstance(speaker, str):
        raise InputError("'speaker' and 'role' must be strings", path=str(path), where=where)
    ts = timestamp(obj.get("timestamp"), path, f"{where}.timestamp")
    native = obj.get("id")
    key = obj.get("session")
    if key is not None and not isinstance(key, str | int):
        raise InputError("'session' must be a string or a number", path=str(path), where=f"{where}.session")
    turn = TurnIn(
        text=text.strip(),
        speaker=speaker,
        role=role,
        timestamp=ts,
        source_id=None if native is None else str(native),
    )
    return SessionIn(key=str(key or "default"), turns=(turn,), source=source)
