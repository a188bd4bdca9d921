"""The ``ingest_files`` table: one row per (file path, format, options) an ingest read,
with the file's size, mtime and fingerprint and where reading it stopped.

The ingest package (``localmem.ingest.state``) decides what a row means (whether a
resume point is still trusted); this module only reads and writes rows.

Invariants:
- a path is stored as given: the caller passes the resolved absolute path;
- every write is its own short ``BEGIN IMMEDIATE`` transaction (``db.transaction``);
- :func:`move` replaces rows already at the destination, so a path never has two rows
  for one (format, options).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from localmem.storage.engine import db
from localmem.storage.engine.db import Conn


class IngestFile(NamedTuple):
    path: str
    format: str
    options: str
    size: int
    mtime_ns: int
    fingerprint: str
    resume_offset: int  # byte offset after the last unit stored
    resume_unit: int  # index of the next unit
    resume_line: int  # line of the file at resume_offset
    prefix_hash: str  # of the bytes before resume_offset
    complete: bool


_COLUMNS = (
    "path, format, options, size, mtime_ns, fingerprint, resume_offset, resume_unit, resume_line, prefix_hash, complete"
)


def _row(r: tuple[Any, ...]) -> IngestFile:
    path, fmt, options, size, mtime_ns, fingerprint, offset, unit, line, prefix, complete = r
    return IngestFile(
        str(path),
        str(fmt),
        str(options),
        int(size),
        int(mtime_ns),
        str(fingerprint),
        int(offset),
        int(unit),
        int(line),
        str(prefix),
        bool(complete),
    )


def get(conn: Conn, path: str, fmt: str, options: str) -> IngestFile | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM ingest_files WHERE path = ? AND format = ? AND options = ?", (path, fmt, options)
    ).fetchone()
    return None if row is None else _row(row)


def for_path(conn: Conn, path: str) -> list[IngestFile]:
    """Every row of ``path`` (one per format and options it was read with)."""
    return [_row(r) for r in conn.execute(f"SELECT {_COLUMNS} FROM ingest_files WHERE path = ?", (path,)).fetchall()]


def complete_with_fingerprint(conn: Conn, fingerprint: str, size: int) -> list[IngestFile]:
    """Rows of files read to their end whose content had this fingerprint and size."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM ingest_files WHERE fingerprint = ? AND size = ? AND complete = 1", (fingerprint, size)
    ).fetchall()
    return [_row(r) for r in rows]


def save(conn: Conn, row: IngestFile) -> None:
    """Insert ``row``, or update the one of its (path, format, options), in its own
    transaction; ``updated_at`` is set to now."""
    values = (*row[:10], int(row.complete))
    with db.transaction(conn):
        conn.execute(
            f"INSERT INTO ingest_files({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(path, format, options) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, "
            "fingerprint = excluded.fingerprint, resume_offset = excluded.resume_offset, "
            "resume_unit = excluded.resume_unit, resume_line = excluded.resume_line, "
            "prefix_hash = excluded.prefix_hash, complete = excluded.complete, "
            "updated_at = strftime('%Y-%m-%dT%H:%M:%S', 'now')",
            values,
        )


def move(conn: Conn, old: str, new: str) -> int:
    """The rows of path ``old`` become rows of ``new`` (a rename), replacing any rows of
    ``new``, in one transaction; returns how many moved (0 when ``old`` has none, and
    then nothing changes)."""
    with db.transaction(conn):
        if conn.execute("SELECT 1 FROM ingest_files WHERE path = ?", (old,)).fetchone() is None:
            return 0
        conn.execute("DELETE FROM ingest_files WHERE path = ?", (new,))
        return len(conn.execute("UPDATE ingest_files SET path = ? WHERE path = ? RETURNING id", (new, old)).fetchall())
