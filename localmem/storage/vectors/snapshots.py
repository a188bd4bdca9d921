"""A vector mirror saved inside the store (``mirror_snapshots``, migration 0017), so a
fresh process does not read every code row one by one.

Loading a table's mirror row by row costs ~1.7 us a row (280 ms for the 100k-turn
hooks store: 100k turns, 180k cues); taking its snapshot is one blob read into one
buffer the arrays are views of, then only the rows newer than it through the usual path
(``table_mirror.VectorMirror.synced``).

Invariants:
- a snapshot is taken only at the ``mirror_epochs`` counter it was written at: while the
  counter stands, rows are only added, with ids above every id it holds, so the snapshot
  plus the rows newer than its newest is, array for array, what a full load gives. A
  snapshot that does not parse as the mirror it claims to be (format, dimension, shapes,
  ids not ascending, its newest) is ignored: the caller loads in full;
- the trigger ``mirror_snapshots_expire`` deletes a table's snapshot in the transaction
  that moves its counter (a forget, an update of a mirrored column, an embedder change),
  so no live row keeps the codes of a forgotten row. Their free pages last, as the
  forgotten text's do, until the file is rebuilt (``VACUUM``; the code base does not set
  ``secure_delete``);
- ``save`` is best-effort and never fails its caller: a short write transaction that waits
  at most ``SAVE_WAIT_MS`` for the lock, checks that the counters are still those the
  mirrors were loaded at (else it writes nothing) and skips a table whose stored snapshot
  already reaches further; any SQLite error, a read-only store included, leaves the store
  as it was and returns no table.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, TypeVar

import apsw
import numpy as np

from localmem.errors import StoreError
from localmem.storage.engine import db
from localmem.storage.engine.db import Conn
from localmem.storage.vectors import table_mirror
from localmem.storage.vectors.stored import read_vectors
from localmem.storage.vectors.table_mirror import VectorMirror

log = logging.getLogger("localmem.mirrors")

FORMAT = 1
SAVE_WAIT_MS = 50  # the longest a reader waits for the write lock to save one; then it skips
# dtypes a mirror array may have (int ids widen to int64 past 2**31)
_DTYPES = {"<i4", "<i8", "|b1", "<u8"}
_EPOCH = {
    "turns": "SELECT turns FROM mirror_epochs WHERE id = 1",
    "cues": "SELECT cues FROM mirror_epochs WHERE id = 1",
}
_FIND = "SELECT rowid, epoch, newest, header, length(data) FROM mirror_snapshots WHERE mirror = ?"

M = TypeVar("M", bound=VectorMirror)


def load(conn: Conn, empty: M, epoch: int) -> M | None:
    """The snapshot of ``empty``'s table as a mirror of ``empty``'s class and dimension,
    when one was written at counter ``epoch`` and reads back whole; else None. Reads in
    the caller's snapshot (one read transaction)."""
    try:
        row = _find(conn, empty.kind)
    except apsw.SQLError:  # a store opened read-only before migration 0017: no table
        return None
    if row is None or int(row[1]) != epoch:
        return None
    rowid, newest, size = int(row[0]), int(row[2]), int(row[4])
    try:
        header = json.loads(row[3])
        buf = np.empty(size, dtype=np.uint8)
        blob = conn.blob_open("main", "mirror_snapshots", "data", rowid, False)
        try:
            blob.read_into(buf.data)
        finally:
            blob.close()
        mirror = _restored(type(empty)(empty.dim), header, buf, newest)  # ``empty`` stays empty
    except (ValueError, TypeError, KeyError) as exc:
        log.warning("ignoring the %s mirror snapshot of %s: %s", empty.kind, conn.filename, exc)
        return None
    if len(mirror.ids) <= table_mirror.HELD_ROWS:  # a small table holds its exact vectors, as a full load does
        mirror.held = read_vectors(conn, mirror.table, mirror.key, mirror.ids, mirror.dim)
    else:
        mirror.held = None
    return mirror


def _find(conn: Conn, kind: str) -> tuple[Any, ...] | None:
    # every row read, so no half-stepped statement is left holding a read (db.Conn.one)
    rows = conn.execute(_FIND, (kind,)).fetchall()
    return rows[0] if rows else None


