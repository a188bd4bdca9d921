"""Restoring a store from a replica: Litestream's (newest, or as of a time) or encrypted
snapshots, a backup file (``localmem backup``'s, a rolling backup), or an age-encrypted one.

Invariants: nothing is put at PATH before it passes ``integrity_check``; a Litestream restore
whose newest state fails the check is, with ``fallback``, replaced by the newest earlier
transaction that passes (and the result says so); a damaged file is kept aside, never
installed; PATH is left as it was on any failure; a store that is replaced is first copied
beside it (``.NAME.before-restore-<time>``) and the result says what it held.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import apsw

from localmem.errors import InputError, LocalmemError, NotFound
from localmem.storage.copies import age as agecrypt
from localmem.storage.copies.backup import copy
from localmem.storage.copies.convert import hold_alone, litestream_state
from localmem.storage.copies.replica import check_url, file_dir, litestream_binary, shown, snapshots
from localmem.storage.engine import checkpoints as replica_live
from localmem.storage.engine import keys
from localmem.util import private


def restore(
    url: str, out: Path, *, timestamp: str | None = None, force: bool = False, fallback: bool = True
) -> dict[str, object]:
    """Rebuild a store at ``out`` from the replica at ``url`` (as of ``timestamp``, ISO 8601
    UTC, when given), or from an age-encrypted backup file; checked with ``integrity_check``
    before it is renamed into place. A Litestream restore that fails the check is, with
    ``fallback``, replaced by the newest earlier transaction that passes it (``_fall_back``;
    the result's ``fell_back`` says which and how far back), never installed damaged.
    ``force`` replaces an existing ``out`` only while no other process has it open and
    Litestream does not replicate it (held exclusively until the new file is in place)."""
    source_file = Path(url) if "://" not in url and Path(url).is_file() else None
    if source_file is not None and out.exists() and os.path.samefile(source_file, out):
        raise InputError("is the store itself: give a backup of it", path=str(source_file))
    if source_file is None and "://" not in url:
        raise InputError("no such backup file (a replica is a URL: file:///…, sftp://…, s3://…)", path=url)
    if source_file is None:
        check_url(url)
    if out.exists() and not force:
        raise InputError("already exists; pass --force to replace it", path=str(out))
    if not out.parent.is_dir():
        raise InputError("its folder does not exist", path=str(out))
    held = hold_alone(out) if out.exists() else None
    try:
        kept: list[dict[str, object]] = []  # filled just before the new store goes in (``_install``)
        before = (lambda: kept.append(_keep_aside(out, held))) if out.exists() else (lambda: None)
        result = _restore(url, out, source_file, timestamp, fallback, before)
    finally:
        if held is not None:
            held.close()
    if kept:
        result["replaced"] = kept[0]
    # a replica's position in the file replaced means nothing now: it starts afresh
    shutil.rmtree(litestream_state(out), ignore_errors=True)
    replica_live.release(out)
    return result


def _restore(
    url: str, out: Path, source_file: Path | None, timestamp: str | None, fallback: bool, before: Callable[[], None]
) -> dict[str, object]:
    when = _parse_time(timestamp) if timestamp else None
    tmp = out.with_name(f".{out.name}.restore-partial")
    aside = out.with_name(f".{out.name}.restore-damaged")  # where a damaged restore is kept
    fell_back: dict[str, object] | None = None
    if source_file is not None:
        return _restore_file(source_file, out, tmp, before)
    _remove(tmp)
    folder = file_dir(url) if urlparse(url).scheme == "file" else None
    found = snapshots(folder) if folder is not None and folder.is_dir() else []
    try:
        if found:
            chosen = [s for s in found if when is None or s.at <= when]
            if not chosen:
                raise NotFound(f"no snapshot in {folder} at or before {timestamp}")
            private.reserve(tmp)  # 600 whatever the umask; copyfile keeps the mode of the file it empties
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
            turns, fell_back = _fall_back(url, tmp, aside, when, exc)
        _install(tmp, out, before)
    except _Damaged as exc:
        # Litestream 0.5.x can restore a file that fails integrity_check (its issues
        # #1164, #1309): never installed; kept aside for a look, the store left as it was.
        os.replace(tmp, aside)
        _remove(tmp, sidecars_only=True)
        raise LocalmemError(
            f"the store restored from {shown(url)} failed its integrity check ({exc}); it was not installed "
            f"and is kept at {aside}; restore an earlier point with --timestamp"
        ) from None
    except BaseException:
        _remove(tmp)
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
    proc = subprocess.run(args, capture_output=True, text=True, check=False, env=keys.child_env())
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise NotFound(f"litestream restore from {shown(url)} failed: {last}")
    private.restrict(tmp)  # Litestream made it with its own mode (the umask's); ours are 600


def _transactions(url: str, when: datetime | None) -> list[tuple[int, str]]:
    """(TXID, time) of every point the replica can restore to, oldest first."""
    args = [str(litestream_binary()), "ltx", "-level", "all", "-json", url]
    proc = subprocess.run(args, capture_output=True, text=True, check=False, env=keys.child_env())
    if proc.returncode != 0:
        return []
    points: dict[int, str] = {}
    for f in json.loads(proc.stdout or "[]"):
        at = str(f.get("timestamp", ""))
        if when is None or not at or _parse_time(at) <= when:
            points[int(str(f["max_txid"]), 16)] = at
    return sorted(points.items())


def _fall_back(
    url: str, tmp: Path, aside: Path, when: datetime | None, damaged: _Damaged
) -> tuple[int, dict[str, object]]:
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
    probe, clean = tmp.with_name(tmp.name + "-probe"), tmp.with_name(tmp.name + "-clean")
    tries = 0
    try:
        while lo <= hi:
            mid = (lo + hi) // 2
            tries += 1
            _remove(probe)
            try:
                _litestream_restore(url, probe, txid=candidates[mid][0])
                turns = _check(probe)
            except (_Damaged, NotFound, apsw.Error):
                hi = mid - 1
                continue
            best = (mid, turns)
            os.replace(probe, clean)
            lo = mid + 1
    except BaseException:
        clean.unlink(missing_ok=True)
        raise
    finally:
        _remove(probe)
    if best is None:
        raise damaged
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


def _keep_aside(out: Path, held: apsw.Connection | None) -> dict[str, object]:
    """A copy of the store a restore is about to replace, beside it
    (``.NAME.before-restore-<UTC time>``, 0600): through SQLite from the exclusive hold when
    the store opens (the key kept), else the bytes as they are (a damaged store, which no
    connection of this process holds). What it held, and where, for the restore's report."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1, 1000):
        aside = out.with_name(f".{out.name}.before-restore-{stamp}" + (f"-{n}" if n > 1 else ""))
        if private.reserve(aside):
            break
        if not aside.exists():
            raise LocalmemError(f"cannot write {aside} beside the store (to keep the store this restore replaces)")
        # taken by a restore in the same second: a kept store is never written over
    else:
        raise LocalmemError(f"{out}: too many stores kept beside it this second")
    if held is not None:
        key = keys.resolve_key(out) if keys.is_encrypted(out) else None
        copy(held, aside, None, key=key)
        counts: list[Any] = held.execute(
            "SELECT (SELECT count(*) FROM turns), (SELECT count(*) FROM sessions)"
        ).fetchall()
        turns, sessions = (int(counts[0][0]), int(counts[0][1])) if counts else (0, 0)
        return {"kept_at": str(aside), "turns": turns, "sessions": sessions}
    shutil.copyfile(out, aside)  # not a database SQLite opens: nothing of this process holds it
    return {"kept_at": str(aside), "turns": None, "sessions": None, "damaged": True}


def _restore_file(source: Path, out: Path, tmp: Path, before: Callable[[], None]) -> dict[str, object]:
    """A store from a backup file: a store file as ``localmem backup`` writes it (plaintext,
    or encrypted with the store's key), copied through SQLite's backup API; or an
    age-encrypted one (``backup --encrypt-to``), decrypted in memory first. The result is
    what the backup held (encrypted if the store was)."""
    if not agecrypt.is_age(source):
        return _restore_store_file(source, out, tmp, before)
    fd, plain = agecrypt.decrypt_to_memory(source, agecrypt.identities())
    try:
        with open(plain, "rb") as src, private.open_private(tmp, "wb") as dst:  # 600 whatever the umask
            shutil.copyfileobj(src, dst, 1 << 20)
            dst.flush()
            os.fsync(dst.fileno())
        turns = _check(tmp)
        _install(tmp, out, before)
    except _Damaged as exc:
        tmp.unlink(missing_ok=True)  # the backup file itself is the copy kept
        raise LocalmemError(f"the store in {source} failed its integrity check ({exc}); it was not installed") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
    return {"path": str(out), "from": str(source), "turns": turns, "encrypted": keys.is_encrypted(out)}


def _restore_store_file(source: Path, out: Path, tmp: Path, before: Callable[[], None]) -> dict[str, object]:
    state = keys.file_state(source)
    if state == "new":
        raise InputError("is empty: not a backup", path=str(source))
    try:
        # read-write when it may: a backup's header says WAL, and a read-only reader would
        # leave a -wal and -shm beside it that only a writer's close removes
        src = apsw.Connection(str(source), flags=apsw.SQLITE_OPEN_READWRITE)
    except apsw.Error:
        try:
            src = apsw.Connection(str(source), flags=apsw.SQLITE_OPEN_READONLY)
        except apsw.Error as exc:
            raise InputError(f"cannot open: {exc}", path=str(source)) from exc
    try:
        try:
            encrypted = keys.unlock(src, source)  # its key: the store's own sources (--key-file, LOCALMEM_KEY)
            src.execute("SELECT count(*) FROM turns").fetchall()
        except (apsw.NotADBError, apsw.SQLError) as exc:
            raise InputError(
                "is neither a replica URL, an age-encrypted backup nor a localmem store (a `localmem backup` file)",
                path=str(source),
            ) from exc
        _remove(tmp)
        copy(src, tmp, None, key=keys.resolve_key(source) if encrypted else None)
    finally:
        src.close()
    try:
        turns = _check(tmp)
        _install(tmp, out, before)
    except _Damaged as exc:
        _remove(tmp)
        raise LocalmemError(f"the store in {source} failed its integrity check ({exc}); it was not installed") from None
    except BaseException:
        _remove(tmp)
        raise
    return {"path": str(out), "from": str(source), "turns": turns, "encrypted": keys.is_encrypted(out)}


def _install(tmp: Path, out: Path, before: Callable[[], None]) -> None:
    """Put the checked copy ``tmp`` at ``out`` (``before``: keeps the store it replaces)."""
    before()
    _remove(out, sidecars_only=True)
    os.replace(tmp, out)


def _remove(path: Path, *, sidecars_only: bool = False) -> None:
    """``path`` and its SQLite ``-wal`` / ``-shm`` files, or only those."""
    for p in (() if sidecars_only else (path,)) + (Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)


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
