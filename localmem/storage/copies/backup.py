"""An online backup of a store: SQLite's backup API (through apsw) copies every page of
one read snapshot, so the copy is consistent (a set of whole committed transactions)
while other processes go on writing (WAL: readers and the writer do not block each
other).

Invariants: the copy is written to a temporary file next to the destination and renamed
over it only once complete and checked (``PRAGMA integrity_check``), so a destination
path never holds a half-written backup; an existing destination is replaced only when
asked (``force``). A backup that fails (a full or read-only destination) says so naming
the destination and the cause (``faults``), and leaves nothing behind: the temporary
file and its journal are removed. The copy is mode 600 from its creation on, whatever the
umask (``util.private``). The backup of an encrypted store is encrypted with the
store's key (SQLite3MC copies between databases of one format only, and a plaintext copy
would defeat the point).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import apsw

from localmem.errors import InputError, LocalmemError, NotFound, StoreReadOnly
from localmem.storage.engine import db, faults, identity, keys
from localmem.storage.engine.retry import Patience, retry_locked
from localmem.util import private


@dataclass(frozen=True)
class BackupReport:
    source: str
    path: str
    bytes: int
    turns: int
    sessions: int

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def backup(source: Path, dest: Path, *, force: bool = False, patience: Patience | None = None) -> BackupReport:
    """Copy the store at ``source`` to ``dest`` (see the module docstring)."""
    if not source.is_file():
        raise NotFound(f"no database at {source}")
    if dest.is_dir():
        raise InputError("is a folder; give the backup file's path", path=str(dest))
    if dest.exists() and not force:
        raise InputError("already exists; pass --force to replace it", path=str(dest))
    if dest.resolve() == source.resolve():
        raise InputError("is the database itself", path=str(dest))
    if not dest.parent.is_dir():
        raise InputError("its folder does not exist", path=str(dest))
    if not os.access(dest.parent, os.W_OK):
        why = faults.why_read_only(dest, folder_said=True, database=False)
        raise StoreReadOnly(f"cannot write the backup {dest}: {why}", path=str(dest))
    tmp = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    src = db.connect(source)
    key = keys.resolve_key(source) if keys.is_encrypted(source) else None
    try:
        turns, sessions = install_copy(src, tmp, dest, key=key, patience=patience)
    finally:
        src.close()
    return BackupReport(str(source), str(dest), dest.stat().st_size, int(turns), int(sessions))


def install_copy(
    src: apsw.Connection, tmp: Path, dest: Path, *, key: str | None, patience: Patience | None = None
) -> tuple[int, int]:
    """One snapshot of ``src`` written to ``tmp`` (``copy``), checked (``checked``), made 600
    and renamed to ``dest``; its turns and sessions. On any failure nothing is left: neither
    ``tmp`` nor its journal."""
    try:
        copy(src, tmp, patience, dest, key=key)
        turns, sessions = checked(tmp, key, dest)
        for leftover in (Path(f"{dest}-wal"), Path(f"{dest}-shm")):  # of a replaced database
            leftover.unlink(missing_ok=True)
        private.restrict(tmp)  # made 600 by ``copy``; a leftover of a killed run with this pid may not be
        os.replace(tmp, dest)
    except BaseException:
        for part in (tmp, *(Path(f"{tmp}{suffix}") for suffix in ("-journal", "-wal", "-shm"))):
            part.unlink(missing_ok=True)
        raise
    return turns, sessions


def checked(tmp: Path, key: str | None, dest: Path) -> tuple[int, int]:
    """The turns and sessions of the copy ``tmp`` (keyed with ``key``), once its
    ``integrity_check`` says ok; a failure names ``dest``, the file asked for."""
    out = apsw.Connection(str(tmp))
    try:
        with faults.faults(dest, out):
            if key is not None:
                keys.apply_key(out, key)
            check = [str(r[0]) for r in out.execute("PRAGMA integrity_check")]
            if check != ["ok"]:
                raise LocalmemError(f"the backup failed its integrity check: {'; '.join(check[:5])}")
            row = out.execute("SELECT (SELECT count(*) FROM turns), (SELECT count(*) FROM sessions)").fetchone()
    finally:
        out.close()
    return (int(row[0]), int(row[1])) if row is not None else (0, 0)


def copy(
    src: apsw.Connection, tmp: Path, patience: Patience | None, dest: Path | None = None, *, key: str | None = None
) -> None:
    """All pages of one snapshot of ``src`` into a new file ``tmp``, in one step (keyed
    with ``key``, the source's, when it is encrypted); a failure to write it is a named
    error about ``dest`` (the file the user asked for)."""
    named = dest or tmp
    private.reserve(tmp)  # 600 before SQLite fills it (and its journal takes that mode), whatever the umask

    def step() -> None:
        out = apsw.Connection(str(tmp))
        try:
            if key is not None:
                keys.apply_key(out, key)
            # the step's error is the destination's (apsw's words are the source's: "not an error")
            with faults.faults(named, out), out.backup("main", src, "main") as b:
                b.step(-1)  # every page at once: one read transaction, one consistent snapshot
            with faults.faults(named, out):
                # a copy is another store: copied back over a live store by hand, its own
                # header stamp shows the holders of that store it is not theirs (engine.identity)
                out.execute(f"PRAGMA application_id = {identity.new_nonce()}")
        finally:
            out.close()

    try:
        retry_locked(step, waits=()) if patience is None else patience(step)
    except OSError as exc:
        raise InputError(f"cannot write the backup: {exc}", path=str(named)) from exc
