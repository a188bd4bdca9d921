"""``localmem encrypt`` / ``decrypt``: convert a store between plaintext and encrypted in place.

The conversion never writes to the store itself until one atomic rename: the store is put
in rollback-journal mode and locked exclusively (which also proves no other process has it
open), every page is copied with SQLite's backup API into a new file beside it (the copy
keyed like the source, as the backup API needs), SQLite3MC's ``PRAGMA rekey`` re-encrypts
that copy (to the new key, or to none), the copy is reopened with the new key and checked
(``integrity_check``, the same turn and session counts, and the file's first bytes are
plaintext or not as intended), fsynced, and renamed over the store; the folder is fsynced
after. A kill at any moment leaves either the old store intact (and a ``.convert-partial``
file, mode 600, which the next command of any kind removes: ``engine.partials``) or the new
one complete: the command is resumable by running it again. Litestream's local state for
the store (LTX files of the old pages, plaintext before an encrypt) is removed with the
old file, so a replica starts afresh from the converted one.

Deleting the plaintext file does not wipe its blocks from the disk: docs/security.md says
so. SQL lives here and in ``keys``; the CLI (``cli/secure.py``) only calls ``convert``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from localmem.errors import InputError, LocalmemError, NotFound
from localmem.storage.engine import checkpoints as replica_live
from localmem.storage.engine import keys, partials
from localmem.storage.engine.keys import apply_key, check_key, file_state
from localmem.storage.engine.partials import partial_path

__all__ = ["ConvertReport", "convert", "hold_alone", "litestream_state", "partial_path"]


@dataclass(frozen=True)
class ConvertReport:
    path: str
    encrypted: bool
    turns: int
    sessions: int
    bytes: int
    litestream_reset: bool = False  # Litestream's local state for the old file was removed

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def convert(path: Path, *, old_key: str | None, new_key: str | None) -> ConvertReport:
    """Rewrite the store at ``path`` from ``old_key`` (None: plaintext) to ``new_key``
    (None: plaintext); see the module docstring."""
    state = file_state(path)
    if state == "new":
        raise NotFound(f"no database at {path}")
    if old_key is None and state == "encrypted":
        raise InputError("is already encrypted (localmem decrypt, or give its key to change it)", path=str(path))
    if old_key is not None and state == "plain":
        raise InputError("is not encrypted", path=str(path))
    tmp = partial_path(path)
    src = _open(path, old_key)
    try:
        _lock_alone(src, path)
        counts = _counts(src)
        held = partials.claim(path)  # mode 600, locked: a copy left by a killed run is removed first
        done = False
        try:
            _copy(src, tmp, old_key)
            _rekey(tmp, old_key, new_key)
            _verify(tmp, new_key, counts)
            _fsync(tmp)
            os.replace(tmp, path)
            _fsync(path.parent)
            done = True
        finally:
            partials.release(path, held, remove=not done)
    finally:
        src.close()
    for leftover in (Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        leftover.unlink(missing_ok=True)  # of the old file; none is left in rollback mode
    # Litestream's local copy of the old file's pages (plaintext before an encrypt) and its
    # position in it: a replica starts afresh from the converted file (docs/security.md)
    reset = litestream_state(path).exists()
    shutil.rmtree(litestream_state(path), ignore_errors=True)
    return ConvertReport(str(path), new_key is not None, counts[0], counts[1], path.stat().st_size, reset)


def litestream_state(path: Path) -> Path:
    """Where Litestream keeps its local state for ``path``: LTX files of its pages."""
    return path.with_name(f".{path.name}-litestream")


def _open(path: Path, key: str | None) -> apsw.Connection:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)
    if key is not None:
        apply_key(conn, key)
        check_key(conn, str(path))
    conn.set_busy_timeout(2000)
    return conn


def hold_alone(path: Path) -> apsw.Connection | None:
    """An exclusive hold on the store at ``path`` (``_lock_alone``), for replacing it;
    refused while Litestream replicates it or another process has it open. None for a
    file that is not a database (nothing can be using it as one)."""
    if replica_live.live(path):
        raise LocalmemError(f"{path}: Litestream replicates it now; stop `localmem replicate` first")
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        keys.unlock(conn, path)
        conn.set_busy_timeout(2000)
        _lock_alone(conn, path)
    except (apsw.NotADBError, apsw.CorruptError):
        conn.close()
        return None
    except BaseException:
        conn.close()
        raise
    return conn


def _lock_alone(conn: apsw.Connection, path: Path) -> None:
    """Leave WAL (only possible with no other connection) and hold an exclusive lock until
    ``conn`` closes (locking_mode EXCLUSIVE keeps the lock a write takes)."""
    try:
        mode = str(conn.execute("PRAGMA journal_mode = DELETE").fetchall()[0][0]).lower()
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        version: Any = conn.execute("PRAGMA user_version").fetchall()[0][0]
        conn.execute(f"PRAGMA user_version = {int(version)}")  # a write: takes the exclusive lock, keeps it
    except (apsw.BusyError, apsw.LockedError) as exc:
        mode = f"busy ({exc})"
    if mode != "delete":
        raise LocalmemError(
            f"{path} is open in another process; stop localmem serve, watch, worker and ui (`localmem doctor` "
            "names a resident one), then run this again"
        )


def _counts(conn: apsw.Connection) -> tuple[int, int]:
    row: tuple[Any, ...] = conn.execute(
        "SELECT (SELECT count(*) FROM turns), (SELECT count(*) FROM sessions)"
    ).fetchall()[0]
    return int(row[0]), int(row[1])


def _copy(src: apsw.Connection, tmp: Path, key: str | None) -> None:
    out = apsw.Connection(str(tmp))
    try:
        if key is not None:
            apply_key(out, key)  # the backup API copies between databases of one format only
        with out.backup("main", src, "main") as b:
            b.step(-1)
    finally:
        out.close()


def _rekey(tmp: Path, old_key: str | None, new_key: str | None) -> None:
    out = apsw.Connection(str(tmp))
    try:
        if old_key is not None:
            apply_key(out, old_key)
        out.execute("PRAGMA journal_mode = DELETE")  # SQLite3MC rekeys in rollback mode only
        out.pragma("rekey", new_key if new_key is not None else "")
    finally:
        out.close()


def _verify(tmp: Path, key: str | None, counts: tuple[int, int]) -> None:
    want = "plain" if key is None else "encrypted"
    if file_state(tmp) != want:
        raise LocalmemError(f"the converted copy {tmp} is not {want}; the store was left as it was")
    out = apsw.Connection(str(tmp), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        if key is not None:
            apply_key(out, key)
        check = [str(r[0]) for r in out.execute("PRAGMA integrity_check")]
        if check != ["ok"]:
            raise LocalmemError(f"the converted copy failed its integrity check: {'; '.join(check[:5])}")
        got = _counts(out)
        if got != counts:
            raise LocalmemError(f"the converted copy holds {got} turns/sessions, the store {counts}; left as it was")
    finally:
        out.close()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
