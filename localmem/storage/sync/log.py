"""The SQL of sync's bookkeeping of other devices (migration 0012): segments folded and
refused, and derived changes waiting for a turn that has not arrived. Runs inside the
caller's transaction, never opens one; touches no fact."""

from __future__ import annotations

import time
from dataclasses import dataclass

from localmem.storage.engine.db import Conn


@dataclass(frozen=True)
class DeviceLog:
    """What this store folded from one other device, for ``sync status``."""

    device: str
    segments: int
    last_segment: int
    changes: int
    bytes: int
    hlc_hi: int
    folded_at: float


@dataclass(frozen=True)
class RefusedRow:
    device: str
    name: str
    reason: str
    incomplete: bool
    at: float


def is_folded(conn: Conn, device: str, segment: int, sha256: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sync_folded WHERE device = ? AND segment = ? AND sha256 = ?", (device, segment, sha256)
    ).fetchone()
    return row is not None


def record_folded(
    conn: Conn, device: str, segment: int, sha256: str, name: str, changes: int, size: int, hlc_hi: int
) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO sync_folded(device, segment, sha256, name, changes, bytes, hlc_hi, folded_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (device, segment, sha256, name, changes, size, hlc_hi, time.time()),
    )
    conn.execute("DELETE FROM sync_refused WHERE device = ? AND name = ?", (device, name))


def replace_folded(
    conn: Conn, device: str, segment: int, sha256: str, name: str, changes: int, size: int, hlc_hi: int
) -> None:
    """``record_folded`` for a segment this device wrote (again): the record of the bytes
    it had before goes."""
    conn.execute(
        "DELETE FROM sync_folded WHERE device = ? AND segment = ? AND name = ? AND sha256 != ?",
        (device, segment, name, sha256),
    )
    record_folded(conn, device, segment, sha256, name, changes, size, hlc_hi)


def record_refused(conn: Conn, device: str, name: str, reason: str, *, incomplete: bool) -> None:
    conn.execute(
        "INSERT INTO sync_refused(device, name, reason, incomplete, at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT(device, name) DO UPDATE SET reason = excluded.reason, incomplete = excluded.incomplete, "
        "at = excluded.at",
        (device, name, reason, int(incomplete), time.time()),
    )


def clear_refused(conn: Conn, device: str, names: set[str]) -> None:
    """Forget refusals of files that are no longer in the folder (removed or renamed)."""
    rows = conn.execute("SELECT name FROM sync_refused WHERE device = ?", (device,)).fetchall()
    conn.executemany(
        "DELETE FROM sync_refused WHERE device = ? AND name = ?",
        [(device, str(r[0])) for r in rows if str(r[0]) not in names],
    )


def device_logs(conn: Conn) -> list[DeviceLog]:
    rows = conn.execute(
        "SELECT device, count(*), max(segment), sum(changes), sum(bytes), max(hlc_hi), max(folded_at) "
        "FROM sync_folded GROUP BY device ORDER BY device"
    ).fetchall()
    return [DeviceLog(str(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), float(r[6])) for r in rows]


def folded_numbers(conn: Conn, device: str) -> set[int]:
    return {int(r[0]) for r in conn.execute("SELECT DISTINCT segment FROM sync_folded WHERE device = ?", (device,))}


def refused(conn: Conn) -> list[RefusedRow]:
    rows = conn.execute("SELECT device, name, reason, incomplete, at FROM sync_refused ORDER BY device, name")
    return [RefusedRow(str(r[0]), str(r[1]), str(r[2]), bool(r[3]), float(r[4])) for r in rows]


# -- derived changes waiting for their turn ------------------------------------------------


def add_pending(conn: Conn, device: str, turn: str, change: str) -> None:
    conn.execute("INSERT OR IGNORE INTO sync_pending(device, turn, change) VALUES (?, ?, ?)", (device, turn, change))


def pending_for(conn: Conn, turns: set[str]) -> list[tuple[int, str, str]]:
    """(id, device, change) of pending changes whose turn is among ``turns``."""
    rows = conn.execute("SELECT id, device, turn, change FROM sync_pending ORDER BY id").fetchall()
    return [(int(r[0]), str(r[1]), str(r[3])) for r in rows if str(r[2]) in turns]


def pending_turns(conn: Conn) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT DISTINCT turn FROM sync_pending")}


def drop_pending(conn: Conn, ids: list[int]) -> None:
    conn.executemany("DELETE FROM sync_pending WHERE id = ?", [(i,) for i in ids])


def pending_count(conn: Conn) -> int:
    return int(conn.one("SELECT count(*) FROM sync_pending")[0])
