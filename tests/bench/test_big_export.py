"""Big exports: the generated ChatGPT export (shape, exact counts, streamed), progress
with rate and ETA (on a terminal, to a log, never spamming, --quiet), and interrupted
imports through real ``localmem ingest`` subprocesses (Ctrl-C, SIGTERM, SIGKILL) that
resume to exactly the turns of an uninterrupted import. The model is the HashEmbedder
(the ``driver`` of test_ingest_runner): these tests are about ingest, not embedding."""

from __future__ import annotations

import io
import itertools
import json
import signal
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path

import apsw
import pytest

from localmem.bench import import_bench
from localmem.bench.bigexport import write_export
from localmem.ingest import units
from localmem.util.progress import Progress, clock, log_interval
from tests.helpers.cli import DRIVER, ROOT, driver, stored_units


def test_the_export_has_exactly_n_messages_in_chatgpt_shape(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    stats = write_export(path, 700, seed=3)
    data = json.loads(path.read_text("utf-8"))
    assert stats.messages == 700 and stats.conversations == len(data) and stats.bytes == path.stat().st_size
    messages = 0
    roles: Counter[str] = Counter()
    for conv in data:
        mapping = conv["mapping"]
        assert conv["id"] == conv["conversation_id"] and conv["current_node"] in mapping
        roots = [nid for nid, node in mapping.items() if node["parent"] is None]
        assert len(roots) == 1 and mapping[roots[0]]["message"] is None
        for nid, node in mapping.items():
            assert all(mapping[child]["parent"] == nid for child in node["children"])
            if node["message"] is not None:
                messages += 1
                roles[node["message"]["author"]["role"]] += 1
    assert messages == 700 and {"system", "user", "assistant", "tool"} <= set(roles)
    text = path.read_text("utf-8")
    assert "```" in text and "image_asset_pointer" in text and any(ord(c) > 0x2000 for c in text)

    turns, skipped = 0, Counter[str]()
    for u in units(path, "chatgpt"):
        assert u.error is None
        turns += u.turns
        skipped.update(u.skipped)
    assert turns == stats.turns and 0 < turns < 700
    assert skipped["not on the current branch"] > 0 and skipped["tool call"] > 0 and skipped["system message"] > 0
    assert write_export(tmp_path / "again.json", 700, seed=3).bytes == stats.bytes  # seeded


def test_the_export_is_written_as_a_stream(tmp_path: Path) -> None:
    peaks, sizes = [], []
    for n in (300, 1500):
        tracemalloc.start()
        sizes.append(write_export(tmp_path / f"c{n}.json", n).bytes)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert sizes[1] > 4 * sizes[0] * 0.8
    assert peaks[1] - peaks[0] < (sizes[1] - sizes[0]) / 4, (peaks, sizes)


def seconds(hms: str) -> int:
    h, m, s = hms.split(":")
    return int(h) * 3600 + int(m) * 60 + int(s)


class FakeStream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_progress_to_a_log_is_spaced_and_has_rate_and_eta() -> None:
    out, now = FakeStream(tty=False), Clock()
    with Progress("ingest", 10_000, unit="turns", stream=out, now=now) as bar:
        for _ in range(1000):  # 10 turns a second for 1,000 s, one advance a second
            now.t += 1.0
            bar.advance(10)
    lines = out.getvalue().splitlines()
    assert lines[0] == "ingest: 100/10,000 turns (1.0%), 10.0 turns/s, elapsed 0:00:10, ETA 0:16:30"
    times = [seconds(line.split("elapsed ")[1][:7]) for line in lines]
    assert all(b - a >= 10 for a, b in itertools.pairwise(times))  # never more than one per 10 s
    assert 20 <= len(lines) <= 40 and lines[-1].startswith("ingest: 10,000/10,000 turns (100.0%)")
    assert log_interval(5) == 10 and log_interval(300) == 30 and log_interval(10_000) == 60
    assert clock(3725) == "1:02:05"


def test_progress_eta_follows_the_recent_rate() -> None:
    now = Clock()
    bar = Progress("ingest", 20_000, unit="turns", stream=FakeStream(tty=False), now=now)
    for _ in range(300):  # 300 s at 20 turns/s, then 300 s at 5 turns/s
        now.t += 1.0
        bar.advance(20)
    for _ in range(300):
        now.t += 1.0
        bar.advance(5)
    assert bar.rate() == pytest.approx(5.0)
    assert bar.eta() == pytest.approx((20_000 - 7_500) / 5.0)


def test_progress_on_a_terminal_redraws_and_quiet_shows_nothing() -> None:
    tty, now = FakeStream(tty=True), Clock()
    with Progress("ingest", 100, unit="turns", stream=tty, now=now) as bar:
        for _ in range(10):
            now.t += 0.5
            bar.advance(10)
    assert tty.getvalue().count("\r\x1b[2K") == 11 and tty.getvalue().endswith("\n")
    for stream in (FakeStream(tty=True), FakeStream(tty=False)):
        with Progress("ingest", 100, quiet=True, stream=stream, now=now) as bar:
            now.t += 100
            bar.advance(50)
        assert stream.getvalue() == ""
    short = FakeStream(tty=False)
    with Progress("ingest", 100, stream=short, now=now) as bar:
        now.t += 5  # shorter than the first interval: not a word
        bar.advance(100)
    assert short.getvalue() == ""


# -- real subprocesses ----------------------------------------------------------------


def db_turns(db: Path) -> list[tuple[str, int, str, str]]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [
            (str(r[0]), int(r[1]), str(r[2]), str(r[3]))
            for r in conn.execute(
                "SELECT s.key, t.ord, t.source_id, t.hash FROM turns t JOIN sessions s ON s.id = t.session_id "
                "ORDER BY s.key, t.ord"
            )
        ]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, list[tuple[str, int, str, str]]]:
    """A 1,000-message export and what an uninterrupted import stores of it."""
    folder = tmp_path_factory.mktemp("export")
    path = folder / "conversations.json"
    stats = write_export(path, 1000, seed=1)
    db = folder / "whole.db"
    subprocess.run(driver("--db", str(db), "ingest", str(path), "--json"), check=True, capture_output=True)
    whole = db_turns(db)
    assert len(whole) == stats.turns
    return path, stats.turns, whole


