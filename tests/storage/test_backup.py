"""``localmem backup``: SQLite's online backup while a real writer process keeps writing.
Every copy passes integrity_check and holds whole write transactions only (a prefix of
the writer's batches, each with all its turns); an existing file is replaced only with
``--force``; the copy opens as a store."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import apsw

from localmem.storage.write.store import Store
from tests.helpers.cli import ROOT, driver
from tests.helpers.fakes import HashEmbedder

WRITER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.helpers.fakes import HashEmbedder
from localmem.records import TurnIn
from localmem.storage.write.store import Store
store = Store(sys.argv[1], embedder=HashEmbedder())
print("ready", flush=True)
k = 0
while True:
    turns = [TurnIn(f"Batch {{k}} turn {{j}} is about subject {{k * 5 + j}}.", speaker="W") for j in range(5)]
    store.write(turns, session=f"b{{k}}")
    k += 1
    if k % 20 == 0:
        print(k, flush=True)
"""


def batches(path: Path) -> dict[int, int]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert [r[0] for r in conn.execute("PRAGMA integrity_check")] == ["ok"]
        rows = conn.execute(
            "SELECT s.key, count(t.id) FROM sessions s JOIN turns t ON t.session_id = s.id GROUP BY s.id"
        )
        return {int(key[1:]): int(n) for key, n in rows}
    finally:
        conn.close()


def test_backup_while_a_writer_writes_is_consistent(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    Store(db, embedder=HashEmbedder()).close()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER.format(root=str(ROOT)), str(db)], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    seen: list[int] = []
    try:
        writer.stdout.readline()  # 20 batches written: the writer is in its stride
        for i in range(3):
            out = tmp_path / f"copy{i}.db"
            proc = subprocess.run(
                driver("--db", str(db), "backup", str(out), "--json"), capture_output=True, text=True, timeout=120
            )
            assert proc.returncode == 0, proc.stderr
            report = json.loads(proc.stdout)
            got = batches(out)
            assert sorted(got) == list(range(len(got))), "not a prefix of the writer's batches"
            assert set(got.values()) == {5}, "a batch is in the copy only in part"
            assert report["turns"] == 5 * len(got) and report["sessions"] == len(got)
            seen.append(len(got))
            time.sleep(0.3)
        assert writer.poll() is None, "the writer must still be writing during the backups"
    finally:
        writer.kill()
        writer.wait()
    assert seen[-1] > seen[0] >= 20  # the writer went on writing while copies were taken
    with Store(tmp_path / "copy2.db", embedder=HashEmbedder()) as restored:  # the copy is a usable store
        assert restored.stats()["turns"] == 5 * seen[-1]


def test_backup_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    Store(db, embedder=HashEmbedder()).close()
    out = tmp_path / "copy.db"
    out.write_text("precious", "utf-8")
    proc = subprocess.run(driver("--db", str(db), "backup", str(out)), capture_output=True, text=True)
    assert proc.returncode == 3 and str(out) in proc.stderr and "--force" in proc.stderr
    assert "Traceback" not in proc.stderr and out.read_text("utf-8") == "precious"
    proc = subprocess.run(driver("--db", str(db), "backup", str(out), "--force"), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert batches(out) == {} and not list(tmp_path.glob(".copy.db.partial-*"))
    missing = subprocess.run(
        driver("--db", str(tmp_path / "none.db"), "backup", str(tmp_path / "x.db")), capture_output=True, text=True
    )
    assert missing.returncode == 7 and "no database at" in missing.stderr
