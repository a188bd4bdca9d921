"""SQLite's failures said in words: the one place that maps apsw's exceptions to named
localmem errors (``localmem.errors.StoreError`` and its subclasses).

SQLite reports a full disk, a read-only file, a damaged file as a result code (apsw: one
exception class each, with ``extendedresult`` for the detail) and the operating system's
``errno`` (``Connection.system_errno``), in words that name neither the file nor the
cause ("disk I/O error", "attempt to write a readonly database"). ``translate`` turns one
into a ``StoreError`` whose message is one line with the file and the cause, asking the
file system where the code cannot tell (which of the file, its folder or the file system
is read-only). ``faults`` is the context manager storage wraps around opening a
connection (``db.connect``), every write transaction (``db.transaction``) and a backup's
copy; the CLI and the MCP server call ``translate`` for what reaches them otherwise.

A folder that cannot be written still serves reads: SQLite needs the folder for the
``-wal``/``-shm`` files of a WAL database, so ``readonly_uri`` opens such a file
``immutable=1`` (no companion files needed) or, where a ``-wal`` still holds commits,
``mode=ro`` (which reads it through the existing ``-shm``).

Invariants:
- busy and locked errors pass ``faults`` unchanged: ``retry.retry_locked`` waits them out
  (our transactions begin with ``BEGIN IMMEDIATE``, so a retry is safe); an edge that
  stops waiting calls ``translate``, which makes them ``StoreLocked``;
- errors that say nothing about the file (an SQL error, a constraint, a misuse) pass
  unchanged: they are bugs or bad input, handled where they arise;
- the original apsw exception is the ``__cause__`` of the one raised; messages are one line.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import apsw

from localmem.errors import (
    NotAStore,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreLocked,
    StoreReadOnly,
    StoreUnavailable,
)

BUSY = (apsw.BusyError, apsw.LockedError)
# EFBIG: a per-process file-size limit (ulimit -f), which SQLite reports as an I/O error
FULL_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "the file size limit was reached",
}


@contextmanager
def faults(path: str | Path, conn: apsw.Connection | None = None) -> Iterator[None]:
    """Raise the named ``StoreError`` for an apsw error about the database ``path`` met
    inside (``conn``: the connection it was met on, for the OS error and why it is
    read-only); anything else passes unchanged."""
    try:
        yield
    except BUSY:
        raise
    except apsw.Error as exc:
        named = translate(exc, path, os_errno=_system_errno(conn), readonly_reason=readonly_reason_of(conn))
        if named is None:
            raise
        raise named from exc


def translate(
    exc: apsw.Error, path: str | Path, *, os_errno: int = 0, readonly_reason: str | None = None
) -> StoreError | None:
    """The named error for ``exc``, met using the database ``path``; None when ``exc``
    says nothing about the file (it is left as it is)."""
    where = str(path) or "the in-memory database"
    said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, apsw.FullError) or (isinstance(exc, apsw.IOError) and os_errno in FULL_ERRNOS):
        # not ``said``: a failed backup step carries the source's message ("not an error")
        why = FULL_ERRNOS.get(os_errno, FULL_ERRNOS[errno.ENOSPC])
        return StoreFull(f"disk full writing {where}: {why}", path=where)
    if isinstance(exc, apsw.ReadOnlyError):
        folder_said = getattr(exc, "extendedresult", 0) == apsw.SQLITE_READONLY_DIRECTORY
        why = readonly_reason or why_read_only(where, folder_said) or said
        return StoreReadOnly(f"{where} is read-only ({why})", path=where)
    if isinstance(exc, (apsw.CantOpenError, apsw.PermissionsError)):
        return StoreUnavailable(f"cannot open {where}: {why_cannot_open(where) or said}", path=where)
    if isinstance(exc, apsw.NotADBError):
        return NotAStore(f"{where} is not a localmem database (not an SQLite file)", path=where)
    if isinstance(exc, apsw.CorruptError):
        return StoreCorrupt(f"the store at {where} is damaged ({said}); {restore_hint()}", path=where)
    if isinstance(exc, BUSY):
        return StoreLocked(f"{where} stayed locked by another process; try again in a moment", path=where)
    if isinstance(exc, apsw.IOError):
        detail = os.strerror(os_errno) if os_errno else said
        return StoreUnavailable(f"I/O error on {where}: {detail}", path=where)
    return None


def restore_hint(command: str = "localmem") -> str:
    """The way back from a damaged store as storage can say it (``command``: how to call
    localmem for this store). Never ``localmem backup``: that copies the damage. The command
    line names the store's newest rolling backup instead where it has one
    (``localmem.cli.recovery``)."""
    return f"restore a backup over it with `{command} restore BACKUP --force`"


def why_read_only(path: str | Path, folder_said: bool = False, *, database: bool = True) -> str | None:
    """Why ``path`` cannot be written, as the file system says (None: it does not say;
    ``folder_said``: SQLite reported the folder, SQLITE_READONLY_DIRECTORY; ``database``:
    a live database, whose folder SQLite needs for its companion files)."""
    p = Path(path).absolute()
    folder = p.parent
    if _read_only_fs(folder):
        return f"it is on a read-only file system ({folder})"
    reasons: list[str] = []
    if p.exists() and not os.access(p, os.W_OK):
        reasons.append("the file is not writable")
    if folder_said or not os.access(folder, os.W_OK):
        needs = ": SQLite needs it for the -wal/-shm files" if database else ""
        reasons.append(f"the folder {folder} is not writable{needs}")
    return "; ".join(reasons) or None


def why_cannot_open(path: str | Path) -> str | None:
    p = Path(path).absolute()
    if p.is_dir():
        return "it is a folder, not a database file"
    if not p.parent.is_dir():
        return f"the folder {p.parent} does not exist"
    if p.exists() and not os.access(p, os.R_OK):
        return "no permission to read it"
    if not p.exists():
        if not os.access(p.parent, os.W_OK):
            return f"the folder {p.parent} is not writable, so the file cannot be made there"
        return "no such file"
    return why_read_only(p)


def readonly_uri(path: str | Path) -> str | None:
    """A ``file:`` URI that reads ``path`` where its folder cannot be written (see the
    module docstring); None where the folder is writable or there is no such file."""
    p = Path(path).absolute()
    if not p.is_file() or os.access(p.parent, os.W_OK):
        return None
    wal = Path(f"{p}-wal")
    holds_commits = wal.is_file() and wal.stat().st_size > 0  # immutable=1 would not read them
    return f"file:{quote(str(p))}?{'mode=ro' if holds_commits else 'immutable=1'}"


def readonly_reason_of(conn: apsw.Connection | None) -> str | None:
    """Why ``conn`` was opened read-only, when ``db.connect`` knew (``readonly_reason``)."""
    reason = getattr(conn, "readonly_reason", None)
    return reason if isinstance(reason, str) else None


def _system_errno(conn: apsw.Connection | None) -> int:
    if conn is None:
        return 0
    try:
        return int(conn.system_errno)
    except apsw.Error:  # closed
        return 0


def _read_only_fs(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False
