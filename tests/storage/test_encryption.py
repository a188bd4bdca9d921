"""Encryption at rest (SQLite3 Multiple Ciphers through apsw-sqlite3mc), for real: the bytes
of every file localmem writes hold no stored sentence (database, WAL, shm, backups, the
temp dir), while a plaintext control store does; a missing or wrong key is one line;
key files must be private; encrypt / decrypt convert in place, survive kill -9 at any
moment and are resumed by running them again; the MCP server and sqlite-vec work on an
encrypted store."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from localmem.errors import ConfigError
from localmem.records import TurnIn
from localmem.storage.copies import backup, convert
from localmem.storage.engine import keys
from localmem.storage.write.store import Store
from tests.helpers.cli import driver
from tests.helpers.fakes import HashEmbedder

pytestmark = pytest.mark.skipif(not keys.encryption_available(), reason="needs apsw-sqlite3mc")

SECRET = "Zanzibar-quokka-7 holds the spare key under the blue flowerpot"
KEY = "correct horse battery staple"


def every_file(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def holds(path: Path, needle: str) -> bool:
    data = path.read_bytes()
    return needle.encode() in data or needle.encode("utf-16-le") in data


def fill(store: Store, n: int, *, secret: bool = True) -> None:
    for k in range(n):
        turns = [TurnIn(f"Batch {k} line {j} about subject {k * 7 + j}.", speaker="Ann") for j in range(5)]
        store.write(turns, session=f"s{k}")
    if secret:
        store.write([TurnIn(SECRET, speaker="Ann")], session="secret")


def test_no_stored_sentence_in_any_file_of_an_encrypted_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, tmpdir = tmp_path / "data", tmp_path / "tmp"
    data.mkdir()
    tmpdir.mkdir()
    monkeypatch.setenv("SQLITE_TMPDIR", str(tmpdir))  # where SQLite would spill a sort or temp table
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    # control: the same writes to a plaintext store leave the sentence in its files (the grep can fail)
    plain = Store(data / "plain.db", embedder=HashEmbedder())
    fill(plain, 3)
    assert any(holds(p, SECRET) for p in every_file(data))
    plain.close()
    for p in every_file(data):
        p.unlink()

    monkeypatch.setenv(keys.KEY_ENV, KEY)
    db = data / "mem.db"
    store = Store(db, embedder=HashEmbedder())
    fill(store, 40)
    # a big sort and a temp table, while the WAL and shm are open and full
    store.conn.execute("CREATE TEMP TABLE spill AS SELECT text FROM turns")
    store.conn.execute("SELECT text FROM turns ORDER BY text || hex(randomblob(200))").fetchall()
    assert Path(f"{db}-wal").stat().st_size > 0
    backup.backup(db, data / "copy.db")
    files = every_file(tmp_path)
    assert {db, Path(f"{db}-wal"), Path(f"{db}-shm"), data / "copy.db"} <= set(files)
    assert [p for p in files if holds(p, SECRET)] == []
    assert [p.name for p in files if p.suffix == ".db" and keys.file_state(p) == "plain"] == []  # none in plaintext
    assert store.conn.one("SELECT count(*) FROM turns WHERE text = ?", (SECRET,))[0] == 1  # readable through the key
    store.close()
    # the backup is encrypted with the store's key and opens with it
    monkeypatch.delenv(keys.KEY_ENV)
    with pytest.raises(keys.StoreLocked, match="this store is encrypted, no key given"):
        Store(data / "copy.db", embedder=HashEmbedder())
    monkeypatch.setenv(keys.KEY_ENV, KEY)
    copy = Store(data / "copy.db", embedder=HashEmbedder())
    assert copy.stats()["turns"] == 201
    assert copy.conn.one("SELECT vec_version()")[0].startswith("v")  # sqlite-vec loads into the cipher build
    copy.close()


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(driver(*args), capture_output=True, text=True, timeout=120, env=env)


def clean_env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in (keys.KEY_ENV, keys.KEY_FILE_ENV)}
    e.update(extra)
    return e


def test_missing_and_wrong_keys_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "m.db"
    monkeypatch.setenv(keys.KEY_ENV, KEY)
    fill(Store(db, embedder=HashEmbedder()), 1)
    for env, says in (
        (clean_env(), "this store is encrypted, no key given (pass --key-file FILE or set LOCALMEM_KEY_FILE)"),
        (clean_env(LOCALMEM_KEY="not the key"), "wrong key: the key does not open this store"),
    ):
        for cmd in (["stats"], ["query", "spare key"], ["backup", str(tmp_path / "b.db")], ["export"]):
            proc = run_cli("--db", str(db), *cmd, env=env)
            assert proc.returncode == 2, (cmd, proc.stderr)
            assert "Traceback" not in proc.stderr and "file is not a database" not in proc.stderr
            assert proc.stderr.strip().count("\n") == 0 and says in proc.stderr, (cmd, proc.stderr)
    ok = run_cli("--db", str(db), "stats", env=clean_env(LOCALMEM_KEY=KEY))
    assert ok.returncode == 0 and "encrypted     yes" in ok.stdout


def test_key_file_must_be_private_and_reaches_subprocesses(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n", "utf-8")
    key_file.chmod(0o644)
    db = tmp_path / "m.db"
    proc = run_cli("--key-file", str(key_file), "--db", str(db), "stats", env=clean_env())
    assert proc.returncode == 2 and "readable by others" in proc.stderr and "chmod 600" in proc.stderr
    with pytest.raises(ConfigError, match="readable by others"):
        keys.read_key_file(key_file)
    key_file.chmod(0o600)
    assert keys.read_key_file(key_file) == KEY
    log = tmp_path / "chat.txt"
    log.write_text(f"user: {SECRET}\nassistant: noted\n", "utf-8")
    proc = run_cli("--key-file", str(key_file), "--db", str(db), "ingest", str(log), env=clean_env())
    assert proc.returncode == 0, proc.stderr
    assert keys.is_encrypted(db) and not holds(db, SECRET)
    # the file's key, given by environment as the server and worker get it, opens the store
    proc = run_cli("--db", str(db), "stats", "--json", env=clean_env(LOCALMEM_KEY_FILE=str(key_file)))
    assert proc.returncode == 0 and '"encrypted": true' in proc.stdout, proc.stderr


def turns_and_sessions(db: Path, key: str | None) -> tuple[int, int]:
    # read-write, as localmem opens it: a journal a kill left behind is rolled back
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READWRITE)
    if key is not None:
        keys.apply_key(conn, key)
    try:
        assert [r[0] for r in conn.execute("PRAGMA integrity_check")] == ["ok"]
        row = conn.execute("SELECT (SELECT count(*) FROM turns), (SELECT count(*) FROM sessions)").fetchall()[0]
        return int(row[0]), int(row[1])
    finally:
        conn.close()


def test_encrypt_decrypt_and_change_key_in_place(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = Store(db, embedder=HashEmbedder())
    fill(store, 20)
    store.close()
    want = turns_and_sessions(db, None)
    assert holds(db, SECRET)
    enc = run_cli("--db", str(db), "encrypt", env=clean_env(LOCALMEM_KEY=KEY))
    assert enc.returncode == 0, enc.stderr
    assert keys.is_encrypted(db) and not holds(db, SECRET) and turns_and_sessions(db, KEY) == want
    again = run_cli("--db", str(db), "encrypt", env=clean_env(LOCALMEM_KEY=KEY))
    assert again.returncode != 0 and "already encrypted" in again.stderr
    new_key = tmp_path / "new.key"
    new_key.write_text("a brand new key", "utf-8")
    new_key.chmod(0o600)
    rot = run_cli("--db", str(db), "encrypt", "--new-key-file", str(new_key), env=clean_env(LOCALMEM_KEY=KEY))
    assert rot.returncode == 0, rot.stderr
    assert turns_and_sessions(db, "a brand new key") == want
    with pytest.raises(apsw.NotADBError):
        turns_and_sessions(db, KEY)
    dec = run_cli("--db", str(db), "decrypt", env=clean_env(LOCALMEM_KEY="a brand new key"))
    assert dec.returncode == 0, dec.stderr
    assert keys.file_state(db) == "plain" and turns_and_sessions(db, None) == want
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db", "new.key"]  # no partial, wal or journal left


def test_encrypt_refuses_a_store_another_process_has_open(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = Store(db, embedder=HashEmbedder())
    fill(store, 2)
    proc = run_cli("--db", str(db), "encrypt", env=clean_env(LOCALMEM_KEY=KEY))
    assert proc.returncode == 1 and "open in another process" in proc.stderr, proc.stderr
    assert keys.file_state(db) == "plain" and store.stats()["turns"] == 11
    store.close()


def test_encrypt_killed_at_random_moments_is_resumed(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = Store(db, embedder=HashEmbedder())
    fill(store, 300)
    store.close()
    want = turns_and_sessions(db, None)
    pristine = db.read_bytes()
    t0 = time.monotonic()  # how long one whole run takes here, start-up included
    assert run_cli("--db", str(db), "encrypt", env=clean_env(LOCALMEM_KEY=KEY)).returncode == 0
    whole = time.monotonic() - t0
    rng = random.Random(23)
    states = []
    for _ in range(8):
        Path(f"{db}-journal").unlink(missing_ok=True)
        db.write_bytes(pristine)
        proc = subprocess.Popen(driver("--db", str(db), "encrypt"), env=clean_env(LOCALMEM_KEY=KEY))
        time.sleep(rng.uniform(0.5, 1.05) * whole)  # anywhere from start-up to the end of the copy
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        state = keys.file_state(db)
        states.append(state)
        # whatever the moment, the store is whole: the old one or the new one
        assert turns_and_sessions(db, KEY if state == "encrypted" else None) == want
        if state == "plain":  # resumed by running it again
            assert run_cli("--db", str(db), "encrypt", env=clean_env(LOCALMEM_KEY=KEY)).returncode == 0
        assert turns_and_sessions(db, KEY) == want and not convert.partial_path(db).exists()
    print("kill -9 landed with the store", states)


def test_a_partial_copy_left_by_a_kill_is_redone(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = Store(db, embedder=HashEmbedder())
    fill(store, 3)
    store.close()
    partial = convert.partial_path(db)
    partial.write_bytes(b"\0" * 4096)  # what a kill mid-copy leaves
    report = convert.convert(db, old_key=None, new_key=KEY)
    assert report.encrypted and report.turns == 16 and not partial.exists()
    assert turns_and_sessions(db, KEY) == (16, 4)


def test_mcp_server_on_an_encrypted_store(tmp_path: Path) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    db = tmp_path / "m.db"
    key_file = tmp_path / "key"
    key_file.write_text(KEY, "utf-8")
    key_file.chmod(0o600)
    env = clean_env(LOCALMEM_KEY_FILE=str(key_file))
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2]) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("LOCALMEM_MODEL", None)

    async def session() -> None:
        params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_server", "--db", str(db)], env=env)
        async with Client(params, read_timeout_seconds=90) as c:
            turns = [{"text": SECRET, "speaker": "Ana", "timestamp": "2024-04-02T18:00"}]
            res = await c.call_tool("remember", {"turns": turns, "session": "keys"})
            assert not res.is_error, res.content
            ctx = await c.call_tool("reconstruct", {"query": "Where is the spare key?"})
            assert not ctx.is_error and ctx.structured_content is not None
            assert "flowerpot" in ctx.structured_content["text"]
            assert [p for p in every_file(tmp_path) if holds(p, SECRET)] == []

    anyio.run(session)
    assert keys.is_encrypted(db)
