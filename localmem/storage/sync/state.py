"""The SQL of sync (``localmem/sync/``) about this device: its identity and export
position, the journal rows it exports (with their turns' content), turns by hash, topic clocks,
and the derived rows of folded cues (migration 0012); ``sync.log`` keeps what was folded
or refused from other devices; the forget set is the write path's (``write.forgets``).

Invariants: every function runs inside the caller's transaction (or reads), never opens
one; nothing here mutates the facts (that is ``changes``, the one door) except the
derived rows of a folded cue (its FTS row and vector) and the jobs a folded enrichment
makes unnecessary.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from localmem.storage.engine.db import Conn
from localmem.storage.engine.inlist import chunks, marks


class _Hashed(Protocol):
    hash: str


S = TypeVar("S")
P = TypeVar("P", bound=_Hashed)


@dataclass(frozen=True)
class DeviceState:
    device: str
    next_segment: int
    exported_seq: int
    hlc: int


@dataclass(frozen=True)
class ChangeRow:
    seq: int
    kind: str
    key: str
    model: str | None
    data: str | None
    at: float


# -- this device ------------------------------------------------------------------------


def device_state(conn: Conn) -> DeviceState | None:
    row = conn.execute("SELECT device, next_segment, exported_seq, hlc FROM sync_device WHERE id = 1").fetchone()
    return None if row is None else DeviceState(str(row[0]), int(row[1]), int(row[2]), int(row[3]))


def create_device(conn: Conn, device: str) -> DeviceState:
    conn.execute("INSERT OR IGNORE INTO sync_device(id, device) VALUES (1, ?)", (device,))
    state = device_state(conn)
    assert state is not None
    return state


def save_export(conn: Conn, exported_seq: int, next_segment: int, hlc: int) -> None:
    """Move the export position forward (never back: another process may have moved it)."""
    conn.execute(
        "UPDATE sync_device SET exported_seq = max(exported_seq, ?), next_segment = max(next_segment, ?), "
        "hlc = max(hlc, ?) WHERE id = 1",
        (exported_seq, next_segment, hlc),
    )


def save_hlc(conn: Conn, hlc: int) -> None:
    conn.execute("UPDATE sync_device SET hlc = max(hlc, ?) WHERE id = 1", (hlc,))


def local_changes(conn: Conn, after_seq: int, limit: int) -> list[ChangeRow]:
    """Journal rows made on this device (origin NULL) after ``after_seq``, oldest first."""
    rows = conn.execute(
        "SELECT seq, kind, key, model, data, at FROM changes WHERE seq > ? AND origin IS NULL ORDER BY seq LIMIT ?",
        (after_seq, limit),
    ).fetchall()
    return [ChangeRow(int(r[0]), str(r[1]), str(r[2]), r[3], r[4], float(r[5])) for r in rows]


def newest_seq(conn: Conn) -> int:
    return int(conn.one("SELECT coalesce(max(seq), 0) FROM changes")[0])


def turn_payloads(conn: Conn, hashes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What another device needs to write each stored turn again with the same hash."""
    out: dict[str, dict[str, Any]] = {}
    for chunk in chunks(hashes):
        for r in conn.execute(
            "SELECT t.hash, s.source, s.key, s.title, s.started_at, t.ord, t.speaker, t.role, t.text, t.ts, "
            f"t.source_id FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.hash IN ({marks(len(chunk))})",
            chunk,
        ):
            out[str(r[0])] = {
                "source": r[1],
                "session": r[2],
                "title": r[3],
                "started_at": r[4],
                "ord": r[5],
                "speaker": r[6],
                "role": r[7],
                "text": r[8],
                "ts": r[9],
                "source_id": r[10],
            }
    return out


def session_exists(conn: Conn, source: str, key: str) -> bool:
    return conn.execute("SELECT 1 FROM sessions WHERE source = ? AND key = ?", (source, key)).fetchone() is not None


# -- turns by hash, the forget set --------------------------------------------------------


def turn_ids(conn: Conn, hashes: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for chunk in chunks(hashes):
        sql = f"SELECT hash, id FROM turns WHERE hash IN ({marks(len(chunk))})"
        out.update((str(r[0]), int(r[1])) for r in conn.execute(sql, chunk))
    return out


def turn_docs(conn: Conn, ids: Iterable[int]) -> dict[int, tuple[str, str | None]]:
    """(speaker, ts) of each turn id, for the text an extracted cue is indexed with."""
    out: dict[int, tuple[str, str | None]] = {}
    for chunk in chunks(ids):
        sql = f"SELECT id, speaker, ts FROM turns WHERE id IN ({marks(len(chunk))})"
        out.update((int(r[0]), (str(r[1]), r[2])) for r in conn.execute(sql, chunk))
    return out


# -- derived rows of folded layers ---------------------------------------------------------


def index_cue(conn: Conn, cue_id: int, doc: str, vec: np.ndarray) -> None:
    """The derived rows of a folded model-extracted cue: its FTS row and its vector."""
    conn.execute("INSERT INTO extracted_cues_fts(rowid, doc) VALUES (?, ?)", (cue_id, doc))
    conn.execute("INSERT INTO cue_vec(cue_id, embedding) VALUES (?, ?)", (cue_id, vec.astype(np.float32).tobytes()))


def extraction_done(conn: Conn, turn_id: int) -> None:
    """A folded enrichment record makes this device's extraction job for the turn moot."""
    conn.execute(
        "UPDATE jobs SET state = 'done' WHERE kind = 'extract' AND turn_id = ? AND state = 'pending'", (turn_id,)
    )


def topic_of(conn: Conn, key: str) -> tuple[int, str] | None:
    row = conn.execute("SELECT id, kind FROM topics WHERE key = ?", (key,)).fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


def topic_ids(conn: Conn, keys: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for chunk in chunks(keys):
        sql = f"SELECT key, id FROM topics WHERE key IN ({marks(len(chunk))})"
        out.update((str(r[0]), int(r[1])) for r in conn.execute(sql, chunk))
    return out


def topic_clock(conn: Conn, key: str) -> int:
    row = conn.execute("SELECT hlc FROM sync_topics WHERE key = ?", (key,)).fetchone()
    return -1 if row is None else int(row[0])


def set_topic_clock(conn: Conn, key: str, hlc: int) -> None:
    conn.execute(
        "INSERT INTO sync_topics(key, hlc) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET hlc = max(hlc, excluded.hlc)",
        (key, hlc),
    )
