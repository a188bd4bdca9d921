"""Faults a sync tool and a machine really produce, each on real files (and real
processes where a kill matters); each ends converged with nothing acknowledged lost."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from localmem.sync.run import status
from tests.helpers.devices import a_dev
from tests.helpers.sync import hashes, open_device, session, state, sync


def _root(tmp_path: Path, name: str = "folder") -> Path:
    p = tmp_path / name
    p.mkdir()
    return p


def _segments(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix == ".seg")


def test_half_synced_segment_waits_then_folds(tmp_path: Path) -> None:
    root, carried = _root(tmp_path), _root(tmp_path, "carried")
    a, c = open_device(tmp_path / "a.db"), open_device(tmp_path / "c.db")
    a.write(session("s", "Half of this arrives first.", "Then the rest."))
    sync(a, root)
    (seg,) = _segments(root / a_dev(a))
    data = seg.read_bytes()
    (carried / a_dev(a)).mkdir()
    (carried / a_dev(a) / seg.name).write_bytes(data[: len(data) // 2])
    first = sync(c, carried)
    assert first.folded.incomplete and not hashes(c)
    assert status(c, carried)["refused"][0]["incomplete"] is True
    (carried / a_dev(a) / seg.name).write_bytes(data)
    sync(c, carried)
    assert sorted(hashes(c)) == sorted(hashes(a))
    assert status(c, carried)["refused"] == []


def test_a_corrupted_byte_is_refused_until_a_good_copy_arrives(tmp_path: Path) -> None:
    root, carried = _root(tmp_path), _root(tmp_path, "carried")
    a, c = open_device(tmp_path / "a.db"), open_device(tmp_path / "c.db")
    a.write(session("s", "A byte flips on the way."))
    sync(a, root)
    (seg,) = _segments(root / a_dev(a))
    bad = bytearray(seg.read_bytes())
    bad[-3] ^= 0x40
    (carried / a_dev(a)).mkdir()
    (carried / a_dev(a) / seg.name).write_bytes(bytes(bad))
    assert sync(c, carried).folded.refused and not hashes(c)
    assert "sha256" in status(c, carried)["refused"][0]["reason"]
    shutil.copy(seg, carried / a_dev(a) / seg.name)
    sync(c, carried)
    assert hashes(c) == hashes(a)


def test_sync_tool_conflict_copies_with_other_bytes_are_folded_too(tmp_path: Path) -> None:
    """Two stores with one device id (a copied store) both wrote segment 1: the sync tool
    keeps one under the name and the other as a conflict copy; both are folded."""
    root = _root(tmp_path)
    a = open_device(tmp_path / "a.db")
    a.write(session("s", "Before the copy."))
    sync(a, root)
    a.close()
    shutil.copy(tmp_path / "a.db", tmp_path / "twin.db")
    a, twin = open_device(tmp_path / "a.db"), open_device(tmp_path / "twin.db")
    a.write(session("s1", "Written by the original."))
    twin.write(session("s2", "Written by the twin."))
    sync(a, root)
    staged = _root(tmp_path, "twin_folder")
    sync(twin, staged)
    (seg2,) = _segments(staged / a_dev(twin))
    dev = root / a_dev(a)
    shutil.copy(seg2, dev / "00000002.sync-conflict-20240101-120000-ABCDEFG.seg")
    shutil.copy(seg2, dev / "00000002 (Ana's conflicted copy 2024-01-01).seg")
    c = open_device(tmp_path / "c.db")
    sync(c, root)
    texts = {str(r[0]) for r in c.conn.execute("SELECT text FROM turns")}
    assert texts == {"Before the copy.", "Written by the original.", "Written by the twin."}


def test_older_segment_after_newer_ones(tmp_path: Path) -> None:
    root, carried = _root(tmp_path), _root(tmp_path, "carried")
    a, c = open_device(tmp_path / "a.db"), open_device(tmp_path / "c.db")
    a.write(session("s1", "First segment."))
    sync(a, root)
    a.write(session("s2", "Second segment."))
    sync(a, root)
    a.forget(session="s1")  # the third segment is a tombstone for the first one's turn
    a.write(session("s3", "Third segment."))
    sync(a, root)
    segs = _segments(root / a_dev(a))
    assert len(segs) == 3
    (carried / a_dev(a)).mkdir()
    for seg in (segs[2], segs[0], segs[1]):
        shutil.copy(seg, carried / a_dev(a) / seg.name)
        sync(c, carried)
    assert state(c) == state(a)
    assert status(c, carried)["devices"][0]["lag_segments"] == 0


def test_a_newer_format_is_refused_reported_and_the_rest_folds(tmp_path: Path) -> None:
    root = _root(tmp_path)
    a, c = open_device(tmp_path / "a.db"), open_device(tmp_path / "c.db")
    a.write(session("s", "Old format."))
    sync(a, root)
    future = root / a_dev(a) / "00000009.seg"
    future.write_bytes(b"LMSEG/7\n{}\nwhatever")
    done = sync(c, root)
    assert any("format version 7 is newer" in r for r in done.folded.refused)
    assert hashes(c) == hashes(a)
    report = status(c, root)
    assert report["refused"][0]["name"] == "00000009.seg" and report["devices"][0]["lag_segments"] == 1
    assert future.exists()  # nothing deleted: a newer localmem folds it later


def test_a_removed_device_keeps_what_was_folded(tmp_path: Path) -> None:
    root = _root(tmp_path)
    a, c = open_device(tmp_path / "a.db"), open_device(tmp_path / "c.db")
    a.write(session("s", "From a laptop that was retired."))
    sync(a, root)
    sync(c, root)
    shutil.rmtree(root / a_dev(a))
    sync(c, root)
    assert hashes(c) == hashes(a)
    assert [d["device"] for d in status(c, root)["devices"] if not d["this_device"]] == [a_dev(a)]


def test_a_store_restored_from_an_old_backup_rejoins(tmp_path: Path) -> None:
    root = _root(tmp_path)
    a, b = open_device(tmp_path / "a.db"), open_device(tmp_path / "b.db")
    a.write(session("s1", "Before the backup."))
    sync(a, root)
    a.close()
    shutil.copy(tmp_path / "a.db", tmp_path / "a.backup")
    a = open_device(tmp_path / "a.db")
    a.write(session("s2", "After the backup, then lost."))
    sync(a, root)
    a.close()
    for suffix in ("-wal", "-shm"):
        Path(str(tmp_path / "a.db") + suffix).unlink(missing_ok=True)
    shutil.copy(tmp_path / "a.backup", tmp_path / "a.db")
    a = open_device(tmp_path / "a.db")
    a.write(session("s3", "After the restore."))
    sync(a, root)
    names = [p.name for p in _segments(root / a_dev(a))]
    assert names == ["00000001.seg", "00000002.seg", "00000003.seg"]  # none rewritten
    texts = {str(r[0]) for r in a.conn.execute("SELECT text FROM turns")}
    assert texts == {"Before the backup.", "After the backup, then lost.", "After the restore."}
    sync(b, root)
    assert state(a) == state(b)


def test_two_devices_ingest_the_same_export_at_once(tmp_path: Path) -> None:
    root = _root(tmp_path)
    a, b = open_device(tmp_path / "a.db"), open_device(tmp_path / "b.db")
    export = [session(f"chat{i}", *(f"Line {j} of chat {i}." for j in range(4)), source="chatgpt") for i in range(6)]
    threads = [threading.Thread(target=s.write_sessions, args=(export,)) for s in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in (a, b, a, b):
        sync(s, root)
    assert sorted(hashes(a)) == sorted(hashes(b)) and len(hashes(a)) == 24 == len(set(hashes(a)))


def _run(role: str, db: Path, root: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.sync_worker", role, str(db), str(root), *extra],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_kill_9_mid_write_and_mid_fold(tmp_path: Path) -> None:
    """A device killed while it writes and syncs, and one killed while it folds, then run
    again: every turn acknowledged by the writer reaches the folder's reader once."""
    root = _root(tmp_path)
    rng = random.Random(22)
    writer = tmp_path / "a.db"
    acked: set[str] = set()
    for _round in range(3):
        proc = _run("write-sync", writer, root, "40")
        assert proc.stdout is not None
        first = proc.stdout.readline()  # started (the import takes a while on a busy machine)
        time.sleep(rng.uniform(0.5, 2.0))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        acked |= {line.split()[1] for line in (first + out).splitlines() if line.startswith("wrote")}
        assert acked, "the writer never got to write"
    leftovers = [p.name for p in (root / os.listdir(root)[0]).iterdir() if p.name.startswith(".")]
    bulk = open_device(tmp_path / "bulk.db")  # enough segments that a fold takes a while
    for i in range(150):
        bulk.write(session(f"bulk{i}", f"Bulk {i} one.", f"Bulk {i} two."))
        sync(bulk, root)
    reader = tmp_path / "c.db"
    killed_mid_fold = 0
    for n in range(4):
        # Even rounds pause the fold after segment k, so those kills land mid-fold for
        # certain; odd rounds kill on the fly, wherever the signal finds the process.
        k = rng.randint(1, 30)  # four rounds fold at most 120 of the 150+ segments
        pause = ("--pause-at", str(k)) if n % 2 == 0 else ()
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.sync_worker", "sync", str(reader), str(root), *pause],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        seen = ""
        while not seen.startswith(("recorded " + str(k), "folded")):
            seen = proc.stdout.readline()
            assert seen, "the folding process ended without a word"
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        killed_mid_fold += "folded" not in seen + out
    assert killed_mid_fold >= 2, "a paused fold was not killed mid-fold"
    a, c = open_device(writer), open_device(reader)
    sync(a, root)  # the writer's last pass after its kill exports what it had not
    sync(bulk, root)
    assert not [p for p in (root / a_dev(a)).iterdir() if p.name.startswith(".")], leftovers
    sync(c, root)
    keys = {str(r[0]) for r in c.conn.execute("SELECT key FROM sessions")}
    assert acked <= keys
    assert sorted(hashes(c)) == sorted(hashes(a)) and len(hashes(c)) == len(set(hashes(c)))
    assert state(c) == state(a) == state(bulk)
