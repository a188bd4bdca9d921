"""Clients see the cause (issue 40), through real MCP client sessions with the server as a
stdio subprocess: a store the server cannot open (encrypted without its key, a wrong key,
a key file others may read) is a tool error naming why, not a closed connection;
``localmem-mcp --key-file``; ``mcp-config --install --key-file --sync`` writes an entry
that works as a client starts it, and ``doctor`` checks that the entry opens its store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from localmem.storage.engine import keys

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio
SECRETS = ("LOCALMEM_KEY", "LOCALMEM_KEY_FILE", "LOCALMEM_SYNC_PASSPHRASE", "LOCALMEM_AGE_IDENTITY")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in SECRETS and k != "LOCALMEM_MODEL"}
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(extra)
    return e


def _client(command: str, args: list[str], env: dict[str, str]) -> Client:
    return Client(StdioServerParameters(command=command, args=args, env=env, cwd=str(ROOT)), read_timeout_seconds=120)


async def _remember(c: Client, text: str) -> Any:
    return await c.call_tool("remember", {"turns": [{"text": text}], "session": "s"})


def _key_file(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text + "\n", encoding="utf-8")
    path.chmod(mode)
    return path


async def test_a_store_the_server_cannot_open_is_a_tool_error_naming_the_cause(tmp_path: Path) -> None:
    db = tmp_path / "locked.db"
    db.write_bytes(os.urandom(8192))  # what an encrypted store looks like without its key
    async with _client(sys.executable, ["-m", "mcp_server", "--db", str(db)], _env()) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"remember", "reconstruct", "memory_stats"} <= names
        res = await _remember(c, "Ana keeps bees.")
        assert res.is_error and "this store is encrypted" in str(res.content)
        stats = await c.call_tool("memory_stats", {})
        assert stats.is_error and "LOCALMEM_KEY" in str(stats.content)


async def test_localmem_mcp_takes_a_key_file_and_says_when_it_cannot_use_it(tmp_path: Path) -> None:
    db, loose = tmp_path / "m.db", _key_file(tmp_path / "loose.key", "k1", 0o644)
    async with _client(sys.executable, ["-m", "mcp_server", "--db", str(db), "--key-file", str(loose)], _env()) as c:
        res = await _remember(c, "Ana keeps bees.")
        assert res.is_error and "readable by others (mode 644)" in str(res.content)
    if not keys.encryption_available():
        return  # the rest needs apsw-sqlite3mc: an encrypted store, then a wrong key
    good, wrong = _key_file(tmp_path / "good.key", "right key"), _key_file(tmp_path / "wrong.key", "wrong key")
    async with _client(sys.executable, ["-m", "mcp_server", "--db", str(db), "--key-file", str(good)], _env()) as c:
        assert not (await _remember(c, "Ana keeps bees.")).is_error
    assert keys.is_encrypted(db)
    async with _client(sys.executable, ["-m", "mcp_server", "--db", str(db), "--key-file", str(wrong)], _env()) as c:
        res = await _remember(c, "Ben too.")
        assert res.is_error and "the key does not open this store" in str(res.content)


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "localmem", *args],
        capture_output=True,
        text=True,
        env=_env(**env),
        cwd=ROOT,
        timeout=300,
    )


async def test_mcp_config_install_writes_an_entry_that_works_and_doctor_checks_it(tmp_path: Path) -> None:
    pytest.importorskip("pyrage")
    home = tmp_path / "home"
    home.mkdir()
    db, folder = tmp_path / "m.db", tmp_path / "Sync"
    key = _key_file(tmp_path / "store.key", "store key")
    phrase = _key_file(tmp_path / "sync-pass", "correct horse")
    where = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps({"session": "a", "speaker": "Ana", "text": "Ana keeps bees."}) + "\n", "utf-8")
    assert (
        _cli("--db", str(db), "ingest", str(chats)).returncode == 0
    )  # a plaintext store opens as it is with a key set
    done = _cli(
        "--db",
        str(db),
        "mcp-config",
        "--install",
        "--key-file",
        str(key),
        "--sync",
        str(folder),
        "--sync-interval",
        "0.5",
        "--sync-passphrase-file",
        str(phrase),
        **where,
    )
    assert done.returncode == 0, done.stderr
    config = home / ".config" / "Claude" / "claude_desktop_config.json"
    entry = json.loads(config.read_text("utf-8"))["mcpServers"]["localmem"]
    assert entry["env"] == {"LOCALMEM_KEY_FILE": str(key)}
    assert entry["args"][-6:] == [
        "--sync",
        str(folder),
        "--sync-interval",
        "0.5",
        "--sync-passphrase-file",
        str(phrase),
    ]
    folder.mkdir()
    async with _client(entry["command"], entry["args"], _env(**entry["env"])) as c:  # as the client starts it
        assert not (await _remember(c, "The boat is called Miso.")).is_error
        deadline = time.monotonic() + 120
        while not list(folder.rglob("*.seg")):
            assert time.monotonic() < deadline, "the entry's server never synced"
            await anyio.sleep(0.3)
    assert all(b"Miso" not in p.read_bytes() for p in folder.rglob("*.seg"))
    checks = {c["name"]: c for c in json.loads(_cli("--db", str(db), "doctor", "--json", **where).stdout)}
    entry_check = checks["mcp claude-desktop"]
    assert entry_check["ok"] and "the entry opens its store" in entry_check["detail"]
    assert "syncs encrypted with" in entry_check["detail"]
    key.chmod(0o644)
    entry_check = {c["name"]: c for c in json.loads(_cli("--db", str(db), "doctor", "--json", **where).stdout)}[
        "mcp claude-desktop"
    ]
    assert not entry_check["ok"] and "readable by others" in entry_check["detail"]
