"""The stored vectors (``turn_vec`` / ``cue_vec``, template ``migrations/vectors.sql``):
exact vectors by id, sign codes, and the id lookups the read path pairs with them.

A query reads exact vectors only for the rows it ranks or scores (a shortlist, its
pool), inside its snapshot. In the plain rowid tables a read is a B-tree seek (~15 us
per row at 100k turns on the dev machine); in the vec0 tables they replaced it walked a
chunk's 1.5 MB overflow chain (0.3-2.7 ms per row).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import apsw
import numpy as np

from localmem.errors import EmbedderMismatch
from localmem.storage.engine.db import Conn
from localmem.storage.engine.inlist import rows_in

UNDATED = np.iinfo(np.int64).min  # a mirror's ts of an undated turn: sorts before every dated one
_CHUNK = 8192  # rows per fetch when streaming a table


def quantize(vecs: np.ndarray, words: int) -> np.ndarray:
    """Sign codes of ``vecs`` (n, dim) as (n, words) uint64, bit order as sqlite-vec's
    ``vec_quantize_binary`` (dimension i is bit i % 8 of byte i // 8), zero-padded."""
    bits = np.packbits(np.atleast_2d(vecs) > 0, axis=1, bitorder="little")
    out = np.zeros((bits.shape[0], 8 * words), dtype=np.uint8)
    out[:, : bits.shape[1]] = bits
    return out.view(np.uint64)


def epoch_seconds(iso: str) -> int:
    """Seconds since 1970 of a naive ISO time or date (what ``ts`` columns hold)."""
    return int(np.datetime64(iso.strip().replace(" ", "T")[:19], "s").astype(np.int64))


def read_vectors(conn: Conn, table: str, key: str, ids: Sequence[int] | np.ndarray, dim: int) -> np.ndarray:
    """The stored float32 vectors of rows ``ids`` of ``table`` (turn_vec / cue_vec), in
    that order; a zero row for an id without one. Reads the caller's snapshot.

    Through SQLite's incremental blob I/O: one blob handle moved from row to row
    (``reopen``), each vector read straight into the result array. Measured on the bench
    stores, 400 rows: ~1.2 ms against ~7 ms for ``SELECT ... WHERE id IN (...)``, which
    makes a statement, a row tuple and a bytes object per row."""
    want = np.asarray(ids, dtype=np.int64).reshape(-1)
    out = np.zeros((len(want), dim), dtype=np.float32)
    rids = want.tolist()
    blob: apsw.Blob | None = None
    try:
        # in id order: neighbouring rows share pages; the table's CHECK gives every row one
        # length, so the first row read tells whether the table is still of this dimension
        for i in np.argsort(want, kind="stable").tolist():
            try:
                if blob is None:
                    blob = conn.blob_open("main", table, "embedding", rids[i], False)
                    if blob.length() != 4 * dim:
                        raise mismatch(dim)
                else:
                    blob.reopen(rids[i])
            except apsw.SQLError:  # no such row (a turn without a vector): its row stays 0
                if blob is not None:
                    blob.close()  # a failed reopen leaves the handle aborted
                    blob = None
                continue
            blob.read_into(out[i])
    finally:
        if blob is not None:
            blob.close()
    return out


def turn_vectors(conn: Conn, ids: Sequence[int] | np.ndarray, dim: int) -> np.ndarray:
    """The stored vectors of turns ``ids`` (zero rows for turns without one)."""
    return read_vectors(conn, "turn_vec", "turn_id", ids, dim)


def _ids_in(conn: Conn, sql: str, values: Sequence[int]) -> list[int]:
    return [r[0] for r in rows_in(conn, sql, (int(v) for v in values))]


def cue_ids_of(conn: Conn, turn_ids: Sequence[int]) -> list[int]:
    """Ids of every cue of ``turn_ids`` (index ``cues_turn``)."""
    return _ids_in(conn, "SELECT id FROM cues WHERE turn_id IN ({marks})", turn_ids)


def turn_ids_of_sessions(conn: Conn, session_ids: Sequence[int]) -> list[int]:
    """Ids of every turn of ``session_ids`` (the (session_id, ord) index covers it)."""
    return _ids_in(conn, "SELECT id FROM turns WHERE session_id IN ({marks})", session_ids)


def mean_vector(conn: Conn, table: str, dim: int) -> np.ndarray:
    """The mean of every stored vector of ``table``, streamed in chunks (bounded memory)."""
    total = np.zeros(dim, dtype=np.float64)
    n = 0
    cur = conn.execute(f"SELECT embedding FROM {table}")
    while chunk := list(itertools.islice(cur, _CHUNK)):
        mat = np.frombuffer(b"".join(r[0] for r in chunk), dtype=np.float32).reshape(len(chunk), dim)
        total += mat.sum(axis=0, dtype=np.float64)
        n += len(chunk)
    out: np.ndarray = (total / max(n, 1)).astype(np.float32)
    return out


def mismatch(dim: int) -> EmbedderMismatch:
    return EmbedderMismatch(
        f"the stored vectors are not {dim}-d: another process re-embedded the store with "
        "another embedder (reembed, reindex); open it again with that embedder"
    )
