"""storage.engine.compact on real SQLite: the file shrinks by its free pages, and a store
another connection holds for writing is left as it was, with the reason returned."""

from __future__ import annotations

from pathlib import Path

from localmem.storage.engine import compact, db


def _filled(path: Path) -> db.Conn:
    conn = db.connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS junk(x BLOB)")
    with db.transaction(conn):
        for _ in range(200):
            conn.execute("INSERT INTO junk VALUES (randomblob(8000))")
    with db.transaction(conn):
        conn.execute("DELETE FROM junk")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return conn


def test_rebuild_gives_free_pages_back(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    conn = _filled(path)
    before = path.stat().st_size
    assert compact.rebuild(conn) == ""
    assert path.stat().st_size < before / 4
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_a_store_held_for_writing_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    conn = _filled(path)
    conn.set_busy_timeout(50)
    other = db.connect(path)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO junk VALUES (x'01')")
    why = compact.rebuild(conn)
    assert why.startswith("BusyError") or why.startswith("LockedError"), why
    other.execute("COMMIT")
    assert conn.execute("SELECT count(*) FROM junk").fetchall() == [(1,)]
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
