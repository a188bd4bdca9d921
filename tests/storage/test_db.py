from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from localmem.errors import NotFound, SchemaError
from localmem.records import TurnIn
from localmem.storage.engine import db
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder


def test_fresh_database_gets_every_migration(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "a.db")
    applied = db.migrate(conn)
    assert applied == [m.version for m in db.migrations()]
    assert db.user_version(conn) == applied[-1]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    assert {
        "sessions",
        "turns",
        "cues",
        "tags",
        "cue_tags",
        "topics",
        "topic_turns",
        "edges",
        "jobs",
        "turns_fts",
        "cues_fts",
    } <= tables
    assert db.migrate(conn) == []  # idempotent


def test_connection_settings(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "a.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == db.BUSY_TIMEOUT_MS
    assert conn.execute("SELECT vec_version()").fetchone()[0].startswith("v")


def test_upgrade_applies_only_new_migrations(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "a.db")
    base = db.migrations()
    db.migrate(conn, base)
    extra = db.Migration(len(base) + 1, "add_note", "CREATE TABLE note (x INTEGER); INSERT INTO note VALUES (1);")
    assert db.migrate(conn, [*base, extra]) == [extra.version]
    assert conn.execute("SELECT x FROM note").fetchall() == [(1,)]


def test_failed_migration_rolls_back_completely(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "a.db")
    base = db.migrations()
    db.migrate(conn, base)
    broken = db.Migration(len(base) + 1, "broken", "CREATE TABLE half (x INTEGER); INSERT INTO nowhere VALUES (1);")
    with pytest.raises(SchemaError, match="broken"):
        db.migrate(conn, [*base, broken])
    assert db.user_version(conn) == base[-1].version
    with pytest.raises(apsw.SQLError):
        conn.execute("SELECT * FROM half")


def test_newer_database_is_refused(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "a.db")
    db.migrate(conn)
    conn.execute("PRAGMA user_version = 999")
    with pytest.raises(SchemaError, match="newer than this localmem supports"):
        db.migrate(conn)


def test_migration_files_are_numbered_without_gaps() -> None:
    versions = [m.version for m in db.migrations()]
    assert versions == list(range(1, len(versions) + 1))


SNAPSHOT = Path(__file__).resolve().parents[1] / "data" / "schema.sql"
UPDATE_ENV = "LOCALMEM_UPDATE_SNAPSHOT"


def schema_text(conn: db.Conn) -> str:
    """Every row of sqlite_master (tables, indexes, triggers, FTS5 and vec0 shadow
    tables) as reviewable SQL text, in a stable order."""
    out: list[str] = []
    for kind, name, table, sql in conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
    ):
        out.append(f"-- {kind} {name} on {table}")
        out.append(f"{sql};" if sql is not None else "-- (made by SQLite, no sql)")
        out.append("")
    return "\n".join(out)


def test_schema_snapshot(tmp_path: Path) -> None:
    """The whole schema of a fresh store bound to a 64-d embedder: every migration plus the
    vector tables made from migrations/vectors.sql. A change to it must be reviewed."""
    with Store(tmp_path / "a.db", embedder=HashEmbedder(64)) as store:
        actual = schema_text(store.conn)
    if os.environ.get(UPDATE_ENV) == "1":
        SNAPSHOT.write_text(actual, "utf-8")
    expected = SNAPSHOT.read_text("utf-8") if SNAPSHOT.is_file() else ""
    assert actual == expected, (
        "the migrated schema differs from tests/data/schema.sql. If the change is intended "
        f"(a new migration, a new sqlite-vec), regenerate the snapshot with `{UPDATE_ENV}=1 "
        ".venv/bin/python -m pytest tests/storage/test_db.py -k schema_snapshot` and review its diff."
    )


def test_vector_tables_come_from_the_template(tmp_path: Path) -> None:
    """migrations/vectors.sql is the one definition: binding and reindex both use it."""
    template = db.vector_tables_sql(48)
    assert "length(embedding) = 192" in template and "{dim}" not in template and "{bytes}" not in template
    path = tmp_path / "a.db"
    with Store(path, embedder=HashEmbedder(48, "hash-48")) as store:
        store.write([TurnIn(text="I planted tomatoes today.", speaker="Ana")], session="s")
    with Store(path, embedder=HashEmbedder(32, "hash-32"), rebind=True) as store:
        store.reindex()
        sql = dict(store.conn.execute("SELECT name, sql FROM sqlite_master WHERE name IN ('turn_vec', 'cue_vec')"))
        assert sql["turn_vec"] in db.vector_tables_sql(32)
        assert sql["cue_vec"] in db.vector_tables_sql(32)
        triggers = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert {"turn_vec_delete", "cue_vec_delete"} <= triggers  # reindex keeps them
        assert store.forget(session="s") == 1
        assert store.conn.execute("SELECT count(*) FROM turn_vec").fetchone()[0] == 0
        assert store.conn.execute("SELECT count(*) FROM cue_vec").fetchone()[0] == 0


def test_bad_dimension_is_refused() -> None:
    for dim in (0, -3, True, 1.5):
        with pytest.raises(SchemaError, match="dimension"):
            db.vector_tables_sql(dim)  # type: ignore[arg-type]


