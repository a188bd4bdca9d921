"""Cursor's hooks as Cursor runs them: `python -m localmem.hooks … --client cursor` processes
with Cursor's payload on stdin (its fields as recorded from the real `cursor-agent`:
``conversation_id``, ``workspace_roots``, ``cursor_version``, ``transcript_path`` null).
A stop stores the conversation from the transcript Cursor keeps under
``~/.cursor/projects`` (either layout), with its project; a missing transcript is a counted
failure; a session start gets the project's memory in Cursor's reply shape; a Cursor
payload reaching a Claude Code entry (Cursor's third-party hooks) stores and injects
nothing, so the conversation is never taken twice.

Cursor's CLI is not on a package registry (it installs from cursor.com), so no test here
runs it: the payloads are the recorded ones (``localmem.hooks.events``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apsw
import pytest

from localmem.hooks import events, status
from localmem.storage.bench import reads
from localmem.util import injected
from tests.helpers.hooks import hook

CONV = "5b0e2f6a-1c4d-4e8f-9a7b-3c2d1e0f9a8b"
ROOT = "/home/dev/shop-app"
LINES = [
    {"role": "user", "message": {"content": [{"type": "text", "text": "<timestamp>Mon</timestamp>\n<user_query>\n"
                                              "Why does checkout reject the SPRING coupon?\n</user_query>"}]}},
    {"role": "assistant", "message": {"content": [
        {"type": "thinking", "thinking": "Look at the coupon table first."},
        {"type": "text", "text": "The SPRING coupon expired on March 31; checkout compares dates in UTC."},
    ]}},
]  # fmt: skip


def payload(event_name: str, **extra: Any) -> dict[str, Any]:
    return {
        "conversation_id": CONV,
        "generation_id": "9f8e7d6c-0000-4000-8000-000000000001",
        "model": "default",
        "hook_event_name": event_name,
        "cursor_version": "2026.02.13-41ac335",
        "workspace_roots": [ROOT],
        "user_email": "dev@example.com",
        "transcript_path": None,
        **extra,
    }


def write_transcript(home: Path, folder: str, nested: bool = False) -> Path:
    base = home / ".cursor" / "projects" / folder / "agent-transcripts"
    path = base / CONV / f"{CONV}.jsonl" if nested else base / f"{CONV}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES), "utf-8")
    return path


def stored(db: Path) -> list[tuple[str, str, str]]:
    """(speaker, text, session cwd) of every turn."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        cwd = dict(conn.execute("SELECT key, cwd FROM sessions").fetchall())
        return [(t.speaker, t.text, str(cwd.get(CONV, ""))) for t in reads.turn_texts(conn)]
    finally:
        conn.close()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.mark.parametrize("nested", [False, True], ids=["cli layout", "editor layout"])
def test_stop_stores_the_conversation_cursor_keeps_with_its_project(tmp_path: Path, home: Path, nested: bool) -> None:
    write_transcript(home, "home-dev-shop-app", nested)
    db = tmp_path / "m.db"
    run = hook(db, "stop", payload("stop", status="completed", loop_count=0), "cursor")
    assert run.returncode == 0 and run.stdout == b"" and run.stderr == b""
    assert stored(db) == [
        ("user", "Why does checkout reject the SPRING coupon?", ROOT),
        ("assistant", "The SPRING coupon expired on March 31; checkout compares dates in UTC.", ROOT),
    ]
    hook(db, "session-end", payload("sessionEnd", session_id=CONV, reason="completed"), "cursor")
    assert len(stored(db)) == 2  # the session's end reads on from where the stop stopped


def test_a_transcript_in_another_project_folder_is_found(tmp_path: Path, home: Path) -> None:
    write_transcript(home, "Users-dev-shop-app")  # the folder another machine's path made
    db = tmp_path / "m.db"
    hook(db, "stop", payload("stop", status="completed"), "cursor")
    assert stored(db)[0][1] == "Why does checkout reject the SPRING coupon?"


def test_no_transcript_is_a_failure_not_a_quiet_run(tmp_path: Path, home: Path) -> None:
    db = tmp_path / "m.db"
    run = hook(db, "stop", payload("stop", status="completed"), "cursor")
    assert run.returncode == 0 and run.stdout == b""
    got = status.read(db)
    assert got["events"]["stop"]["failed"] == 1 and got["last_error"]["kind"] == "no transcript"
    assert "home-dev-shop-app" in got["last_error"]["message"]


def test_session_start_replies_in_cursors_shape(tmp_path: Path, home: Path) -> None:
    write_transcript(home, "home-dev-shop-app")
    db = tmp_path / "m.db"
    hook(db, "stop", payload("stop", status="completed"), "cursor")
    nxt = payload("sessionStart", conversation_id="7c1d-next", session_id="7c1d-next", is_background_agent=False)
    run = hook(db, "session-start", nxt, "cursor")  # the next conversation in the project
    assert run.returncode == 0 and run.stderr == b""
    reply = json.loads(run.stdout)
    assert set(reply) == {"additional_context"}
    text = reply["additional_context"]
    assert text.startswith(injected.OPEN + ' nonce="') and "SPRING coupon expired" in text


def test_a_cursor_payload_at_a_claude_code_entry_does_nothing(tmp_path: Path, home: Path) -> None:
    """Cursor runs ~/.claude/settings.json's hooks too (third-party skills): those entries
    leave Cursor to its own, so nothing is stored or injected twice."""
    transcript = write_transcript(home, "home-dev-shop-app")
    db = tmp_path / "m.db"
    hook(db, "stop", payload("stop", status="completed"), "cursor")
    before = stored(db)
    again = payload("Stop", transcript_path=str(transcript))  # even a payload that names the transcript
    run = hook(db, "stop", again, "claude-code")
    assert run.returncode == 0 and run.stdout == b"" and stored(db) == before
    start = hook(db, "session-start", payload("SessionStart", conversation_id="7c1d-next", cwd=ROOT), "claude-code")
    assert start.returncode == 0 and start.stdout == b""
    assert status.read(db)["events"]["session-start"]["quiet"] == 1
    parsed = events.parse("claude-code", "stop", json.dumps(again).encode())
    assert parsed.host == "cursor" and parsed.transcript_path == ""
