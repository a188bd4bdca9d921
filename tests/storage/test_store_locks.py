"""A process that holds a store keeps SQLite's locks on it: localmem reads the store's first
bytes through SQLite's unix VFS (``engine.fileread``), whose closes never drop a POSIX lock,
where a Python ``open`` and ``close`` drops every lock the process holds on the file
(SQLite's "How To Corrupt" §2.2, the cause of issue 49's lost turns). Checked on the locks
the kernel lists (``/proc/locks``), with a control that shows the Python way loses them; the
open guard refuses and logs localmem code that opens a held store; a store replaced under a
process (renamed over, or a backup copied over it in place) is seen as replaced and closed
without a checkpoint into the new file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from localmem.resident import unix
from localmem.storage.copies.backup import backup
from localmem.storage.engine import db, fileread, keys, openguard
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder, session

linux_only = pytest.mark.skipif(not Path("/proc/locks").exists(), reason="reads the kernel's lock list")


def my_locks(path: Path) -> list[str]:
    ino = os.stat(path).st_ino
    with open("/proc/locks", encoding="ascii") as fh:
        return [line for line in fh if f":{ino} " in line and line.split()[4] == str(os.getpid())]


@pytest.fixture
def held(tmp_path: Path) -> tuple[Path, apsw.Connection]:
    path = tmp_path / "m.db"
    conn = db.connect(path)
    conn.execute("CREATE TABLE t(x); INSERT INTO t VALUES (1)")
    assert my_locks(path), "a WAL connection holds a shared lock on its database file"
    return path, conn


@linux_only
def test_reading_the_header_through_the_vfs_keeps_the_locks(held: tuple[Path, apsw.Connection]) -> None:
    path, conn = held
    before = my_locks(path)
    assert keys.file_state(path) == "plain"
    assert fileread.read_head(path, 16) == keys.SQLITE_MAGIC
    second = db.connect(path)  # every connect reads the header (keys.unlock)
    second.close()
    assert my_locks(path) == before
    conn.close()


@linux_only
def test_the_python_way_drops_them(held: tuple[Path, apsw.Connection]) -> None:
    # the control: what the daemon's plaintext check did before (a test that can fail)
    path, conn = held
    with open(path, "rb") as fh:
        fh.read(16)
    assert my_locks(path) == []
    conn.close()


def test_the_guard_refuses_localmem_code_opening_a_held_store(held: tuple[Path, apsw.Connection]) -> None:
    path, conn = held
    log = Path(os.environ[openguard.ENV])
    size = log.stat().st_size if log.exists() else 0
    with pytest.raises(openguard.StoreFileOpened):
        unix.plaintext(path)  # stdlib-only, for the fast entry: never called where a connection is open
    with log.open("r+b") as fh:  # the line it left is this test's doing: take it back out
        fh.seek(size)
        said = fh.read().decode()
        fh.truncate(size)
    assert f"opened {path}" in said and "unix.py" in said
    assert unix.plaintext(path.with_name("other.db")) is False  # a file nobody holds: no refusal
    conn.close()
    assert unix.plaintext(path) is True  # no connection holds it any more


def test_the_guard_is_on_in_the_processes_tests_start(tmp_path: Path) -> None:
    code = "import localmem.storage.engine; from localmem.storage.engine import openguard; print(openguard._installed)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_a_store_renamed_over_is_replaced_and_closes_without_a_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = Store(path, embedder=HashEmbedder())
    store.write_sessions([session("s1", "2024-01-01T10:00:00", ("Ana", "The first thing I said."))])
    assert store.replaced() is None
    other = tmp_path / "other.db"
    Store(other, embedder=HashEmbedder()).close()
    os.replace(other, path)
    assert "another file" in (store.replaced() or "")
    wal = Path(f"{path}-wal")
    store.write_sessions([session("s2", "2024-01-02T10:00:00", ("Ana", "Written after the swap."))])
    store.close()  # without the guard: a checkpoint into its own (now unlinked) file, then the -wal deleted by name
    assert wal.exists()  # the frames of the old store stay beside the new one untouched...
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()


def test_a_backup_copied_over_in_place_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = Store(path, embedder=HashEmbedder())
    store.write_sessions([session("s1", "2024-01-01T10:00:00", ("Ana", "Before the backup."))])
    backup(path, tmp_path / "b.db")
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the stamp is in the file's own header now
    assert store.replaced() is None
    shutil.copyfile(tmp_path / "b.db", tmp_path / "copy.db")  # the copy a person makes, then puts over the store
    with open(path, "r+b") as dst, open(tmp_path / "copy.db", "rb") as src:  # cp keeps the inode
        dst.write(src.read())
    assert "overwritten in place" in (store.replaced() or "")
    copied = (tmp_path / "copy.db").read_bytes()
    store.close()
    assert path.read_bytes()[:100] == copied[:100]  # nothing of the old store's was checkpointed into it


def test_every_backup_gets_its_own_stamp(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    Store(path, embedder=HashEmbedder()).close()
    backup(path, tmp_path / "b1.db")
    backup(path, tmp_path / "b2.db")
    ids = set()
    for p in (path, tmp_path / "b1.db", tmp_path / "b2.db"):
        conn = apsw.Connection(str(p), flags=apsw.SQLITE_OPEN_READONLY)
        ids.add(conn.execute("PRAGMA application_id").fetchall()[0][0])
        conn.close()
    assert len(ids) == 3 and 0 not in ids
