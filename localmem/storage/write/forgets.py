"""The forget set: the content hashes of every turn forgotten here or on another device
(table ``forgotten``, migration 0012), and the write path's check against it.

Invariants: a hash, once in the set, stays (forget wins over any later write of the same
content, from any file or device); every function runs inside the caller's transaction
(or reads), never opens one.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Protocol, TypeVar

from localmem.storage.engine.db import Conn
from localmem.storage.engine.inlist import rows_in


class _Hashed(Protocol):
    hash: str


S = TypeVar("S")
P = TypeVar("P", bound=_Hashed)


def forgotten_among(conn: Conn, hashes: Iterable[str]) -> set[str]:
    return {str(r[0]) for r in rows_in(conn, "SELECT hash FROM forgotten WHERE hash IN ({marks})", hashes)}


def drop_forgotten(conn: Conn, staged: list[tuple[S, list[P]]]) -> list[tuple[S, list[P]]]:
    """The write path's check: each session's prepared turns without those whose hash is
    in the forget set, so a forgotten turn stays forgotten whatever brings it again."""
    gone = forgotten_among(conn, [p.hash for _, ps in staged for p in ps])
    return staged if not gone else [(s, [p for p in ps if p.hash not in gone]) for s, ps in staged]


def mark_forgotten(conn: Conn, hashes: Iterable[str]) -> None:
    now = time.time()
    conn.executemany("INSERT OR IGNORE INTO forgotten(hash, at) VALUES (?, ?)", [(h, now) for h in hashes])


def forget_set(conn: Conn) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT hash FROM forgotten")}