def _restored(mirror: M, header: dict[str, Any], buf: np.ndarray, newest: int) -> M:
    if header.get("format") != FORMAT or header.get("dim") != mirror.dim:
        raise ValueError(f"format {header.get('format')!r}, dim {header.get('dim')!r}")
    rows = int(header["rows"])
    arrays = {a["name"]: a for a in header["arrays"]}
    if sorted(arrays) != sorted(mirror.saved):
        raise ValueError(f"arrays {sorted(arrays)}")
    for name in mirror.saved:
        a = arrays[name]
        dtype = np.dtype(str(a["dtype"]))
        if dtype.str not in _DTYPES:
            raise ValueError(f"{name}: dtype {dtype.str}")
        shape = (mirror.words, rows) if name == "codes" else (rows,)
        off, n = int(a["offset"]), dtype.itemsize * int(np.prod(shape))
        if off % 8 or off < 0 or off + n > len(buf):
            raise ValueError(f"{name}: offset {off}")
        setattr(mirror, name, buf[off : off + n].view(dtype).reshape(shape))
    ids = mirror.ids
    if rows and (int(ids[-1]) != newest or (len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])))):
        raise ValueError("row ids out of order")
    mirror.restore(header.get("extra", {}))
    return mirror


def _layout(mirror: VectorMirror) -> tuple[str, list[tuple[int, np.ndarray]], int]:
    """The header of ``mirror``'s snapshot, each saved array at its offset, the data's size."""
    arrays, parts, at = [], [], 0
    for name in mirror.saved:
        a = np.ascontiguousarray(getattr(mirror, name))
        arrays.append({"name": name, "dtype": a.dtype.str, "offset": at})
        parts.append((at, a))
        at += -(-a.nbytes // 8) * 8  # each array 8-byte aligned, so its view needs no copy
    header = {"format": FORMAT, "dim": mirror.dim, "rows": len(mirror.ids), "arrays": arrays, "extra": mirror.extra()}
    return json.dumps(header), parts, at


def _write(conn: Conn, mirror: VectorMirror, epoch: int) -> None:
    """Replace the table's snapshot by ``mirror``'s: the row with a zeroed blob, then each
    array written into it in place (no copy of the whole in memory)."""
    header, parts, size = _layout(mirror)
    rowid = conn.one(
        "INSERT OR REPLACE INTO mirror_snapshots(mirror, epoch, newest, header, data) "
        "VALUES (?, ?, ?, ?, zeroblob(?)) RETURNING rowid",
        (mirror.kind, epoch, mirror.newest, header, size),
    )[0]
    blob = conn.blob_open("main", "mirror_snapshots", "data", int(rowid), True)
    try:
        for off, a in parts:
            if a.nbytes:
                blob.seek(off)
                blob.write(a.reshape(-1).view(np.uint8).data)
    finally:
        blob.close()


def save(conn: Conn, mirrors: Sequence[tuple[VectorMirror, int]]) -> list[str]:
    """Write the snapshot of each (mirror, counter it was loaded at); the tables written.
    Best-effort (see the module docstring): never raises for the store's sake."""
    if not mirrors or conn.in_transaction or conn.readonly("main"):
        return []
    wait = int(conn.one("PRAGMA busy_timeout")[0])
    conn.set_busy_timeout(SAVE_WAIT_MS)
    written: list[str] = []
    try:
        with db.transaction(conn):
            for mirror, epoch in mirrors:
                if int(conn.one(_EPOCH[mirror.kind])[0]) != epoch:
                    continue  # a forget or an update since the load: this state is no longer the table's
                have = _find(conn, mirror.kind)
                if have is not None and int(have[1]) == epoch and int(have[2]) > mirror.newest:
                    continue  # another process saved a newer state (an equal one may be one we could not read)
                _write(conn, mirror, epoch)
                written.append(mirror.kind)
    except (apsw.Error, StoreError) as exc:  # busy, read-only, full: the next reader tries again
        log.debug("mirror snapshot of %s not saved: %s", conn.filename, exc)
        return []
    finally:
        conn.set_busy_timeout(wait)
    return written
