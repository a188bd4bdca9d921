"""Ingest bookkeeping (the ``ingest_files`` table): resume points and file fingerprints.

The rows are read and written by ``localmem.storage.reads.ingest_files`` on the store's
connection (every write its own short write transaction); this module
turns them into cursors and decides whether one still holds. A resume point is trusted
only while the bytes before it are unchanged (checked on the first and the last 64 KiB
before it), so an edited file is read again from its start, while a file that only grew
is read on from where the last ingest stopped.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from localmem.errors import InputError
from localmem.ingest._json import Cursor
from localmem.storage.engine.db import Conn
from localmem.storage.reads import ingest_files

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


def _state(r: ingest_files.IngestFile) -> FileState:
    return FileState(
        path=r.path,
        format=r.format,
        options=r.options,
        stat=FileStat(r.size, r.mtime_ns, r.fingerprint),
        cursor=Cursor(r.resume_offset, r.resume_unit, r.resume_line),
        prefix_hash=r.prefix_hash,
        complete=r.complete,
    )


def get(conn: Conn, path: Path, fmt: str, options: str) -> FileState | None:
    row = ingest_files.get(conn, key(path), fmt, options)
    return None if row is None else _state(row)


def for_path(conn: Conn, path: Path) -> list[FileState]:
    return [_state(r) for r in ingest_files.for_path(conn, key(path))]


def with_fingerprint(conn: Conn, fp: FileStat) -> list[FileState]:
    return [_state(r) for r in ingest_files.complete_with_fingerprint(conn, fp.fingerprint, fp.size)]


def save(conn: Conn, path: Path, fmt: str, options: str, st: FileStat, cursor: Cursor, *, complete: bool) -> None:
    ph = prefix_hash(path, cursor.offset)
    row = ingest_files.IngestFile(
        path=key(path),
        format=fmt,
        options=options,
        size=st.size,
        mtime_ns=st.mtime_ns,
        fingerprint=st.fingerprint,
        resume_offset=cursor.offset,
        resume_unit=cursor.index,
        resume_line=cursor.line,
        prefix_hash=ph,
        complete=complete,
    )
    ingest_files.save(conn, row)


def move(conn: Conn, old: Path | str, new: Path) -> int:
    """The rows of ``old`` now describe ``new`` (a rename); returns how many moved."""
    old_key = old if isinstance(old, str) else key(old)
    new_key = key(new)
    if old_key == new_key:
        return 0
    return ingest_files.move(conn, old_key, new_key)


def resume_point(state: FileState, path: Path, now: FileStat) -> Cursor | None:
    """Where to go on reading ``path``: after its last stored unit if the bytes before
    that point are unchanged, else None (read it from the start)."""
    c = state.cursor
    if c.offset == 0 and c.index == 0:
        return None
    if now.size < c.offset or prefix_hash(path, c.offset) != state.prefix_hash:
        return None
    return c
