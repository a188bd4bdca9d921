"""``localmem sync`` and ``sync status`` through the real CLI (subprocesses, the default
embedder): the plaintext warning, an encrypted folder, a wrong passphrase refused and
reported, nothing folded from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def cli(db: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def test_sync_through_the_cli_plain_and_encrypted(tmp_path: Path) -> None:
    pytest.importorskip("pyrage")
    chats = tmp_path / "chats.jsonl"
    chats.write_text(
        json.dumps({"session": "s", "speaker": "Ana", "text": "The spare key is under the blue pot."}) + "\n",
        encoding="utf-8",
    )
    a, b, c, d = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db", tmp_path / "d.db"
    plain, secret = tmp_path / "plain", tmp_path / "secret"
    plain.mkdir()
    secret.mkdir()
    assert cli(a, "ingest", str(chats)).returncode == 0
    done = cli(a, "sync", str(plain))
    assert done.returncode == 0 and "plaintext" in done.stderr
    assert cli(b, "sync", str(plain), "--json").returncode == 0
    got = json.loads(cli(b, "sync", "status", str(plain), "--json").stdout)
    assert [d["lag_segments"] for d in got["devices"]] == [0]  # B wrote nothing of its own: no folder
    assert "blue pot" in cli(b, "query", "where is the spare key").stdout

    good, bad = {"LOCALMEM_SYNC_PASSPHRASE": "correct horse"}, {"LOCALMEM_SYNC_PASSPHRASE": "wrong"}
    assert cli(d, "ingest", str(chats)).returncode == 0  # a store syncs with one folder: a new device
    done = cli(d, "sync", str(secret), env=good)
    assert done.returncode == 0 and "plaintext" not in done.stderr
    seg = next((secret).rglob("*.seg"))
    assert b"blue pot" not in seg.read_bytes()
    refused = cli(c, "sync", str(secret), env=bad)
    assert refused.returncode == 1 and "does not decrypt" in refused.stdout
    report = json.loads(cli(c, "sync", "status", "--json", env=bad).stdout)
    assert report["refused"] and "does not decrypt" in report["refused"][0]["reason"]
    assert cli(c, "sync", str(secret), env=good).returncode == 0
    assert "blue pot" in cli(c, "query", "where is the spare key").stdout
    assert json.loads(cli(c, "sync", "status", "--json").stdout)["refused"] == []
