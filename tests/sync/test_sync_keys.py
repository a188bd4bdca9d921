"""Every key file sync reads is checked like the store's key file (one reader,
``storage.engine.keys``): a passphrase or identity file that group or others may read
is refused by name, through the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _sync(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LOCALMEM_SYNC_PASSPHRASE"}
    return subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), "sync", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )


def test_sync_key_files_readable_by_others_are_refused(tmp_path: Path) -> None:
    pyrage = pytest.importorskip("pyrage")
    folder = tmp_path / "folder"
    folder.mkdir()
    passphrase = tmp_path / "sync-pass"
    passphrase.write_text("correct horse\n", encoding="utf-8")
    identity = tmp_path / "sync.key"
    identity.write_text(f"# created by a test\n{pyrage.x25519.Identity.generate()}\n", encoding="utf-8")
    for key, flag in ((passphrase, "--passphrase-file"), (identity, "--identity")):
        key.chmod(0o644)
        done = _sync(tmp_path / "a.db", str(folder), flag, str(key))
        assert done.returncode != 0 and f"key file {key} is readable by others (mode 644)" in done.stderr
        assert not list(folder.iterdir())  # refused before anything was written
        key.chmod(0o600)
        done = _sync(tmp_path / f"{key.name}.db", str(folder), flag, str(key))
        assert done.returncode == 0, done.stderr
        assert "plaintext" not in done.stderr
