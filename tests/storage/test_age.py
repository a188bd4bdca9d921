"""age-encrypted exports and backups (pyrage), for real through the CLI: the outputs hold no
stored sentence, only the identity reads them back (ingest, restore), a wrong or missing
identity is one line, and an encrypted store's age backup restores to an encrypted store."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from localmem.records import TurnIn
from localmem.storage.copies import age
from localmem.storage.engine import keys
from localmem.storage.write.store import Store
from tests.helpers.cli import driver
from tests.helpers.fakes import HashEmbedder

pyrage = pytest.importorskip("pyrage")
SECRET = "the boat is moored at buoy 17 behind the old cannery"


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in (keys.KEY_ENV, keys.KEY_FILE_ENV, age.IDENTITY_ENV)}
    e.update(extra)
    return e


def cli(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(driver(*args), capture_output=True, text=True, timeout=180, env=env(**extra))


def identity(tmp_path: Path, name: str = "id.key") -> tuple[Path, str]:
    ident = pyrage.x25519.Identity.generate()
    path = tmp_path / name
    path.write_text(f"# created by the test\n{ident}\n", "utf-8")
    path.chmod(0o600)
    return path, str(ident.to_public())


def make_store(path: Path) -> None:
    store = Store(path, embedder=HashEmbedder())
    store.write([TurnIn(SECRET, speaker="Ann"), TurnIn("and the oars are in the shed", speaker="Ann")], session="s")
    store.close()


def texts(path: Path) -> set[str]:
    store = Store(path, embedder=HashEmbedder())
    try:
        return {str(r[0]) for r in store.conn.execute("SELECT text FROM turns")}
    finally:
        store.close()


def test_export_and_backup_to_a_recipient_and_back(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    make_store(db)
    ident, public = identity(tmp_path)
    other, _ = identity(tmp_path, "other.key")
    out, bak = tmp_path / "m.jsonl.age", tmp_path / "m.db.age"
    assert cli("--db", str(db), "export", "--out", str(out), "--encrypt-to", public).returncode == 0
    assert cli("--db", str(db), "backup", str(bak), "--encrypt-to", public).returncode == 0
    for p in (out, bak):
        assert age.is_age(p) and SECRET.encode() not in p.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no plaintext left beside
    # read back with the identity
    into = tmp_path / "into.db"
    got = cli("--age-identity", str(ident), "--db", str(into), "ingest", str(out))
    assert got.returncode == 0, got.stderr
    assert SECRET in texts(into)
    restored = tmp_path / "restored.db"
    got = cli("--age-identity", str(ident), "restore", "--from", str(bak), str(restored))
    assert got.returncode == 0, got.stderr
    assert texts(restored) == texts(db)
    # no identity, or the wrong one: one line each
    for args, says in (
        ((), "this file is age-encrypted; give its identity"),
        (("--age-identity", str(other)), "cannot decrypt with the identity given"),
    ):
        bad = cli(*args, "--db", str(tmp_path / "x.db"), "ingest", str(out))
        assert bad.returncode != 0 and bad.stderr.strip().count("\n") == 0 and says in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr


def test_recipient_files_identity_permissions_and_bad_recipients(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    make_store(db)
    ident, public = identity(tmp_path)
    recips = tmp_path / "recipients.txt"
    recips.write_text(f"# me\n{public}\n", "utf-8")
    out = tmp_path / "e.age"
    assert cli("--db", str(db), "export", "--out", str(out), "--encrypt-to", str(recips)).returncode == 0
    bad = cli("--db", str(db), "export", "--out", str(tmp_path / "f.age"), "--encrypt-to", "age1notakey")
    assert bad.returncode == 3 and "not an age recipient" in bad.stderr and not (tmp_path / "f.age").exists()
    ident.chmod(0o644)
    loose = cli("--age-identity", str(ident), "--db", str(tmp_path / "x.db"), "ingest", str(out))
    assert loose.returncode == 2 and "readable by others" in loose.stderr


@pytest.mark.skipif(not keys.encryption_available(), reason="needs apsw-sqlite3mc")
def test_an_encrypted_stores_age_backup_stays_encrypted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(keys.KEY_ENV, "store key")
    db = tmp_path / "m.db"
    make_store(db)
    monkeypatch.delenv(keys.KEY_ENV)
    ident, public = identity(tmp_path)
    bak = tmp_path / "m.db.age"
    assert cli("--db", str(db), "backup", str(bak), "--encrypt-to", public, LOCALMEM_KEY="store key").returncode == 0
    restored = tmp_path / "r.db"
    got = cli("--age-identity", str(ident), "restore", "--from", str(bak), str(restored), LOCALMEM_KEY="store key")
    assert got.returncode == 0, got.stderr
    assert keys.is_encrypted(restored) and SECRET.encode() not in restored.read_bytes()
    monkeypatch.setenv(keys.KEY_ENV, "store key")
    assert SECRET in texts(restored)
