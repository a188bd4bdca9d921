"""Lookups the LongMemEval benchmarks need that the read path does not: turns by their
native (source) id. Read-only; the bench layer speaks no SQL itself."""

from __future__ import annotations

from collections.abc import Iterable

from localmem.storage.engine.db import Conn
from localmem.storage.engine.inlist import rows_in


def turns_by_source_id(conn: Conn, source_ids: Iterable[str]) -> dict[str, list[int]]:
    """Turn ids per native turn id (a native id two sessions share names both turns)."""
    out: dict[str, list[int]] = {}
    for sid, tid in rows_in(
        conn, "SELECT source_id, id FROM turns WHERE source_id IN ({marks}) ORDER BY id", source_ids
    ):
        out.setdefault(str(sid), []).append(int(tid))
    return out
