"""Rolling backups (storage/copies/rolling.py) on real stores in temp dirs, the schedule driven
by an injected clock: a week and more of simulated days keeps the retention, every kept
backup opens and passes integrity_check (an encrypted store's too, with its key file, and
never without it); the pure rules (due, doomed, room) on their edges; the folder and files
private; a disk too full skips and says so; a killed take's partial file is removed; the
store is never opened through Python while this process holds it."""

from __future__ import annotations

import builtins
import io
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import apsw
import pytest

from localmem.config.settings import BackupsParams
from localmem.records import TurnIn
from localmem.storage.copies import rolling
from localmem.storage.copies.rolling import Backup
from localmem.storage.engine import keys
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)
KEY = "correct horse battery staple"


def day_of(store: Store, d: int) -> None:
    store.write(
        [TurnIn(f"Day {d} note {j} about subject {d * 3 + j}.", speaker="Ann") for j in range(3)], session=f"d{d}"
    )


def opened(path: Path, key: str | None) -> tuple[list[str], int]:
    """integrity_check and the turn count of a backup, opened as a person would."""
    conn = apsw.Connection(str(path))
    try:
        if key is not None:
            keys.apply_key(conn, key)
        check = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
        (turns,) = conn.execute("SELECT count(*) FROM turns").fetchone() or (0,)
        return check, int(turns)
    finally:
        conn.close()


def simulate(db: Path, days: int, params: BackupsParams, *, every: timedelta = timedelta(hours=6)) -> list[str]:
    """``days`` simulated days, the schedule looked at every ``every``, three turns written a
    day; the names of the backups taken, in order."""
    taken = []
    with Store(db, embedder=HashEmbedder()) as store:  # held open all along, as a daemon holds it
        now = T0
        for d in range(days):
            day_of(store, d)
            end = now + DAY
            while now < end:
                done = rolling.tick(db, params, now)
                assert done.skipped is None
                if done.taken is not None:
                    taken.append(done.taken.path.name)
                now += every
    return taken


