"""Rolling backups of a store: online copies taken on a schedule by a process that already
holds the store (``localmem.resident.backups``: the socket daemon, the MCP server, ``localmem
serve``), or at once by ``localmem backups --now``, kept to a retention (``[backups]``).

Where: one folder per store, ``<user data dir>/backups/<store name>-<12 hex of the sha256 of
the store's real path>/`` (``folder``): out of the store's own folder (which may be a synced or
shared one, and which tools list), on the user's disk, made 0700 level by level. Names: the
UTC time it was taken, ``20260301T090000Z.db``, each with ``20260301T090000Z.json`` beside it
(turns, sessions, whether encrypted, the store's path: for the list, without a key).

Invariants:
- a backup is SQLite's backup API (``backup.copy``: every page of one read snapshot, encrypted
  with the store's key when the store is) from a read-only connection of its own, outside any
  lock a caller holds; it appears under its name only complete and checked
  (``integrity_check``), mode 0600; a killed take leaves a ``.<name>.partial-<pid>`` that a
  later take removes;
- the store is opened only through SQLite, never through ``open()``: closing any descriptor
  of a file drops every POSIX lock the process holds on it, SQLite's included, and these
  processes hold the store open (issue 49). Whether it is encrypted is asked of SQLite (a
  read without a key fails), not read from its header;
- the schedule is pure, the clock passed in: ``due`` (the newest is older than the
  interval), ``doomed`` (beyond ``keep``, or beyond ``max_total_mb``, oldest first; never the
  newest), ``room`` (the disk keeps ``min_free_mb`` free after the copy); ``tick`` applies them;
- one take at a time per store across processes (``flock`` on the folder's ``.lock``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import platformdirs

from localmem.config.settings import APP, BackupsParams
from localmem.errors import NotFound
from localmem.storage.copies.backup import install_copy
from localmem.storage.engine import faults, keys
from localmem.storage.engine.retry import busy_timeout_ms

try:
    import fcntl
except ImportError:  # Windows: no flock; one process per store takes them there
    fcntl = None  # type: ignore[assignment]

STAMP = "%Y%m%dT%H%M%SZ"
NAME = re.compile(r"^(\d{8}T\d{6}Z)\.db$")
MB = 1024 * 1024
FILE_MODE, DIR_MODE = 0o600, 0o700


@dataclass(frozen=True)
class Backup:
    path: Path
    taken: datetime  # UTC, from the name
    bytes: int
    turns: int | None = None  # None: no record beside it (a file put there by hand)
    sessions: int | None = None
    encrypted: bool | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "taken": self.taken.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "bytes": self.bytes,
            "turns": self.turns,
            "sessions": self.sessions,
            "encrypted": self.encrypted,
        }


@dataclass(frozen=True)
class Tick:
    """What one look at the schedule did: the backup it took, those it deleted, and why it
    took none although one was due (``skipped``)."""

    taken: Backup | None = None
    pruned: list[Backup] = field(default_factory=list)
    skipped: str | None = None


# -- where and what ----------------------------------------------------------------------


def folder(store: str | os.PathLike[str]) -> Path:
    """The store's backup folder (module docstring); nothing is made."""
    real = os.path.realpath(store)
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", Path(real).stem)[:40] or "store"
    return Path(platformdirs.user_data_dir(APP)) / "backups" / f"{stem}-{digest}"


def list_backups(store: str | os.PathLike[str]) -> list[Backup]:
    """The store's backups, newest first (an empty list when it has none)."""
    home = folder(store)
    found = []
    for entry in home.iterdir() if home.is_dir() else ():
        m = NAME.match(entry.name)
        if m is None or not entry.is_file():
            continue
        taken = datetime.strptime(m.group(1), STAMP).replace(tzinfo=UTC)
        found.append(_with_record(entry, taken, entry.stat().st_size))
    return sorted(found, key=lambda b: b.taken, reverse=True)


def latest(store: str | os.PathLike[str]) -> Path | None:
    """The newest backup of the store that exists, or None (``localmem restore --latest``)."""
    have = list_backups(store)
    return have[0].path if have else None


