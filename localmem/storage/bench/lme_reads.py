"""Lookups the LongMemEval benchmarks need that the read path does not: turns by their
native (source) id. Read-only; the bench layer speaks no SQL itself."""

from __future__ import annotations

from collections.abc import Iterable

from localmem.storage.engine.db import Conn


def turns_by_source_id(conn: Conn, source_ids: Iterable[str]) -> dict[str, list[int]]:
    """Turn ids per native turn id (a native id two sessions share names both turns)."""
    wanted = list(dict.fromkeys(source_ids))
    out: dict[str, list[int]] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for sid, tid in conn.execute(
            f"SELECT source_id, id FROM turns WHERE source_id IN ({marks}) ORDER BY id", chunk
        ):
            out.setdefault(str(sid), []).append(int(tid))
    return out
