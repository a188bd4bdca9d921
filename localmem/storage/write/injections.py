"""The ``injected`` table (migration 0013): head lines of the contexts hooks put into an
agent's context, by hash (``localmem.util.injected``), so the write path recognises them
when the agent's transcript comes back. Local bookkeeping: not journaled, never synced.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from localmem.storage.engine import db
from localmem.storage.engine.db import Conn
from localmem.storage.engine.inlist import rows_in


def record(conn: Conn, lines: Sequence[tuple[str, int | None]]) -> None:
    """Remember the (hash, turn id) of each head line injected, in one short transaction."""
    if not lines:
        return
    now = time.time()
    with db.transaction(conn):
        conn.executemany(
            "INSERT INTO injected(hash, turn_id, at) VALUES (?, ?, ?) ON CONFLICT(hash) DO UPDATE SET at = excluded.at",
            [(h, turn if turn is not None else 0, now) for h, turn in lines],
        )


def known(conn: Conn, hashes: Sequence[str]) -> frozenset[str]:
    """The hashes among ``hashes`` that were injected."""
    if not hashes:
        return frozenset()
    return frozenset(str(r[0]) for r in rows_in(conn, "SELECT hash FROM injected WHERE hash IN ({marks})", hashes))


def count(conn: Conn) -> tuple[int, int]:
    """(head lines recorded, distinct turns they quoted)."""
    row = conn.one("SELECT count(*), count(DISTINCT nullif(turn_id, 0)) FROM injected")
    return int(row[0]), int(row[1])
