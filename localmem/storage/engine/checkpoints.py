"""Whether Litestream replicates a store right now, so that localmem leaves checkpoints to it.

Litestream's rule for applications: while it replicates, it alone checkpoints the WAL (its
tips: turn the application's auto-checkpoint off under write load). Measured here
(``bench replicate``, docs/benchmarks.md), this did not change how often Litestream 0.5.17
ships a damaged replica (damage-free runs: 1 of 3 with the writers' auto-checkpoint on, 2 of
7 with it off); it is kept because it is Litestream's rule.

Whoever starts Litestream for a store (``replica.start_litestream``) writes a marker beside
the store naming Litestream's pid. Before each write transaction a connection looks at the
marker (one ``stat`` when there is none) and sets its own ``wal_autocheckpoint``: 0 while
that process lives, SQLite's default again once it is gone. So a store whose Litestream
was killed, stopped or never started still checkpoints itself and its WAL stays bounded.

``$LOCALMEM_WAL_AUTOCHECKPOINT`` (pages; 0 = never) overrides both, for a user who runs
Litestream some other way, and for ``bench replicate --app-checkpoints``.

Invariants: the marker is written whole (temp file + rename); a marker whose process is gone
(or, on Linux, is no longer a ``litestream`` process: a reused pid) counts as absent.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_AUTOCHECKPOINT = 1000  # SQLite's SQLITE_DEFAULT_WAL_AUTOCHECKPOINT, in pages


def marker(db: Path) -> Path:
    return db.parent / f".{db.name}-litestream.pid"


def announce(db: Path, pid: int) -> None:
    path = marker(db)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(f"{pid}\n", "utf-8")
    os.replace(tmp, path)


def withdraw(db: Path, pid: int) -> None:
    """Remove the marker if it still names ``pid`` (a later Litestream may have replaced it)."""
    if _pid(marker(db)) == pid:
        marker(db).unlink(missing_ok=True)


def crashed(db: Path) -> bool:
    """A marker naming a process that is gone: the last Litestream for ``db`` did not exit
    through ``withdraw`` (killed, or its machine stopped)."""
    pid = _pid(marker(db))
    return pid is not None and not _alive(pid)


def live(db: str | Path) -> bool:
    pid = _pid(marker(Path(db)))
    return pid is not None and _alive(pid)


def autocheckpoint_pages(db: str | Path) -> int:
    forced = os.environ.get("LOCALMEM_WAL_AUTOCHECKPOINT", "").strip()
    if forced.isdigit():
        return int(forced)
    return 0 if live(db) else DEFAULT_AUTOCHECKPOINT


def _pid(path: Path) -> int | None:
    try:
        text = path.read_text("utf-8").strip()
    except (FileNotFoundError, NotADirectoryError, PermissionError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    if not Path("/proc/self").exists():  # no procfs (macOS): the pid is all there is to go on
        return True
    try:
        return b"litestream" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False  # exited meanwhile