@pytest.mark.parametrize("encrypted", [False, True])
def test_a_week_of_simulated_days_keeps_the_retention(
    encrypted: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if encrypted:
        if not keys.encryption_available():
            pytest.skip("needs apsw-sqlite3mc")
        key_file = tmp_path / "store.key"
        key_file.write_text(KEY + "\n", "utf-8")
        key_file.chmod(0o600)
        monkeypatch.setenv(keys.KEY_FILE_ENV, str(key_file))
    db = tmp_path / "memory.db"
    params = BackupsParams(keep=4, min_free_mb=0)
    taken = simulate(db, 9, params)
    assert keys.is_encrypted(db) is encrypted
    # one a day (looked at four times a day, interval 24 h), named by the simulated UTC time
    assert taken == [(T0 + d * DAY).strftime("%Y%m%dT%H%M%SZ.db") for d in range(9)]
    kept = rolling.list_backups(db)
    assert [b.path.name for b in kept] == taken[::-1][:4]  # the newest four, newest first
    assert rolling.latest(db) == kept[0].path
    for b in kept:
        day = (b.taken - T0).days
        assert opened(b.path, KEY if encrypted else None) == (["ok"], 3 * (day + 1))  # what that day held
        assert (b.turns, b.sessions, b.encrypted) == (3 * (day + 1), day + 1, encrypted)
        assert b.path.stat().st_mode & 0o777 == 0o600
        assert b.path.with_suffix(".json").stat().st_mode & 0o777 == 0o600
        if encrypted:
            assert keys.file_state(b.path) == "encrypted" and b"Day " not in b.path.read_bytes()
    home = rolling.folder(db)
    assert home.stat().st_mode & 0o777 == 0o700 and home.parent.stat().st_mode & 0o777 == 0o700
    assert sorted(p.name for p in home.iterdir() if not p.name.startswith(".")) == sorted(
        [b.path.name for b in kept] + [b.path.with_suffix(".json").name for b in kept]
    )
    if encrypted:  # without the key a backup does not open
        conn = apsw.Connection(str(kept[0].path))
        with pytest.raises(apsw.NotADBError):
            conn.execute("SELECT count(*) FROM turns").fetchall()
        conn.close()


def test_a_lowered_keep_and_a_size_cap_prune_but_never_the_newest(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    simulate(db, 5, BackupsParams(keep=7, min_free_mb=0), every=DAY)
    assert len(rolling.list_backups(db)) == 5
    with Store(db, embedder=HashEmbedder()):
        done = rolling.tick(db, BackupsParams(keep=2, min_free_mb=0), T0 + 4 * DAY + timedelta(hours=1))
    assert done.taken is None and len(done.pruned) == 3  # not due; retention applied all the same
    assert [b.taken for b in rolling.list_backups(db)] == [T0 + 4 * DAY, T0 + 3 * DAY]
    # a cap below one backup's size: only the newest stays
    with Store(db, embedder=HashEmbedder()):
        rolling.tick(db, BackupsParams(keep=7, max_total_mb=0.01, min_free_mb=0), T0 + 5 * DAY)
    assert [b.taken for b in rolling.list_backups(db)] == [T0 + 5 * DAY]


def test_a_disk_too_full_skips_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    Store(db, embedder=HashEmbedder()).close()
    done = rolling.tick(db, BackupsParams(min_free_mb=1e12), T0)  # a petabyte must stay free
    assert done.taken is None and done.skipped is not None and "the disk is too full" in done.skipped
    assert "backups.min_free_mb" in done.skipped and rolling.list_backups(db) == []


def test_a_killed_takes_partial_is_removed_and_another_process_lock_is_respected(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    Store(db, embedder=HashEmbedder()).close()
    home = rolling.folder(db)
    home.mkdir(parents=True)
    dead = home / ".20260301T090000Z.db.partial-999999999"  # no such pid
    dead.write_bytes(b"half a copy")
    assert rolling.tick(db, BackupsParams(min_free_mb=0), T0).taken is not None
    assert not dead.exists()
    import fcntl

    fd = os.open(home / ".lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another process taking one: this look takes none
        done = rolling.tick(db, BackupsParams(min_free_mb=0), T0 + 2 * DAY)
        assert done.taken is None and done.skipped == "another process is taking one"
    finally:
        os.close(fd)


def test_the_store_is_never_opened_through_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that holds the store takes the backups: opening and closing any of the
    store's files through Python would drop SQLite's POSIX locks (issue 49)."""
    db = tmp_path / "memory.db"
    store = Store(db, embedder=HashEmbedder())
    day_of(store, 0)
    touched: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def spy_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        touched.append(str(file))
        return real_open(file, *args, **kwargs)

    def spy_os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        touched.append(str(path))
        return real_os_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(io, "open", spy_open)  # pathlib's
    monkeypatch.setattr(os, "open", spy_os_open)
    try:
        assert rolling.tick(db, BackupsParams(min_free_mb=0), T0).taken is not None
        rolling.list_backups(db)
    finally:
        monkeypatch.undo()
        store.close()
    store_files = {str(db) + suffix for suffix in ("", "-wal", "-shm", "-journal")}
    assert touched and not store_files & set(touched)


def b(day: int, size: int = 10) -> Backup:
    return Backup(Path(f"/x/{day}.db"), T0 + day * DAY, size)


def test_the_rules_on_their_edges() -> None:
    interval = timedelta(hours=24)
    assert rolling.due([], T0, interval)
    assert not rolling.due([b(0)], T0 + interval - timedelta(seconds=1), interval)
    assert rolling.due([b(0)], T0 + interval, interval)
    assert rolling.due([b(5)], T0, interval)  # only one dated after now (a clock set back): one is taken
    assert not rolling.due([b(5), b(0)], T0 + timedelta(hours=1), interval)
    week = [b(d) for d in range(7)]
    assert rolling.doomed(week, keep=7) == []
    assert [x.taken for x in rolling.doomed(week, keep=3)] == [T0 + d * DAY for d in (3, 2, 1, 0)]
    assert [x.taken for x in rolling.doomed(week, keep=1)] == [T0 + d * DAY for d in range(5, -1, -1)]
    assert len(rolling.doomed(week, keep=7, max_total=35)) == 4  # 3 x 10 bytes fit, the fourth would not
    assert rolling.doomed([b(0, size=100)], keep=1, max_total=1) == []  # the newest, even too big
    assert rolling.room(free=100, need=40, min_free=60) and not rolling.room(free=100, need=41, min_free=60)


def test_a_store_elsewhere_has_its_own_folder_and_latest_is_none_without_backups(tmp_path: Path) -> None:
    a, c = tmp_path / "a" / "memory.db", tmp_path / "c" / "memory.db"
    assert rolling.folder(a) != rolling.folder(c)
    assert rolling.folder(a).name.startswith("memory-") and rolling.folder(a).parent.name == "backups"
    assert str(rolling.folder(a)).startswith(os.environ["XDG_DATA_HOME"])
    assert rolling.latest(a) is None and rolling.list_backups(a) == []
