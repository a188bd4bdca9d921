from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from localmem.errors import SchemaError
from localmem.storage import db


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


def test_schema_snapshot(tmp_path: Path) -> None:
    """A change to the migrated schema must be reviewed: update the snapshot with it."""
    conn = db.connect(tmp_path / "a.db")
    db.migrate(conn)
    shadow = ("_data", "_idx", "_docsize", "_config", "_content")  # FTS5's own tables
    rows = [
        (t, n)
        for t, n in conn.execute(
            "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
        )
        if not ("_fts_" in n and n.endswith(shadow))
    ]
    assert rows == [
        ("index", "cue_tags_tag"),
        ("index", "cue_tags_turn"),
        ("index", "cues_turn"),
        ("index", "edges_dst"),
        ("index", "ingest_files_fingerprint"),
        ("index", "jobs_state"),
        ("index", "topic_turns_turn"),
        ("index", "topics_kind"),
        ("index", "turn_enrichment_type"),
        ("index", "turns_source_id"),
        ("index", "turns_ts"),
        ("table", "antecedent_runs"),
        ("table", "cue_tags"),
        ("table", "cues"),
        ("table", "cues_fts"),
        ("table", "edges"),
        ("table", "extracted_cues_fts"),
        ("table", "ingest_files"),
        ("table", "jobs"),
        ("table", "meta"),
        ("table", "sessions"),
        ("table", "tags"),
        ("table", "theme_topics"),
        ("table", "topic_turns"),
        ("table", "topics"),
        ("table", "turn_enrichment"),
        ("table", "turns"),
        ("table", "turns_fts"),
        ("trigger", "cues_fts_delete"),
        ("trigger", "extracted_cues_fts_delete"),
        ("trigger", "topic_turns_delete"),
        ("trigger", "turns_fts_delete"),
    ]


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