def test_store_from_before_0007_keeps_working(tmp_path: Path) -> None:
    """A store made before the triggers moved to migration 0007 (tables and triggers made
    in Python) migrates, keeps its vectors, and forgetting still clears them."""
    path = tmp_path / "old.db"
    conn = db.connect(path)
    db.migrate(conn, db.migrations()[:6])
    with db.transaction(conn):
        conn.execute(  # as Store._create_vector_tables made them
            "CREATE VIRTUAL TABLE turn_vec USING vec0("
            "turn_id INTEGER PRIMARY KEY, embedding float[64] distance_metric=cosine);"
            "CREATE VIRTUAL TABLE cue_vec USING vec0("
            "cue_id INTEGER PRIMARY KEY, embedding float[64] distance_metric=cosine);"
        )
        conn.execute(
            "CREATE TRIGGER turn_vec_delete AFTER DELETE ON turns BEGIN DELETE FROM turn_vec WHERE turn_id = old.id; END;"
            "CREATE TRIGGER cue_vec_delete AFTER DELETE ON cues BEGIN DELETE FROM cue_vec WHERE cue_id = old.id; END;"
            "INSERT INTO meta(key, value) VALUES ('embedder_id', 'test-hash-64'), ('embedder_dim', '64')"
        )
    conn.close()
    with Store(path, embedder=HashEmbedder(64)) as store:
        assert db.user_version(store.conn) == len(db.migrations())
        store.write([TurnIn(text="The bike chain broke.", speaker="Ben")], session="s")
        assert store.conn.execute("SELECT count(*) FROM turn_vec").fetchone()[0] == 1
        assert store.forget(session="s") == 1
        assert store.conn.execute("SELECT count(*) FROM turn_vec").fetchone()[0] == 0
        assert store.conn.execute("SELECT count(*) FROM cue_vec").fetchone()[0] == 0
        fresh = tmp_path / "fresh.db"
        with Store(fresh, embedder=HashEmbedder(64)) as other:
            # sqlite_sequence stays behind the dropped vec0 tables (SQLite never drops it)
            names = "SELECT type, name FROM sqlite_master WHERE name != 'sqlite_sequence' ORDER BY type, name"
            assert store.conn.execute(names).fetchall() == other.conn.execute(names).fetchall()


def test_jobs_and_enrichment_columns(tmp_path: Path) -> None:
    """The queue's and the enrichment record's columns (migration 0003) are part of the snapshot."""
    conn = db.connect(tmp_path / "a.db")
    db.migrate(conn)

    def cols(table: str) -> list[str]:
        return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]

    assert cols("jobs") == [
        "id", "kind", "turn_id", "state", "attempts", "last_error", "not_before", "created_at", "updated_at",
        "locked_by", "locked_until",
    ]  # fmt: skip
    assert cols("turn_enrichment") == [
        "turn_id", "memory_type", "type_source", "low_info", "cues_kept", "cues_rejected", "model", "created_at",
    ]  # fmt: skip


def test_connections_are_typed_apsw_connections(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "a.db")
    db.migrate(conn)
    assert isinstance(conn, db.Conn) and isinstance(conn, apsw.Connection)
    assert conn.one("SELECT count(*) FROM turns") == (0,)
    with pytest.raises(NotFound, match="no row where one was expected: SELECT id FROM turns"):
        conn.one("SELECT id FROM turns WHERE id = ?", (1,))
    with db.transaction(apsw.Connection(str(tmp_path / "b.db"))) as plain:  # any apsw connection
        plain.execute("CREATE TABLE x (y)")


WRITER = """
import sys
from localmem.storage.engine import db
conn = db.connect(sys.argv[1])
with db.transaction(conn):
    conn.execute("INSERT INTO t VALUES (10)")
"""


def test_a_write_after_another_process_committed_ends_a_stale_read(tmp_path: Path) -> None:
    # A statement stepped in part keeps this connection reading on its snapshot; once
    # another process commits, BEGIN IMMEDIATE gets SQLITE_BUSY_SNAPSHOT at once, which
    # no wait or retry cures: the write door ends the stale read and begins again.
    path = tmp_path / "s.db"
    conn = db.connect(path)
    conn.execute("CREATE TABLE t(x INTEGER)")
    with db.transaction(conn):
        conn.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (3,)])
    held = conn.execute("SELECT x FROM t ORDER BY x")
    assert held.fetchone() == (1,)
    assert conn.txn_state("main") == apsw.SQLITE_TXN_READ
    subprocess.run([sys.executable, "-c", WRITER, str(path)], check=True, timeout=60)
    with db.transaction(conn):
        conn.execute("INSERT INTO t VALUES (4)")
    assert [r[0] for r in conn.execute("SELECT x FROM t ORDER BY x")] == [1, 2, 3, 4, 10]
    with pytest.raises(apsw.CursorClosedError):  # the stale cursor is ended, never read on
        held.fetchone()
    conn.close()


def test_a_uri_opens_without_making_a_folder_named_after_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.db"
    first = db.connect(path)
    first.execute("CREATE TABLE t(x)")
    first.close()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    conn = db.connect(f"file:{path}?mode=ro")
    assert conn.one("SELECT count(*) FROM sqlite_master")[0] == 1
    conn.close()
    assert list(cwd.iterdir()) == []  # was: a folder "file:" holding the path's parents
