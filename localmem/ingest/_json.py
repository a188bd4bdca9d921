"""Shared JSON-reading helpers for parsers: load with located errors, typed field access."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from localmem.errors import InputError


def read_json(path: Path) -> Any:
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"invalid JSON: {exc.msg}", path=str(path), where=f"line {exc.lineno} column {exc.colno}"
        ) from exc


def field(obj: Any, key: str, kind: type | tuple[type, ...], path: Path, where: str, *, required: bool = True) -> Any:
    """obj[key], checked to be of ``kind``; errors name the JSON path."""
    if not isinstance(obj, dict):
        raise InputError(f"expected an object, got {type(obj).__name__}", path=str(path), where=where)
    if key not in obj or obj[key] is None:
        if required:
            raise InputError(f"missing field {key!r}", path=str(path), where=where)
        return None
    value = obj[key]
    if not isinstance(value, kind) or (
        isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))
    ):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InputError(
            f"field {key!r} should be {names}, got {type(value).__name__}", path=str(path), where=f"{where}.{key}"
        )
    return value
