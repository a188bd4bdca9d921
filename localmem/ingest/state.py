"""Ingest bookkeeping (the ``ingest_files`` table): resume points and file fingerprints.

All SQL about ingest state lives here, on the store's connection; every write is its
own short ``BEGIN IMMEDIATE`` transaction. A resume point is trusted only while the
bytes before it are unchanged (checked on the first and the last 64 KiB before it), so
an edited file is read again from its start, while a file that only grew is read on
from where the last ingest stopped.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import apsw

from localmem.errors import InputError
from localmem.ingest._json import Cursor
from localmem.storage import db

WINDOW = 65536


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime_ns: int
    fingerprint: str


@dataclass(frozen=True)
class FileState:
    path: str
    format: str
    options: str
    stat: FileStat
    cursor: Cursor
    prefix_hash: str
    complete: bool


def key(path: Path) -> str:
    return str(path.expanduser().resolve())


def stat(path: Path) -> FileStat:
    """Size, mtime and a fingerprint of the content (size + first and last 64 KiB)."""
    try:
        st = path.stat()
        h = hashlib.sha256(str(st.st_size).encode())
        with path.open("rb") as fh:
            h.update(fh.read(WINDOW))
            if st.st_size > WINDOW:
                fh.seek(max(WINDOW, st.st_size - WINDOW))
                h.update(fh.read(WINDOW))
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    return FileStat(st.st_size, st.st_mtime_ns, h.hexdigest())


def prefix_hash(path: Path, offset: int) -> str:
    h = hashlib.sha256(str(offset).encode())
    try:
        with path.open("rb") as fh:
            h.update(fh.read(min(offset, WINDOW)))
            if offset > WINDOW:
                fh.seek(max(WINDOW, offset - WINDOW))
                h.update(fh.read(offset - max(WINDOW, offset - WINDOW)))
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    return h.hexdigest()


_COLUMNS = (
    "path, format, options, size, mtime_ns, fingerprint, resume_offset, resume_unit, resume_line, prefix_hash, complete"
)


def _row(r: tuple[object, ...]) -> FileState:
    return FileState(
        path=str(r[0]),
        format=str(r[1]),
        options=str(r[2]),
        stat=FileStat(int(r[3]), int(r[4]), str(r[5])),  # type: ignore[call-overload]
        cursor=Cursor(int(r[6]), int(r[7]), int(r[8])),  # type: ignore[call-overload]
        prefix_hash=str(r[9]),
        complete=bool(r[10]),
    )


def get(conn: apsw.Connection, path: Path, fmt: str, options: str) -> FileState | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM ingest_files WHERE path = ? AND format = ? AND options = ?",
        (key(path), fmt, options),
    ).fetchone()
    return None if row is None else _row(row)


def for_path(conn: apsw.Connection, path: Path) -> list[FileState]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM ingest_files WHERE path = ?", (key(path),)).fetchall()
    return [_row(r) for r in rows]


def with_fingerprint(conn: apsw.Connection, fp: FileStat) -> list[FileState]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM ingest_files WHERE fingerprint = ? AND size = ? AND complete = 1",
        (fp.fingerprint, fp.size),
    ).fetchall()
    return [_row(r) for r in rows]


def save(
    conn: apsw.Connection, path: Path, fmt: str, options: str, st: FileStat, cursor: Cursor, *, complete: bool
) -> None:
    ph = prefix_hash(path, cursor.offset)
    with db.transaction(conn):
        conn.execute(
            f"INSERT INTO ingest_files({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(path, format, options) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns, "
            "fingerprint = excluded.fingerprint, resume_offset = excluded.resume_offset, "
            "resume_unit = excluded.resume_unit, resume_line = excluded.resume_line, "
            "prefix_hash = excluded.prefix_hash, complete = excluded.complete, "
            "updated_at = strftime('%Y-%m-%dT%H:%M:%S', 'now')",
            (
                key(path),
                fmt,
                options,
                st.size,
                st.mtime_ns,
                st.fingerprint,
                cursor.offset,
                cursor.index,
                cursor.line,
                ph,
                int(complete),
            ),
        )


def move(conn: apsw.Connection, old: Path | str, new: Path) -> int:
    """The rows of ``old`` now describe ``new`` (a rename); returns how many moved."""
    old_key = old if isinstance(old, str) else key(old)
    new_key = key(new)
    if old_key == new_key:
        return 0
    with db.transaction(conn):
        if conn.execute("SELECT 1 FROM ingest_files WHERE path = ?", (old_key,)).fetchone() is None:
            return 0
        conn.execute("DELETE FROM ingest_files WHERE path = ?", (new_key,))
        return len(
            conn.execute("UPDATE ingest_files SET path = ? WHERE path = ? RETURNING id", (new_key, old_key)).fetchall()
        )


def resume_point(state: FileState, path: Path, now: FileStat) -> Cursor | None:
    """Where to go on reading ``path``: after its last stored unit if the bytes before
    that point are unchanged, else None (read it from the start)."""
    c = state.cursor
    if c.offset == 0 and c.index == 0:
        return None
    if now.size < c.offset or prefix_hash(path, c.offset) != state.prefix_hash:
        return None
    return c