def total_bytes(backups: Sequence[Backup]) -> int:
    return sum(b.bytes for b in backups)


def summary(store: str | os.PathLike[str], params: BackupsParams, now: datetime) -> tuple[str, bool]:
    """One line on the store's backups (``localmem doctor``): how many, the newest's age,
    their disk cost and folder; or that they are off, or none yet. True with it when they
    need a look: on, and the newest older than two intervals (no process took one since)."""
    have = list_backups(store)
    where = folder(store)
    if not params.enabled:
        extra = f"; {len(have)} taken before ({total_bytes(have) / MB:.1f} MB) in {where}" if have else ""
        return f"off (backups.enabled = false){extra}", False
    if not have:
        line = f"none yet: a daemon, the MCP server or `localmem serve` takes one into {where}"
        return f"{line} (or `localmem backups --now`)", False
    age = (now - have[0].taken).total_seconds()
    newest = f"{age / 3600:.1f} h" if age < 2 * 86400 else f"{age / 86400:.0f} days"
    line = (
        f"{len(have)} (keep {params.keep}, every {params.interval_hours:g} h), newest {newest} ago, "
        f"{total_bytes(have) / MB:.1f} MB in {where}"
    )
    late = age > 2 * params.interval_hours * 3600
    return (f"{line}; none taken since: no process held the store (`localmem backups --now`)" if late else line), late


def _with_record(path: Path, taken: datetime, size: int) -> Backup:
    try:
        rec = json.loads(path.with_suffix(".json").read_text("utf-8"))
        return Backup(path, taken, size, int(rec["turns"]), int(rec["sessions"]), bool(rec["encrypted"]))
    except (OSError, ValueError, KeyError, TypeError):  # no record (a file put there by hand): what the file says
        return Backup(path, taken, size, encrypted=keys.file_state(path) == "encrypted")


# -- the schedule: pure, the clock passed in ----------------------------------------------


def due(backups: Sequence[Backup], now: datetime, interval: timedelta) -> bool:
    """Whether a backup is due at ``now``: none yet, or the newest (of those not dated after
    ``now``: a clock set back must not stop them for good) is ``interval`` old."""
    past = [b.taken for b in backups if b.taken <= now]
    return not past or now - max(past) >= interval


def doomed(backups: Sequence[Backup], keep: int, max_total: int = 0) -> list[Backup]:
    """The backups retention deletes: all but the newest ``keep``, and (``max_total`` > 0
    bytes) the older ones from the first that would take the kept ones past it; the newest
    is always kept."""
    ordered = sorted(backups, key=lambda b: b.taken, reverse=True)
    kept = ordered[:1]
    total = total_bytes(kept)
    for i, b in enumerate(ordered[1:], start=1):
        if i >= keep or (max_total > 0 and total + b.bytes > max_total):
            return ordered[i:]
        kept.append(b)
        total += b.bytes
    return []


def room(free: int, need: int, min_free: int) -> bool:
    """Whether a copy of ``need`` bytes leaves at least ``min_free`` of ``free`` bytes."""
    return free - need >= min_free


def tick(store: Path, params: BackupsParams, now: datetime, *, force: bool = False) -> Tick:
    """Look at the schedule at ``now``: take a backup when one is due (``force``: whether or
    not), named by ``now``, then delete what the retention does not keep."""
    if not store.is_file():
        raise NotFound(f"no database at {store}")
    home = folder(store)
    _private_dir(home)
    with _held(home) as ours:
        if not ours:
            return Tick(skipped="another process is taking one")
        _sweep(home)
        have = list_backups(store)
        taken, skipped = None, None
        if force or due(have, now, timedelta(hours=params.interval_hours)):
            need, free = _size(store), shutil.disk_usage(home).free
            dest = home / f"{now.astimezone(UTC).strftime(STAMP)}.db"
            if not room(free, need, int(params.min_free_mb * MB)):
                skipped = (
                    f"the disk is too full: {free / MB:.0f} MB free, the copy needs about {need / MB:.0f} MB "
                    f"and {params.min_free_mb:g} MB must stay free (backups.min_free_mb)"
                )
            elif dest.exists():
                skipped = f"{dest.name} exists already (one a second)"
            else:
                taken = take(store, dest)
                have = [taken, *have]
        pruned = doomed(have, params.keep, int(params.max_total_mb * MB))
        for b in pruned:
            b.path.unlink(missing_ok=True)
            b.path.with_suffix(".json").unlink(missing_ok=True)
        return Tick(taken, pruned, skipped)


