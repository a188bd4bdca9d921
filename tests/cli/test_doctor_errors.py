"""A store that cannot be read says what it is and the way back, through the real command
(a store the CLI made, then damaged on disk or opened without its key): an encrypted store
without its key is "encrypted, no key given" with the flag and variable that give it, with
a wrong key "wrong key", never "locked" or an exception's class name; a damaged store (the
file cut short, or a page overwritten in the middle) is "the store at PATH is damaged" in
``stats``, ``doctor`` and any other command, pointing at ``localmem restore`` and the newest
rolling backup, never at ``localmem backup`` (which would copy the damage)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from localmem.cli import recovery
from localmem.config import default_db_path
from localmem.storage.engine import keys
from tests.helpers.cli import driver, jsonl_lines

PAGE = 4096
MALFORMED = "database disk image is malformed"
# a class name, "locked", or the command that would copy the damage (`backups` lists the rolling ones)
LEAKS = re.compile(r"StoreLocked|StoreCorrupt|CorruptError|locked|localmem backup\b")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command (with the tests' fast embedder: ``driver``)."""
    environ = {k: v for k, v in (env or os.environ).items() if k not in (keys.KEY_ENV, keys.KEY_FILE_ENV)}
    return subprocess.run(driver(*args), capture_output=True, text=True, timeout=300, env=environ)


def made_by_the_cli(tmp_path: Path, *key: str) -> Path:
    db = tmp_path / "m.db"
    log = tmp_path / "chat.jsonl"
    log.write_text(jsonl_lines(0, 600), "utf-8")
    proc = cli(*key, "--db", str(db), "ingest", str(log))
    assert proc.returncode == 0, proc.stderr
    return db


def damage(db: Path, how: Callable[[Path], None]) -> None:
    # the last connection closed: everything is in the file itself, no -wal to damage instead
    assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
    assert db.stat().st_size >= 40 * PAGE
    how(db)


def cut_short(db: Path) -> None:
    with db.open("r+b") as fh:  # no connection of this process holds it
        fh.truncate(db.stat().st_size // PAGE // 2 * PAGE)


def overwrite_a_middle_page(db: Path) -> None:
    with db.open("r+b") as fh:
        fh.seek(db.stat().st_size // PAGE // 2 * PAGE)
        fh.write(b"\xde\xad\xbe\xef" * (PAGE // 4))


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("localmem: error: "), proc.stderr
    return lines[0].removeprefix("localmem: error: ")


def doctor(db: Path, *key: str) -> dict[str, dict[str, Any]]:
    proc = cli(*key, "--db", str(db), "doctor", "--json")
    assert proc.returncode == 1, proc.stderr  # a failed check
    return {c["name"]: c for c in json.loads(proc.stdout)}


def test_a_store_cut_short_is_damaged_in_stats_doctor_and_other_commands(tmp_path: Path) -> None:
    db = made_by_the_cli(tmp_path)
    damage(db, cut_short)
    said = f"the store at {db} is damaged ({MALFORMED}); restore a backup over it with `localmem --db {db} restore BACKUP --force`"
    stats = cli("--db", str(db), "stats")
    assert stats.returncode == 8 and error_line(stats) == said
    for cmd in (["query", "topic 3"], ["export"]):
        assert error_line(cli("--db", str(db), *cmd)) == said, cmd
    checks = doctor(db)
    assert checks["database"] == {"name": "database", "ok": False, "warn": False, "detail": said}
    for check in checks.values():
        assert not LEAKS.search(check["detail"]), check


def test_a_page_overwritten_in_the_middle_is_found_by_doctor(tmp_path: Path) -> None:
    db = made_by_the_cli(tmp_path)
    damage(db, overwrite_a_middle_page)
    detail = doctor(db)["database"]["detail"]
    # stats may never read that page; doctor reads every page (quick_check)
    assert detail.startswith(f"the store at {db} is damaged (")
    assert detail.endswith(f"restore a backup over it with `localmem --db {db} restore BACKUP --force`")
    assert not LEAKS.search(detail), detail


def test_a_damaged_store_with_a_rolling_backup_names_it_and_restore_latest(tmp_path: Path) -> None:
    rolling = pytest.importorskip("localmem.storage.copies.rolling")
    db = made_by_the_cli(tmp_path)
    took = cli("--db", str(db), "backups", "--now")
    assert took.returncode == 0, took.stderr
    newest = rolling.latest(db)
    assert newest is not None and newest.is_file()
    damage(db, cut_short)
    said = (
        f"the store at {db} is damaged ({MALFORMED}); restore its newest backup ({newest}) with "
        f"`localmem --db {db} restore --latest`"
    )
    assert error_line(cli("--db", str(db), "stats")) == said
    assert doctor(db)["database"]["detail"] == said


@pytest.mark.skipif(not keys.encryption_available(), reason="needs apsw-sqlite3mc")
def test_an_encrypted_store_without_its_key_or_with_a_wrong_one(tmp_path: Path) -> None:
    right, wrong = tmp_path / "right.key", tmp_path / "wrong.key"
    for f, text in ((right, "the right key\n"), (wrong, "not the key\n")):
        f.write_text(text, "utf-8")
        f.chmod(0o600)
    db = made_by_the_cli(tmp_path, "--key-file", str(right))
    assert keys.is_encrypted(db)
    no_key = (
        f"{db}: this store is encrypted, no key given (pass --key-file FILE or set LOCALMEM_KEY_FILE), "
        "unless it is not a localmem database at all"
    )
    wrong_key = f"{db}: wrong key: the key does not open this store (or it is not a localmem database)"
    for key, said in (((), no_key), (("--key-file", str(wrong)), wrong_key)):
        stats = cli(*key, "--db", str(db), "stats")
        assert stats.returncode == 2 and error_line(stats) == said
        checks = doctor(db, *key)
        assert checks["database"]["detail"] == said and not checks["database"]["ok"]
        for check in checks.values():
            assert not LEAKS.search(check["detail"]), check
    opened = cli("--key-file", str(right), "--db", str(db), "stats")
    assert opened.returncode == 0 and "encrypted     yes" in opened.stdout


def test_the_hint_without_rolling_backups_and_for_the_default_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "my store.db"
    monkeypatch.setattr(recovery, "rolling", None)  # a checkout without them
    assert recovery.damaged(db, MALFORMED) == (
        f"the store at {db} is damaged ({MALFORMED}); restore a backup over it with "
        f"`localmem --db '{db}' restore BACKUP --force`"
    )
    newest = tmp_path / "20260301T090000Z.db"
    monkeypatch.setattr(recovery, "rolling", types.SimpleNamespace(latest=lambda store: newest))
    default = default_db_path()
    assert recovery.damaged(default) == (
        f"the store at {default} is damaged; restore its newest backup ({newest}) with `localmem restore --latest`"
    )

    def broken(store: Path) -> Path:
        raise PermissionError(13, "Permission denied", str(store))

    monkeypatch.setattr(recovery, "rolling", types.SimpleNamespace(latest=broken))
    assert recovery.damaged(default).endswith("with `localmem restore BACKUP --force`")  # a hint never fails
