"""The ingest hooks done after the agent has moved on (`localmem.hooks.background`), with
real hook processes, a real store and a real write lock held by another connection: the
agent's wait ends before the ingest is done (it could not be: the lock is held), the
ingest happens once the lock is released, concurrent Stops on one long transcript store
each turn once and are each counted, and the foreground path leaves at its deadline even
when its own start-up is what is slow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import apsw

from localmem.bench import agent_logs
from localmem.hooks import __main__ as entry_point
from localmem.hooks import background, detach, events, status
from tests.helpers.fastentry import imported_by
from tests.helpers.hooks import CWD, SESSION, hook, settled, status_runs
from tests.helpers.resident import Server

HOOK = [sys.executable, "-m", "localmem.hooks"]


def texts(db: Path) -> list[str]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [t for (t,) in conn.execute("SELECT text FROM turns ORDER BY id")]
    finally:
        conn.close()


def stop(db: Path, log: Path, **env: str) -> subprocess.CompletedProcess[bytes]:
    """The Stop hook as the agent runs it: it waits for the process and its pipes."""
    return subprocess.run(
        [*HOOK, "--db", str(db), "stop", "--client", "claude-code"],
        input=json.dumps({"session_id": SESSION, "transcript_path": str(log), "cwd": CWD}).encode(),
        capture_output=True,
        timeout=120,
        env={**os.environ, **env},
    )


def test_a_stop_under_a_held_write_lock_returns_at_once_and_ingests_after_the_release(tmp_path: Path) -> None:
    log = tmp_path / f"{SESSION}.jsonl"
    log.write_text("\n".join(agent_logs.transcript(SESSION, CWD, 2)) + "\n", "utf-8")
    db = tmp_path / "m.db"
    hook(db, "stop", {"session_id": SESSION, "transcript_path": str(log), "cwd": CWD})
    assert texts(db) == agent_logs.expected_turns(2)
    with log.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(agent_logs.exchange(SESSION, CWD, 2)) + "\n")
    runs = status_runs(db, "stop")
    holder = apsw.Connection(str(db))
    holder.execute("BEGIN IMMEDIATE")  # another process's write lock, held until we say
    try:
        proc = stop(db, log)
        assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
        # the hook is done for the agent while the lock is still held: nothing could be ingested
        time.sleep(0.5)
        assert status_runs(db, "stop") == runs
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    settled(db, "stop", runs + 1)
    assert texts(db) == agent_logs.expected_turns(3)
    last = status.read(db)["last_run"]
    assert last["outcome"] == "quiet" and last["background"] is True and last["new"] > 0, last


def test_concurrent_stops_on_a_long_transcript_store_each_turn_once_and_each_is_counted(tmp_path: Path) -> None:
    log = tmp_path / f"{SESSION}.jsonl"
    log.write_text("\n".join(agent_logs.transcript(SESSION, CWD, 300)) + "\n", "utf-8")
    db = tmp_path / "m.db"
    with ThreadPoolExecutor(6) as pool:
        procs = list(pool.map(lambda _: stop(db, log), range(6)))
    assert all(p.returncode == 0 and p.stdout == b"" and p.stderr == b"" for p in procs)
    settled(db, "stop", 6)
    assert texts(db) == agent_logs.expected_turns(300)  # every turn once, in order
    ran = status.read(db)
    assert ran["events"]["stop"]["runs"] == 6 and not ran.get("failures"), ran


def test_the_queue_keeps_every_payload_for_the_worker_that_holds_the_lock(tmp_path: Path) -> None:
    worker = background.Queue(str(tmp_path / "s"))
    other = background.Queue(str(tmp_path / "s"))
    done: list[tuple[str, str, bytes]] = []
    assert worker.acquire()
    other.push("codex", "stop", b'{"a": 1}', time.time())
    assert other.drain(lambda c, e, raw, at: done.append((c, e, raw))) == 0  # the lock is the worker's
    assert done == [] and worker.pending()
    taken = worker.take()
    worker.release()
    assert [(c, e, raw) for c, e, raw, _ in taken] == [("codex", "stop", b'{"a": 1}')]
    assert not worker.pending()
    other.push("gemini", "session-end", b"\xff not json", time.time())  # carried as bytes, whatever they are
    other.push("claude-code", "pre-compact", b"{}", time.time())
    assert other.drain(lambda c, e, raw, at: done.append((c, e, raw))) == 2
    assert done == [("gemini", "session-end", b"\xff not json"), ("claude-code", "pre-compact", b"{}")]


def test_the_foreground_hook_leaves_at_its_deadline_when_its_start_up_is_slow(tmp_path: Path) -> None:
    # The in-process path's import made slow (the 6-10 s start-up seen after a daemon died):
    # a module on the path delays the import of localmem.hooks.run by 60 s.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys, time\n"
        "class Slow:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'localmem.hooks.run':\n"
        "            time.sleep(60)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Slow())\n",
        "utf-8",
    )
    log = tmp_path / f"{SESSION}.jsonl"
    log.write_text("\n".join(agent_logs.transcript(SESSION, CWD, 2)) + "\n", "utf-8")
    db = tmp_path / "m.db"
    hook(db, "stop", {"session_id": SESSION, "transcript_path": str(log), "cwd": CWD})
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "LOCALMEM_HOOKS_PROMPT_DEADLINE": "1",
        "LOCALMEM_HOOKS_DAEMON_IDLE": "0",
    }
    ask = {"session_id": "other", "cwd": CWD, "prompt": "what does module 1 return for empty input?"}
    t0 = time.monotonic()
    proc = subprocess.run(
        [*HOOK, "--db", str(db), "prompt", "--client", "claude-code"],
        input=json.dumps(ask).encode(),
        capture_output=True,
        timeout=120,
        env=env,
    )
    took = time.monotonic() - t0
    assert proc.returncode == 0 and proc.stdout == b"", proc
    assert took < 45, took  # well before the 60 s import ends (1 s deadline, a wide margin for a loaded machine)
    error = status.read(db)["last_error"]
    assert error["kind"] == "timeout" and "from the hook's start" in error["message"], error


def test_the_foreground_switch_ingests_while_the_caller_waits(tmp_path: Path) -> None:
    log = tmp_path / f"{SESSION}.jsonl"
    log.write_text("\n".join(agent_logs.transcript(SESSION, CWD, 2)) + "\n", "utf-8")
    db = tmp_path / "m.db"
    assert stop(db, log, **{detach.FOREGROUND_ENV: "1"}).returncode == 0
    assert texts(db) == agent_logs.expected_turns(2)  # done before the process exited
    assert "background" not in status.read(db)["last_run"]


def test_the_event_is_read_from_every_spelling_of_the_hook_command_line() -> None:
    assert detach.event_of(["--db", "m.db", "stop", "--client", "codex"]) == "stop"
    assert detach.event_of(["--key-file=/k", "session-end", "--client=gemini", "--db=x"]) == "session-end"
    assert detach.event_of(["--client", "codex", "--key-file", "/k", "pre-compact"]) == "pre-compact"
    assert detach.event_of(["stop"]) == "stop"  # no --client: the parser counts the fault
    assert detach.event_of(["stop", "prompt", "--client", "codex"]) is None
    assert detach.event_of(["--bogus", "stop", "--client", "codex"]) is None
    assert detach.event_of([]) is None


def test_a_stops_parent_process_loads_nothing_of_ours_but_the_fork() -> None:
    assert entry_point.MAX_PAYLOAD == events.MAX_PAYLOAD
    names = imported_by("localmem.hooks.__main__")
    ours = {n for n in names if n.startswith("localmem")}
    assert ours == {"localmem", "localmem.hooks", "localmem.hooks.__main__", "localmem.hooks.detach"}, ours
    assert not {"re", "json", "base64", "typing", "threading"} & names


def test_a_resident_process_reads_a_short_transcript_and_hands_a_long_one_back(tmp_path: Path) -> None:
    log = tmp_path / f"{SESSION}.jsonl"
    log.write_text("\n".join(agent_logs.transcript(SESSION, CWD, 2)) + "\n", "utf-8")
    db = tmp_path / "m.db"
    hook(db, "stop", {"session_id": SESSION, "transcript_path": str(log), "cwd": CWD})  # makes the store
    server = Server(db)
    try:
        with log.open("a", encoding="utf-8") as fh:
            fh.write("\n".join(agent_logs.exchange(SESSION, CWD, 2)) + "\n")
        hook(db, "stop", {"session_id": SESSION, "transcript_path": str(log), "cwd": CWD})
        last = status.read(db)["last_run"]
        assert last["via"] == "resident" and last["background"] is True and last["new"] > 0, last
        assert texts(db) == agent_logs.expected_turns(3)
        # other write settings: what the server would store differs, so the hook's own process reads
        with log.open("a", encoding="utf-8") as fh:
            fh.write("\n".join(agent_logs.exchange(SESSION, CWD, 3)) + "\n")
        hook(db, "stop", {"session_id": SESSION, "transcript_path": str(log), "cwd": CWD}, LOCALMEM_INGEST_REDACT="0")
        assert "via" not in status.read(db)["last_run"]
        assert texts(db) == agent_logs.expected_turns(4)
        # a long catch-up: the server stores its first batches, the hook's own process the rest
        with log.open("a", encoding="utf-8") as fh:
            for i in range(4, 1500):
                fh.write("\n".join(agent_logs.exchange(SESSION, CWD, i)) + "\n")
        hook(db, "stop", {"session_id": SESSION, "transcript_path": str(log), "cwd": CWD})
        assert texts(db) == agent_logs.expected_turns(1500)  # every turn once, in order, whoever stored it
    finally:
        server.stop()


def test_the_light_modules_spell_the_events_as_their_sources_do() -> None:
    from localmem.hooks import quick
    from localmem.resident import wire

    assert quick.INGEST == detach.INGEST_EVENTS == wire.INGEST_EVENTS
    assert set(quick.EVENTS) | set(quick.INGEST) == set(events.EVENTS)