# -- one take -----------------------------------------------------------------------------


def take(store: Path, dest: Path) -> Backup:
    """Copy the store to ``dest`` (a new name in its backup folder) and record it there."""
    tmp = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    src, key = _source(store)
    try:
        turns, sessions = install_copy(src, tmp, dest, key=key)  # one snapshot, checked, 600
    finally:
        src.close()
    taken = datetime.strptime(dest.stem, STAMP).replace(tzinfo=UTC)
    done = Backup(dest, taken, dest.stat().st_size, turns, sessions, key is not None)
    record = {**done.to_dict(), "store": os.path.realpath(store), "integrity": "ok"}
    _write_private(dest.with_suffix(".json"), json.dumps(record, indent=1) + "\n")
    return done


def _source(store: Path) -> tuple[apsw.Connection, str | None]:
    """A read-only connection of its own to the store, and the key it took (None: the store
    is plaintext), asked of SQLite: a plaintext store reads without a key; an encrypted one
    fails that read, and is opened again with the store's key (module docstring)."""
    flags = apsw.SQLITE_OPEN_READONLY
    with faults.faults(store):
        conn = apsw.Connection(str(store), flags=flags)
        try:
            conn.set_busy_timeout(busy_timeout_ms())
            conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
            return conn, None
        except apsw.NotADBError:
            conn.close()  # encrypted (or not a database: the keyed read below says which)
        except BaseException:
            conn.close()
            raise
        key = keys.resolve_key(store)
        if key is None:
            raise keys.StoreLocked(f"{store}: {keys.NEEDS_KEY}")
        conn = apsw.Connection(str(store), flags=flags)
        try:
            keys.apply_key(conn, key)
            conn.set_busy_timeout(busy_timeout_ms())
            keys.check_key(conn, str(store))
        except BaseException:
            conn.close()
            raise
        return conn, key


def _size(store: Path) -> int:
    """What a copy of the store will take, about: its file and its WAL (by ``stat``)."""
    wal = Path(f"{store}-wal")
    return store.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _sweep(home: Path) -> None:
    """Remove what a killed take left: ``.<name>.partial-<pid>`` of a process that is gone
    (or a day old: its pid may have been given to another process since)."""
    for entry in home.glob(".*.partial-*"):
        pid = entry.name.rsplit(".partial-", 1)[1].split("-", 1)[0]
        with contextlib.suppress(OSError):
            if not pid.isdigit() or not _alive(int(pid)) or time.time() - entry.stat().st_mtime > 86400:
                entry.unlink()


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # this process takes one at a time: what it left is a failed take's
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: theirs
    return True


@contextlib.contextmanager
def _held(home: Path) -> Iterator[bool]:
    """The folder's ``.lock``, taken without waiting: True while this process holds it."""
    if fcntl is None:
        yield True
        return
    fd = os.open(home / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _private_dir(path: Path) -> None:
    """Make ``path`` and each missing folder above it, mode 0700 whatever the umask; folders
    that exist are left as they are (``util.private.make_private_dir``'s rule)."""
    missing = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for level in reversed(missing):
        try:
            os.mkdir(level, DIR_MODE)
        except FileExistsError:
            continue  # another process made it meanwhile
        os.chmod(level, DIR_MODE)  # a umask such as 277 took the owner's bits too


def _write_private(path: Path, text: str) -> None:
    """Write ``path`` whole (a temporary file renamed over it), mode 0600 whatever the umask."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
