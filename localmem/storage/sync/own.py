"""The SQL of the segments this device wrote (``sync_own``, migration 0014) and of the
keys and forgets they were written under (``sync_device``'s key epoch, key check, forget
mark and legacy boundary); and the facts an export needs to leave forgotten content out
(which referenced turns are forgotten, which sessions still exist).

Invariants: every function runs inside the caller's transaction (or reads), never opens
one; nothing here touches a fact.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from localmem.storage.engine.db import Conn
from localmem.storage.engine.inlist import rows_in
from localmem.storage.sync.state import ChangeRow
from localmem.storage.write import forgets


@dataclass(frozen=True)
class OwnSegment:
    """A segment this device wrote: its number, the journal rows it holds, the stamp of
    the first, the key epoch and sealing it was written under, the digest of its rows."""

    number: int
    seq_lo: int
    seq_hi: int
    hlc_lo: int
    key_epoch: int
    sealed: str  # plain / age
    digest: str
    sha256: str
    name: str = ""  # the file's name, for sync_folded
    changes: int = 0
    size: int = 0


@dataclass(frozen=True)
class KeyState:
    key_epoch: int
    key_check: bytes | None
    forget_mark: int
    legacy_through: int


def key_state(conn: Conn) -> KeyState | None:
    row = conn.execute(
        "SELECT key_epoch, key_check, forget_mark, legacy_through FROM sync_device WHERE id = 1"
    ).fetchone()
    return (
        None
        if row is None
        else KeyState(int(row[0]), None if row[1] is None else bytes(row[1]), int(row[2]), int(row[3]))
    )


def set_key(conn: Conn, epoch: int, check: bytes) -> None:
    conn.execute("UPDATE sync_device SET key_epoch = ?, key_check = ? WHERE id = 1", (epoch, check))


def set_forget_mark(conn: Conn, mark: int) -> None:
    conn.execute("UPDATE sync_device SET forget_mark = max(forget_mark, ?) WHERE id = 1", (mark,))


def set_legacy_through(conn: Conn, n: int) -> None:
    conn.execute("UPDATE sync_device SET legacy_through = ? WHERE id = 1", (n,))


def forget_count(conn: Conn) -> int:
    return int(conn.one("SELECT count(*) FROM forgotten")[0])


def put_own(conn: Conn, s: OwnSegment) -> None:
    conn.execute(
        "INSERT INTO sync_own(segment, seq_lo, seq_hi, hlc_lo, key_epoch, sealed, digest, sha256, written) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(segment) DO UPDATE SET seq_lo = excluded.seq_lo, "
        "seq_hi = excluded.seq_hi, hlc_lo = excluded.hlc_lo, key_epoch = excluded.key_epoch, "
        "sealed = excluded.sealed, digest = excluded.digest, sha256 = excluded.sha256, written = excluded.written",
        (s.number, s.seq_lo, s.seq_hi, s.hlc_lo, s.key_epoch, s.sealed, s.digest, s.sha256, time.time()),
    )


def own_segments(conn: Conn) -> list[OwnSegment]:
    rows = conn.execute(
        "SELECT segment, seq_lo, seq_hi, hlc_lo, key_epoch, sealed, digest, sha256 FROM sync_own ORDER BY segment"
    ).fetchall()
    return [
        OwnSegment(int(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), str(r[5]), str(r[6]), str(r[7])) for r in rows
    ]


def own_numbers(conn: Conn) -> set[int]:
    return {int(r[0]) for r in conn.execute("SELECT segment FROM sync_own")}


def local_rows(conn: Conn, seq_lo: int, seq_hi: int, limit: int = -1) -> list[ChangeRow]:
    """Journal rows made here (origin NULL) with ``seq_lo <= seq <= seq_hi``, oldest
    first, at most ``limit`` (-1: all)."""
    rows = conn.execute(
        "SELECT seq, kind, key, model, data, at FROM changes WHERE seq BETWEEN ? AND ? AND origin IS NULL "
        "ORDER BY seq LIMIT ?",
        (seq_lo, seq_hi, limit),
    ).fetchall()
    return [ChangeRow(int(r[0]), str(r[1]), str(r[2]), r[3], r[4], float(r[5])) for r in rows]


def unexported(conn: Conn, after_seq: int) -> int:
    """Changes made here (not folded from another device) after the export position."""
    return int(conn.one("SELECT count(*) FROM changes WHERE seq > ? AND origin IS NULL", (after_seq,))[0])


# -- what an export leaves out -------------------------------------------------------------


def referenced_turns(rows: Sequence[ChangeRow]) -> dict[int, tuple[str, ...]]:
    """The turn hashes each derived row is about (by seq): an enrichment's and a cue's
    turn, an antecedent edge's two turns."""
    out: dict[int, tuple[str, ...]] = {}
    for r in rows:
        if r.kind == "enrichment":
            out[r.seq] = (r.key,)
        elif r.kind in ("cue", "antecedent") and r.data is not None:
            d = json.loads(r.data)
            out[r.seq] = (str(d["turn"]),) if r.kind == "cue" else (str(d["src"]), str(d["dst"]))
    return out


def forgotten_among(conn: Conn, hashes: Iterable[str]) -> set[str]:
    return forgets.forgotten_among(conn, hashes)


def live_sessions(conn: Conn, rows: Sequence[ChangeRow]) -> set[int]:
    """The seqs of ``session`` rows whose session still exists (one whose every turn was
    forgotten is gone, and so is its header)."""
    pairs: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        if r.kind == "session" and r.data is not None:
            d = json.loads(r.data)
            pairs.setdefault((str(d["source"]), str(d["key"])), []).append(r.seq)
    if not pairs:
        return set()
    found = {
        (str(a), str(b))
        for a, b in rows_in(
            conn,
            "SELECT source, key FROM sessions WHERE source || char(0) || key IN ({marks})",
            [f"{s}\x00{k}" for s, k in pairs],
        )
    }
    return {seq for pair, seqs in pairs.items() if pair in found for seq in seqs}
