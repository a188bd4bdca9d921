"""A prompt holding a lone surrogate (``"\\ud800"`` in the client's JSON: a prompt cut inside
an emoji's UTF-16 pair) is recalled for like any other, on the in-process path (a real
``python -m localmem.hooks`` process) and through a resident process (op ``hook-cli``, a
real socket): ``events.parse`` replaces it with U+FFFD, so no UTF-8 encoder after it (the
tokenizer, SQLite, the socket) meets it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from localmem.bench import agent_logs
from localmem.hooks import events, quick, status
from localmem.hooks.served import HookPlanner
from localmem.records import SessionIn
from localmem.resident import quick as cli_quick
from localmem.resident import unix
from localmem.resident.server import ResidentServer
from localmem.storage.bench import reads
from localmem.storage.write.store import Store
from tests.helpers.hooks import CWD, SESSION, hook

LONE = "Did Ben fix the bike chain? \ud800 and the garden \udfff"
RAW = json.dumps({"session_id": "s9", "cwd": CWD, "prompt": LONE}).encode()  # ensure_ascii: the escapes


def test_parse_replaces_each_lone_surrogate_and_keeps_a_pair() -> None:
    assert b"\\ud800" in RAW
    ev = events.parse("codex", "prompt", RAW)
    assert ev.prompt == LONE.replace("\ud800", "\ufffd").replace("\udfff", "\ufffd")
    ev.prompt.encode("utf-8")  # what every encoder after it does
    pair = events.parse("codex", "prompt", b'{"prompt": "ok \\ud83d\\ude00", "cwd": "/x\\udc80"}')
    assert pair.prompt == "ok \U0001f600" and pair.cwd == "/x\ufffd"


def test_a_hook_process_recalls_for_it(tmp_path: Path) -> None:
    db, log = tmp_path / "m.db", tmp_path / f"{SESSION}.jsonl"
    log.write_text("\n".join(agent_logs.transcript(SESSION, CWD, 4)) + "\n", "utf-8")
    stop = hook(db, "stop", {"session_id": SESSION, "transcript_path": str(log), "cwd": CWD})
    assert stop.returncode == 0 and status.read(db)["last_run"]["outcome"] == "quiet"
    ask = {"session_id": "s9", "cwd": CWD, "prompt": "what does module 2 return for empty input? \ud800"}
    run = hook(db, "prompt", json.dumps(ask).encode())
    assert run.returncode == 0 and run.stderr == b"", run.stderr
    ran = status.read(db)
    assert ran["last_run"]["outcome"] == "replied" and not ran.get("last_error"), ran
    assert "Module 2 returns an empty list" in json.loads(run.stdout)["hookSpecificOutput"]["additionalContext"]


@pytest.fixture
def serving(store: Store, garden_sessions: list[SessionIn]) -> Iterator[ResidentServer]:
    store.write_sessions(garden_sessions)
    srv = ResidentServer(store, hooks=HookPlanner())
    assert srv.start()
    yield srv
    srv.stop()


def test_a_resident_process_recalls_for_it(serving: ResidentServer, store: Store) -> None:
    identity = unix.store_identity(store.path)
    assert identity is not None and serving.path is not None
    caller = cli_quick.caller()
    caller["env"] = {"LOCALMEM_HOOKS_PROMPT_BAR": "-1"}
    request = {
        "protocol": unix.PROTOCOL,
        "version": cli_quick.__version__,
        "op": "hook-cli",
        "store": identity,
        "argv": ["--db", str(store.path), "prompt", "--client", "codex"],
        "stdin": RAW.decode("ascii"),  # what the fast path sends: the payload as read
        **caller,
        "elapsed": 0.01,
    }
    got = quick.exchange(str(serving.path), unix.encode(request))
    assert got["ok"] is True and got["record"]["outcome"] == "replied", got
    assert "bike" in json.loads(got["stdout"])["hookSpecificOutput"]["additionalContext"]
    assert reads.turn_texts(store.conn)  # the store is still readable after the recall