def test_ingest_progress_to_a_pipe_with_rate_and_eta_and_quiet(tmp_path: Path, export: tuple[Path, int, list]) -> None:
    path, n, _ = export
    proc = subprocess.run(
        driver("--db", str(tmp_path / "m.db"), "ingest", str(path), "--progress-every", "1", delay=0.8),
        capture_output=True,
        text=True,
        check=True,
    )
    lines = [line for line in proc.stderr.splitlines() if line.startswith("ingest: ")]
    assert lines and all(" turns/s, elapsed " in line for line in lines), proc.stderr
    assert any(", ETA " in line for line in lines) and lines[-1].startswith(f"ingest: {n:,}/{n:,} turns (100.0%)")
    assert "\r" not in proc.stderr and "Traceback" not in proc.stderr
    quiet = subprocess.run(
        driver("--db", str(tmp_path / "q.db"), "ingest", str(path), "--quiet", "--progress-every", "0.01"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert quiet.stderr == "" and f"{n} turns" in quiet.stdout


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_import_says_how_to_resume_and_resumes_to_the_same_turns(
    tmp_path: Path, export: tuple[Path, int, list], sig: signal.Signals
) -> None:
    path, n, whole = export
    db = tmp_path / "m.db"
    # Slow batches: the signal must land between the first commit and the last batch's
    # stop check (a 3 s window), or the import rightly completes.
    cmd = driver("--db", str(db), "ingest", str(path), delay=1.5)
    # As from a terminal: a shell's background job (CI run with `&`) inherits SIGINT
    # ignored, and Python then rightly leaves it ignored.
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while stored_units(db) == 0 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the import finished before it could be interrupted"
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert "Run the same command again to continue where it stopped" in err and str(path) in err
    stored = len(db_turns(db))
    assert 0 < stored < n

    again = subprocess.run(
        driver("--db", str(db), "ingest", str(path), "--json"), capture_output=True, text=True, check=True
    )
    summary = json.loads(again.stdout)
    assert summary["resumed_at_unit"] > 0 and summary["new"] == n - stored
    assert summary["already_present"] < 512  # at most the batch in flight is read again, never the whole file
    assert db_turns(db) == whole  # same sessions, order, native ids and content as an uninterrupted import


def test_bench_import_kills_with_sigkill_and_checks_the_resume(tmp_path: Path) -> None:
    importer = [sys.executable, "-c", DRIVER.format(root=str(ROOT), delay=1.0)]  # a 2 s window for the kill
    logged: list[str] = []
    r = import_bench.run(1000, tmp_path, kill_at=0.4, seed=2, importer=importer, progress_every=1.0, log=logged.append)
    assert r["ok"] and r["messages"] == 1000 and r["turns_stored"] == r["turns_expected"] and r["duplicates"] == 0
    s = r["resume"]
    assert s["ok"] and s["resumed_at_unit"] > 0 and s["turns_at_kill"] >= 0.4 * r["turns_expected"]
    assert s["turns_at_kill"] + s["new_turns"] == r["turns_stored"]
    assert r["peak_rss_mb"] > 20 and r["cpu_s"] > 0 and r["seconds"] > 0 and r["progress_lines"] > 0
    assert any("resuming" in line for line in logged) and "resume after SIGKILL" in import_bench.table(r)
    # A batch takes longer than the time limit, so the stop comes before the import can end on any machine.
    slow = [sys.executable, "-c", DRIVER.format(root=str(ROOT), delay=3.0)]
    again = import_bench.run(
        1000, tmp_path, kill_at=0, seed=2, importer=slow, progress_every=1.0, time_limit=1.5, log=logged.append
    )
    assert again["generate_s"] == 0.0 and "resume" not in again  # the export is reused; no kill
    assert not again["complete"] and again["ok"] and 0 <= again["turns_stored"] < again["turns_expected"]
    assert "stopped at the time limit" in import_bench.table(again)
