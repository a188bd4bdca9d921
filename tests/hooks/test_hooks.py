"""The agents' hooks as the agents run them: `python -m localmem.hooks` processes with the
client's JSON on stdin. Stop ingests the transcript's new part; a session start and a
prompt get the project's memory in the client's reply shape (a prompt only above the
bar); what a hook injected is not stored again when the transcript comes back; and a
hook whose store is locked, full or without its key, that runs out of time or gets a bad
payload exits 0 with nothing on stdout, while `doctor` and `stats` name the failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from localmem.bench import agent_logs
from localmem.hooks import status
from localmem.storage.bench import reads
from localmem.util import injected
from tests.helpers.hooks import CWD, SESSION, cli, context_of, hook

FIXTURES = Path(__file__).resolve().parents[1] / "ingest" / "fixtures"


def texts(db: Path) -> list[str]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [t.text for t in reads.turn_texts(conn)]
    finally:
        conn.close()


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    folder = tmp_path / "projects" / "-home-dev-app"
    folder.mkdir(parents=True)
    log = folder / f"{SESSION}.jsonl"
    log.write_text("\n".join(agent_logs.transcript(SESSION, CWD, 4)) + "\n", "utf-8")
    return log


@pytest.fixture
def stored(tmp_path: Path, transcript: Path) -> Path:
    """A store the Stop hook made from the transcript."""
    db = tmp_path / "m.db"
    run = hook(db, "stop", {"session_id": SESSION, "transcript_path": str(transcript), "cwd": CWD})
    assert run.returncode == 0 and run.stdout == b"" and run.stderr == b""
    return db


def test_stop_stores_the_transcript_and_only_its_new_part_next_time(stored: Path, transcript: Path) -> None:
    assert texts(stored) == agent_logs.expected_turns(4)
    with transcript.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(agent_logs.exchange(SESSION, CWD, 4)) + "\n")
    again = hook(stored, "pre-compact", {"session_id": SESSION, "transcript_path": str(transcript), "cwd": CWD})
    assert again.returncode == 0 and again.stdout == b""
    assert texts(stored) == agent_logs.expected_turns(5)
    ran = status.read(stored)
    assert ran["events"]["stop"]["quiet"] == 1 and ran["events"]["pre-compact"]["quiet"] == 1
    assert ran["last_run"]["new"] == 3 and not ran.get("last_error")


def test_session_start_and_prompt_reply_in_each_clients_shape(stored: Path) -> None:
    start = {"session_id": "new-session", "cwd": CWD, "source": "startup"}
    text = context_of(hook(stored, "session-start", start), "SessionStart")
    assert "left off" in text and "Module 3 returns an empty list for empty input; done." in text
    for client, name in (("codex", "SessionStart"), ("gemini", "SessionStart")):
        assert "Module 3" in context_of(hook(stored, "session-start", start, client), name)
    # another session: a prompt does not repeat what its session's start gave (test_context_given.py)
    ask = {"session_id": "prompt-session", "cwd": CWD, "prompt": "what does module 2 return for empty input?"}
    for client, name in (("claude-code", "UserPromptSubmit"), ("codex", "UserPromptSubmit"), ("gemini", "BeforeAgent")):
        assert "Module 2 returns an empty list" in context_of(hook(stored, "prompt", ask, client), name)
    # another project sees none of this project's agent talk
    elsewhere = hook(stored, "session-start", {"session_id": "x", "cwd": "/home/dev/other"})
    assert elsewhere.returncode == 0 and b"Module 3 returns" not in elsewhere.stdout
    # the agent's own current session is not recalled to it
    same = hook(stored, "prompt", {**ask, "session_id": SESSION})
    assert same.returncode == 0 and same.stdout == b""


def test_a_prompt_below_the_bar_gets_nothing(stored: Path) -> None:
    off = {"session_id": "s2", "cwd": CWD, "prompt": "recommend a good sourdough bread recipe with rye flour"}
    run = hook(stored, "prompt", off)
    assert run.returncode == 0 and run.stdout == b""
    last = status.read(stored)["last_run"]
    assert last["outcome"] == "quiet" and last["best_cosine"] < 0.5
    slash = hook(stored, "prompt", {**off, "prompt": "/compact"})
    assert slash.returncode == 0 and slash.stdout == b""


def test_what_a_hook_injected_is_not_stored_again(stored: Path, tmp_path: Path) -> None:
    ask = {"session_id": "s3", "cwd": CWD, "prompt": "what does module 1 return for empty input?"}
    given = context_of(hook(stored, "prompt", ask), "UserPromptSubmit")
    body = "\n".join(given.splitlines()[1:-1])  # the block without its first and last line
    # the next transcript carries the injected text: once wrapped (Gemini appends it to the
    # prompt), once without its wrapper (pasted back by hand)
    log = tmp_path / "s3.jsonl"
    lines = [
        *agent_logs.exchange("s3", CWD, 10, prompt_extra=given),
        *agent_logs.exchange("s3", CWD, 11, prompt_extra="\n" + body.strip()),
    ]
    log.write_text("\n".join(lines) + "\n", "utf-8")
    run = hook(stored, "stop", {"session_id": "s3", "transcript_path": str(log), "cwd": CWD})
    assert run.returncode == 0
    new = texts(stored)[len(agent_logs.expected_turns(4)) :]
    assert new[0] == "Step 10: please check that module 10 handles empty input."
    assert new[3] == "Step 11: please check that module 11 handles empty input."
    assert not any("Recalled memory" in t or "[2] assistant:" in t or injected.OPEN in t for t in new)


# -- failures: the agent unaffected, doctor and stats name them -------------------------------


def failed_quietly(run: subprocess.CompletedProcess[bytes], db: Path, kind: str) -> dict[str, Any]:
    assert run.returncode == 0 and run.stdout == b"", (run.returncode, run.stdout, run.stderr)
    ran = status.read(db)
    assert ran["last_error"]["kind"] == kind, ran
    return ran


def doctor_names(db: Path, kind: str) -> None:
    got = json.loads(cli(db, "doctor", "--json").stdout)
    check = next(c for c in got if c["name"] == "hook runs")
    assert not check["ok"] and kind in check["detail"], check
    stats = cli(db, "stats")
    if stats.returncode == 0:
        assert f" {kind}" in stats.stdout.split("hooks ", 1)[1] and "last hook error" in stats.stdout


@pytest.fixture
def held_lock(stored: Path) -> Iterator[None]:
    conn = apsw.Connection(str(stored))
    conn.execute("BEGIN IMMEDIATE")
    yield
    conn.execute("ROLLBACK")
    conn.close()


def test_a_locked_store(stored: Path, transcript: Path, held_lock: None) -> None:
    with transcript.open("a", encoding="utf-8") as fh:
        fh.write("\n".join(agent_logs.exchange(SESSION, CWD, 4)) + "\n")
    t0 = time.monotonic()
    run = hook(
        stored,
        "stop",
        {"session_id": SESSION, "transcript_path": str(transcript), "cwd": CWD},
        LOCALMEM_HOOKS_BACKGROUND_DEADLINE="10",  # the worker gives up on the lock after 5 s
    )
    assert time.monotonic() - t0 < 60
    failed_quietly(run, stored, "store locked")
    doctor_names(stored, "store locked")


def test_a_full_disk(tmp_path: Path, stored: Path, transcript: Path) -> None:
    mnt = tmp_path / "small"
    mnt.mkdir()
    size = stored.stat().st_size + 256_000
    opts = f"size={size},nr_inodes=64"
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        db = mnt / "m.db"
        db.write_bytes(stored.read_bytes())
        status.create(db)  # `hooks install` makes it; a full disk then still takes records
        reader = apsw.Connection(str(db))  # another process on the store: its -wal and -shm exist
        reader.execute("SELECT count(*) FROM turns").fetchall()
        filler = mnt / "filler"
        with filler.open("wb", buffering=0) as fh:  # the disk is full now
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError:
                pass
        big = [agent_logs.exchange(SESSION, CWD, i) for i in range(4, 40)]
        with transcript.open("a", encoding="utf-8") as fh:
            fh.write("\n".join(line for ex in big for line in ex) + "\n")
        run = hook(db, "stop", {"session_id": SESSION, "transcript_path": str(transcript), "cwd": CWD})
        failed_quietly(run, db, "disk full")
        doctor_names(db, "disk full")
        reader.close()
        assert texts(db) == agent_logs.expected_turns(4)  # what was stored is all there
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_a_missing_key(tmp_path: Path) -> None:
    # A store encrypted (SQLite3 Multiple Ciphers leaves no plaintext header: whole pages of
    # noise) while no key is set: the same path an encrypted store takes without its key.
    db = tmp_path / "locked.db"
    db.write_bytes(os.urandom(8192))
    env = {k: v for k, v in os.environ.items() if k not in ("LOCALMEM_KEY", "LOCALMEM_KEY_FILE")}
    run = subprocess.run(
        [sys.executable, "-m", "localmem.hooks", "--db", str(db), "prompt", "--client", "codex"],
        input=json.dumps({"session_id": "s", "cwd": CWD, "prompt": "what did we decide about the cache?"}).encode(),
        capture_output=True,
        timeout=300,
        env=env,
    )
    failed_quietly(run, db, "key missing")
    doctor_names(db, "key missing")


def test_a_timeout_and_a_bad_payload(stored: Path, tmp_path: Path) -> None:
    ask = {"session_id": "s", "cwd": CWD, "prompt": "what does module 2 return?"}
    # a machine's first hook (no saved embedder session): with the saved one, a recall on
    # this small store can finish inside the shortest deadline (0.1 s)
    cold = str(tmp_path / "cold-cache")
    slow = hook(stored, "prompt", ask, LOCALMEM_HOOKS_PROMPT_DEADLINE="0.1", XDG_CACHE_HOME=cold)
    failed_quietly(slow, stored, "timeout")
    bad = hook(stored, "session-start", b"this is not json {")
    failed_quietly(bad, stored, "bad payload")
    wrong = hook(stored, "no-such-event", {"session_id": "s"})
    failed_quietly(wrong, stored, "bad payload")
    ran = status.read(stored)
    assert ran["failures"] == {"timeout": 1, "bad payload": 2}
    # the last run failed: doctor fails it; a run that works after it turns it into a warning
    doctor_names(stored, "bad payload")
    assert hook(stored, "prompt", ask).returncode == 0
    got = json.loads(cli(stored, "doctor", "--json").stdout)
    check = next(c for c in got if c["name"] == "hook runs")
    assert check["ok"] and check["warn"] and "bad payload" in check["detail"]


def test_the_status_file_never_grows(stored: Path) -> None:
    path = Path(status.path_for(stored))
    before = path.stat().st_size
    for i in range(30):
        status.record(stored, "codex", "prompt", "failed", ms=1.0, kind="error", message="x" * 5000 + str(i))
    assert path.stat().st_size == before == status.SIZE
    assert status.read(stored)["failures"]["error"] == 30


def test_a_transcript_that_is_not_there(stored: Path, tmp_path: Path) -> None:
    gone = tmp_path / "moved-away.jsonl"
    run = hook(stored, "stop", {"session_id": SESSION, "transcript_path": str(gone), "cwd": CWD})
    ran = failed_quietly(run, stored, "no transcript")
    assert str(gone) in ran["last_error"]["message"]
    doctor_names(stored, "no transcript")
    # a payload that names none (Codex's null for a session it keeps no log of): nothing to store
    none = hook(stored, "stop", {"session_id": SESSION, "transcript_path": None, "cwd": CWD}, "codex")
    assert none.returncode == 0 and none.stdout == b""
    last = status.read(stored)["last_run"]
    assert last["outcome"] == "quiet" and last["why"] == "the payload names no transcript"
