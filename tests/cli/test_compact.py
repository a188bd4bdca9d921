"""``localmem compact`` in real processes: after a forget it gives the freed pages back (the
file shrinks, the forgotten text is in no file of the store, every turn left is there); a
store another process is writing to is left as it was, exit 1, with the reason on one line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.helpers.busy import lock_held
from tests.helpers.cli import driver

MARK = "zebracrossing-7f3a"


def _cli(db: Path, *args: str, busy_ms: int = 60_000) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOCALMEM_BUSY_TIMEOUT_MS": str(busy_ms)}
    return subprocess.run(driver("--db", str(db), *args), capture_output=True, text=True, env=env, timeout=300)


def _store(tmp_path: Path) -> Path:
    log = tmp_path / "chat.jsonl"
    rows = [
        {"session": f"s{s}", "speaker": "Ana", "text": f"{MARK if s == 0 else 'plain'} note {s}-{t} " + "x" * 400}
        for s in range(6)
        for t in range(40)
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    db = tmp_path / "m.db"
    assert _cli(db, "ingest", str(log)).returncode == 0
    assert _cli(db, "forget", "--session", "s0").returncode == 0
    return db


def _files(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def test_compact_gives_a_forgets_pages_back(tmp_path: Path) -> None:
    db = _store(tmp_path)
    done = _cli(db, "compact", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["done"] is True and out["why"] == ""
    assert out["bytes_after"] == db.stat().st_size < out["bytes_before"]
    assert MARK.encode() not in _files(db)
    stats = json.loads(_cli(db, "stats", "--json").stdout)
    assert stats["turns"] == 200


def test_a_store_being_written_is_left_as_it_was(tmp_path: Path) -> None:
    db = _store(tmp_path)
    before = db.stat().st_size
    with lock_held(db):
        refused = _cli(db, "compact", busy_ms=100)
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "could not compact the file" in lines[0] and "localmem compact" in lines[0]
    assert db.stat().st_size == before
    assert json.loads(_cli(db, "stats", "--json").stdout)["turns"] == 200


def test_no_store_is_an_error_naming_the_path(tmp_path: Path) -> None:
    missing = _cli(tmp_path / "none.db", "compact")
    assert missing.returncode != 0 and "none.db" in missing.stderr and not (tmp_path / "none.db").exists()
