"""Whether Litestream replicates a store, so that localmem leaves every checkpoint to it.

Litestream follows the WAL as SQLite writes it; a checkpoint it did not make while it was
down moves pages it has not shipped into the database file, and on restart it resumes from a
position that no longer exists (its troubleshooting page; upstream issue #752). Measured with
``bench replicate`` (docs/benchmarks.md, "Replicas that restore whole"): localmem's writers used
to take checkpoints back as soon as Litestream's process was gone (auto-checkpoint, and
SQLite's checkpoint when the last connection closes), and that is what damaged the newest
replicated state after a kill. So the rule is now: while a replica is configured, whether its
Litestream is alive or was killed and has not been restarted, localmem never checkpoints:
no auto-checkpoint, no checkpoint on close (``SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE``). Only
Litestream checkpoints, when it runs again.

Whoever starts Litestream for a store (``replica.start_litestream``) writes a marker beside
the store naming Litestream's pid; a clean stop (``withdraw``) removes it, and the store
checkpoints itself again. A marker whose process is gone (a kill -9, a machine stopped) is
*held*: the WAL grows until ``localmem replicate`` runs again (``doctor`` says so), or until
``localmem replicate --release`` says the replica is given up.

``$LOCALMEM_WAL_AUTOCHECKPOINT`` (pages; 0 = never) overrides the auto-checkpoint, for a user
who runs Litestream some other way, and for ``bench replicate --app-checkpoints``.

Invariants: the marker is written whole (temp file + rename); a marker whose process is gone
(or, on Linux, is no longer a ``litestream`` process: a reused pid) counts as crashed, still
held; only ``withdraw`` (or ``release``) takes it away.
"""

from __future__ import annotations

import os
from pathlib import Path

from localmem.util import private

DEFAULT_AUTOCHECKPOINT = 1000  # SQLite's SQLITE_DEFAULT_WAL_AUTOCHECKPOINT, in pages


def marker(db: Path) -> Path:
    return db.parent / f".{db.name}-litestream.pid"


def announce(db: Path, pid: int) -> None:
    path = marker(db)
    tmp = path.with_name(path.name + ".part")
    private.write_file(tmp, f"{pid}\n")  # 600, as every file localmem makes
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


def held(db: str | Path) -> bool:
    """A replica is configured for ``db``: its Litestream runs, or was killed and is to be
    started again. localmem takes no checkpoint while it is."""
    return _pid(marker(Path(db))) is not None


def release(db: Path) -> bool:
    """Give up the replica of ``db`` (``replicate --release``): the store checkpoints itself again."""
    existed = marker(db).exists()
    marker(db).unlink(missing_ok=True)
    return existed


def autocheckpoint_pages(db: str | Path) -> int:
    forced = os.environ.get("LOCALMEM_WAL_AUTOCHECKPOINT", "").strip()
    if forced.isdigit():
        return int(forced)
    return 0 if held(db) else DEFAULT_AUTOCHECKPOINT


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
