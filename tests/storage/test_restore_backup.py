"""``localmem restore BACKUP``: a plain backup file (``localmem backup``'s, plaintext or
encrypted with the store's key) put back with real processes, the real embedder and a real
daemon holding the store: the daemon a query left is stopped first, the backup is checked
before it goes in, the store it replaces is kept beside it and named, nothing written after
the backup comes back, and nothing before it is lost. Bad sources are named errors and
leave the store as it was."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from tests.helpers.resident import daemons


def texts(db: Path, key_env: dict[str, str] | None = None) -> set[str]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        if key_env:
            conn.pragma("key", Path(key_env["LOCALMEM_KEY_FILE"]).read_text().strip())
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        return {str(r[0]) for r in conn.execute("SELECT text FROM turns")}
    finally:
        conn.close()


class Lm:
    """The ``localmem`` command on one store in a temp dir."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp, self.db = tmp_path, tmp_path / "m.db"

    def __call__(self, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "localmem", "--db", str(self.db), *argv]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})

    def ingest(self, name: str, *lines: str, env: dict[str, str] | None = None) -> None:
        src = self.tmp / f"{name}.jsonl"
        src.write_text("".join(json.dumps({"session": name, "speaker": "Ana", "text": t}) + "\n" for t in lines))
        done = self("ingest", str(src), "--quiet", env=env)
        assert done.returncode == 0, done.stderr


@pytest.fixture
def lm(tmp_path: Path) -> Iterator[Lm]:
    cli = Lm(tmp_path)
    yield cli
    for pid in daemons(cli.db):
        os.kill(pid, signal.SIGKILL)


def test_a_plain_backup_goes_back_with_a_daemon_running(lm: Lm, tmp_path: Path) -> None:
    cli, db = lm, lm.db
    lm.ingest("before", "The spare key is under the blue pot.")
    assert cli("backup", str(tmp_path / "b.db")).returncode == 0
    lm.ingest("after", "The bike is in the red shed now.")
    q = cli("query", "where is the bike", env={"LOCALMEM_QUERY_DAEMON_IDLE": "600"})
    assert q.returncode == 0 and "red shed" in q.stdout
    assert daemons(db), "the query left a daemon holding the store"
    refused = cli("restore", str(tmp_path / "b.db"))
    assert refused.returncode != 0 and "--force" in refused.stderr
    done = cli("restore", str(tmp_path / "b.db"), "--force")
    assert done.returncode == 0, done.stderr
    assert "stopped the store's resident daemon" in done.stderr and daemons(db) == []
    assert "restored 1 turns" in done.stdout and "it replaced 2 turns in 2 sessions, kept at" in done.stdout
    (kept,) = tmp_path.glob(".m.db.before-restore-*")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and str(kept) in done.stdout
    assert texts(db) == {"The spare key is under the blue pot."}  # nothing after the backup came back
    assert "The bike is in the red shed now." in texts(kept)  # ...and it is not lost either
    q = cli("query", "where is the bike", "--no-daemon")
    assert q.returncode == 0 and "red shed" not in q.stdout
    before = texts(kept)
    back = cli("restore", str(kept), "--force")
    assert back.returncode == 0 and texts(db) == before  # the undo the output names
    assert texts(kept) == before  # a second restore, even in the same second, keeps its own copy
    assert len(list(tmp_path.glob(".m.db.before-restore-*"))) == 2


def test_an_encrypted_store_and_its_backup(lm: Lm, tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("a long enough store key\n")
    key.chmod(0o600)
    env = {"LOCALMEM_KEY_FILE": str(key)}
    cli, db = lm, lm.db
    lm.ingest("before", "The boat is moored at pier nine.", env=env)
    assert cli("backup", str(tmp_path / "b.db"), env=env).returncode == 0
    assert b"pier nine" not in (tmp_path / "b.db").read_bytes()
    lm.ingest("after", "The boat moved to pier ten.", env=env)
    nokey = cli("restore", str(tmp_path / "b.db"), "--force")
    assert nokey.returncode != 0 and "Traceback" not in nokey.stderr
    assert texts(db, env) == {"The boat is moored at pier nine.", "The boat moved to pier ten."}  # untouched
    done = cli("restore", str(tmp_path / "b.db"), "--force", env=env)
    assert done.returncode == 0, done.stderr
    assert texts(db, env) == {"The boat is moored at pier nine."}
    assert b"pier nine" not in db.read_bytes()  # still encrypted


@pytest.mark.parametrize("bad", ["junk", "missing", "empty", "itself"])
def test_a_bad_source_is_named_and_the_store_stays(lm: Lm, tmp_path: Path, bad: str) -> None:
    cli, db = lm, lm.db
    lm.ingest("s", "The kettle is on the left shelf.")
    src = db if bad == "itself" else tmp_path / f"{bad}.db"
    if bad == "junk":
        src.write_bytes(b"not a database at all\n" * 100)
    elif bad == "empty":
        src.write_bytes(b"")
    done = cli("restore", str(src), "--force")
    assert done.returncode != 0 and str(src) in done.stderr and "Traceback" not in done.stderr
    assert texts(db) == {"The kettle is on the left shelf."}
    assert list(tmp_path.glob(".m.db.before-restore-*")) == []  # nothing kept aside for a restore that did not happen


def test_latest_without_a_rolling_backup_says_so(lm: Lm) -> None:
    lm.ingest("s", "The kettle is on the left shelf.")
    done = lm("restore", "--latest", "--force")
    assert done.returncode != 0 and "no rolling backup" in done.stderr
