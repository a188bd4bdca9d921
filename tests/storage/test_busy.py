"""Every writer survives a long lock: a real second process holds ``BEGIN IMMEDIATE``
far past the busy timeout (made small with ``LOCALMEM_BUSY_TIMEOUT_MS``) while
``localmem ingest`` / ``forget`` / ``watch`` run as real subprocesses: they say once that
they wait, keep waiting until the lock is released, then succeed; the watcher keeps
watching. The lock is released only after the writer said it waits, so the test does
not depend on how fast a process starts."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import IO, Any

import apsw

from localmem.storage.engine.retry import WAITING
from tests.helpers.busy import lock_held
from tests.helpers.cli import driver, jsonl_lines


def env(timeout_ms: int = 200) -> dict[str, str]:
    return {**os.environ, "LOCALMEM_BUSY_TIMEOUT_MS": str(timeout_ms)}


def read_until(stream: IO[str], text: str) -> list[str]:
    lines = []
    for line in stream:
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"the stream ended before {text!r}: {lines}")


def turns(db: Path) -> int:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return int(conn.execute("SELECT count(*) FROM turns").fetchone()[0])
    finally:
        conn.close()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(driver(*args), capture_output=True, text=True, env=env(), timeout=120)


def waiting_cli(db: Path, *args: str, json_out: bool = True) -> tuple[int, Any, str, float]:
    """Run a command while the lock is held; release it 1 s after the command says it
    waits. Returns exit code, JSON output, all of stderr, seconds it waited after saying so."""
    with lock_held(db):
        proc = subprocess.Popen(
            driver("--db", str(db), *args, *(["--json"] if json_out else [])),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env(),
        )
        assert proc.stderr is not None
        err = read_until(proc.stderr, WAITING)
        said = time.monotonic()
        time.sleep(1.0)  # five busy timeouts: it must go on waiting, not fail
    out, rest = proc.communicate(timeout=60)
    return proc.returncode, json.loads(out) if json_out else out, "".join(err) + rest, time.monotonic() - said


def test_ingest_forget_and_reindex_wait_for_a_long_lock_then_succeed(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    first = tmp_path / "first.jsonl"
    first.write_text(jsonl_lines(0, 5), "utf-8")
    assert cli("--db", str(db), "ingest", str(first)).returncode == 0
    log = tmp_path / "log.jsonl"
    log.write_text(jsonl_lines(100, 120), "utf-8")

    code, out, err, waited = waiting_cli(db, "ingest", str(log))
    assert code == 0, err
    assert "Traceback" not in err and err.count(WAITING) == 1
    assert out["new"] == 20 and turns(db) == 25 and waited >= 1.0

    code, out, err, waited = waiting_cli(db, "forget", "--session", "s2")
    assert code == 0, err
    assert "Traceback" not in err and err.count(WAITING) == 1
    assert out["deleted_turns"] == 20 and turns(db) == 5

    code, out, err, waited = waiting_cli(db, "reindex", json_out=False)
    assert code == 0, err
    assert "Traceback" not in err and err.count(WAITING) == 1 and "re-embedded 5 turns" in out


def test_the_watcher_waits_for_a_long_lock_and_keeps_watching(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    folder = tmp_path / "logs"
    folder.mkdir()
    seed = tmp_path / "seed.jsonl"
    seed.write_text(jsonl_lines(0, 2), "utf-8")
    assert cli("--db", str(db), "ingest", str(seed)).returncode == 0
    cmd = driver("--db", str(db), "watch", str(folder), "--settle", "0.2", "--json")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    assert proc.stdout is not None
    events: list[dict[str, str]] = []

    def until(kind: str, name: str) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            events.append(json.loads(line))
            if events[-1]["event"] == kind and events[-1]["path"].endswith(name):
                return
        raise AssertionError(f"the watcher ended before {kind} {name}: {events}")

    try:
        until("started", "logs")
        with lock_held(db):
            (folder / "a.jsonl").write_text(jsonl_lines(10, 13), "utf-8")
            until("waiting", "a.jsonl")
            time.sleep(2.0)  # ten busy timeouts, several back-offs
        until("ingested", "a.jsonl")
        (folder / "b.jsonl").write_text(jsonl_lines(20, 24), "utf-8")  # still watching
        until("ingested", "b.jsonl")
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    events += [json.loads(line) for line in out.splitlines()]
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    kinds = [e["event"] for e in events]
    assert kinds.count("waiting") == 1 and kinds.count("error") == 0, events
    assert turns(db) == 2 + 3 + 4
