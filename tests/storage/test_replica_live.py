"""While a replica is configured, localmem's writers leave every checkpoint to Litestream:
while it runs, and after it was killed until it runs again (a checkpoint while it is down
is what breaks its tracking); once it stops cleanly, or the replica is released, they
checkpoint again (``storage.engine.checkpoints``). Real Litestream, real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localmem.records import TurnIn
from localmem.storage.copies import replica
from localmem.storage.engine import checkpoints
from localmem.storage.write.store import Store
from tests.helpers.cli import driver
from tests.helpers.fakes import HashEmbedder
from tests.helpers.replica import env, needs_litestream

PRAGMA_IN_ANOTHER_PROCESS = """
import sys
from localmem.records import TurnIn
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder
store = Store(sys.argv[1], embedder=HashEmbedder())
store.write([TurnIn("written by another process", speaker="Bo")], session="other")
print(store.conn.one("PRAGMA wal_autocheckpoint")[0])
store.close()
"""


def autocheckpoint_after_a_write(store: Store, text: str) -> int:
    store.write([TurnIn(text, speaker="Ann")], session="s")
    return int(store.conn.one("PRAGMA wal_autocheckpoint")[0])


def in_another_process(db: Path) -> int:
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", PRAGMA_IN_ANOTHER_PROCESS, str(db)],
        env=env(),
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip().splitlines()[-1])


@needs_litestream
def test_writers_leave_checkpoints_to_a_live_litestream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCALMEM_WAL_AUTOCHECKPOINT", raising=False)
    db = tmp_path / "live.db"
    store = Store(db, embedder=HashEmbedder())
    try:
        assert autocheckpoint_after_a_write(store, "before Litestream") == checkpoints.DEFAULT_AUTOCHECKPOINT
        config = replica.write_config(db, f"file://{tmp_path / 'rep'}", tmp_path / "cfg")
        proc = replica.start_litestream(db, config, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not checkpoints.live(db) and time.monotonic() < deadline:
                time.sleep(0.05)  # until the child has exec'd Litestream (before, its cmdline is Python's)
            assert checkpoints.live(db)
            # a connection opened before Litestream started sees it at its next write
            assert autocheckpoint_after_a_write(store, "while Litestream replicates") == 0
            assert in_another_process(db) == 0
            doctor = subprocess.run(driver("--db", str(db), "doctor"), env=env(), capture_output=True, text=True)
            assert "Litestream replicates it now" in doctor.stdout + doctor.stderr
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        assert not checkpoints.live(db) and checkpoints.crashed(db)  # the marker stays, naming a dead process
        # killed, not stopped: still no checkpoint of ours, none when the last connection closes
        assert autocheckpoint_after_a_write(store, "after Litestream was killed") == 0
        assert in_another_process(db) == 0
        wal = Path(f"{db}-wal")
        store.close()
        assert wal.exists() and wal.stat().st_size > 0  # the last connection closed: the WAL is left for Litestream
        doctor = subprocess.run(driver("--db", str(db), "doctor"), env=env(), capture_output=True, text=True)
        assert "its Litestream was killed" in doctor.stdout + doctor.stderr
        released = subprocess.run(driver("--db", str(db), "replicate", "--release"), env=env(), capture_output=True)
        assert released.returncode == 0 and not checkpoints.marker(db).exists()
        store = Store(db, embedder=HashEmbedder())
        assert autocheckpoint_after_a_write(store, "released") == checkpoints.DEFAULT_AUTOCHECKPOINT
        assert in_another_process(db) == checkpoints.DEFAULT_AUTOCHECKPOINT
    finally:
        store.close()


def test_a_marker_naming_no_litestream_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCALMEM_WAL_AUTOCHECKPOINT", raising=False)
    db = tmp_path / "s.db"
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    checkpoints.announce(db, int(done.stdout))
    assert not checkpoints.live(db)  # that process has ended
    if Path("/proc/self/cmdline").exists():
        checkpoints.announce(db, os.getpid())  # alive, but not Litestream: a reused pid
        assert not checkpoints.live(db)
    checkpoints.marker(db).write_text("not a pid\n")
    assert not checkpoints.live(db)
    checkpoints.withdraw(db, 12345)  # names another pid: kept
    assert checkpoints.marker(db).exists()
    monkeypatch.setenv("LOCALMEM_WAL_AUTOCHECKPOINT", "0")
    assert checkpoints.autocheckpoint_pages(db) == 0
    store = Store(db, embedder=HashEmbedder())
    try:
        assert autocheckpoint_after_a_write(store, "forced off") == 0
    finally:
        store.close()
