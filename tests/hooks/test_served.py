"""A raw hook line (op `hook-cli`) in one process: a real Unix socket, a real store (the fake
embedder: these tests are about the protocol and the deadline), the resident server on its
thread, `localmem.hooks.served`'s planner, and the fast path's own client
(`hooks.quick.exchange`). The same with real processes is in test_quick.py."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from localmem.hooks import quick
from localmem.hooks.served import HookPlanner
from localmem.records import SessionIn
from localmem.resident import quick as cli_quick
from localmem.resident import unix, wire
from localmem.resident.server import ResidentServer
from localmem.storage.write.store import Store


@pytest.fixture
def filled(store: Store, garden_sessions: list[SessionIn]) -> Store:
    store.write_sessions(garden_sessions)
    return store


def _request(db: Path, event: str, payload: dict[str, str], elapsed: float = 0.01, **env: str) -> dict[str, Any]:
    identity = unix.store_identity(db)
    assert identity is not None
    caller = cli_quick.caller()
    caller["env"] = {k: v for k, v in caller["env"].items() if k == "LOCALMEM_CONFIG"} | env
    return {
        "protocol": unix.PROTOCOL,
        "version": cli_quick.__version__,
        "op": "hook-cli",
        "store": identity,
        "argv": ["--db", str(db), event, "--client", "claude-code"],
        "stdin": json.dumps(payload),
        **caller,
        "elapsed": elapsed,
    }


class Slow:
    """The real planner, with a recall that takes ``seconds`` more than it does."""

    def __init__(self, seconds: float) -> None:
        self.planner = HookPlanner()
        self.seconds = seconds

    def __call__(self, call: wire.HookCall) -> wire.HookPlan:
        plan = self.planner(call)

        def render(got: dict[str, Any] | None) -> dict[str, Any]:
            time.sleep(self.seconds)
            return plan.render(got)

        return replace(plan, render=render)


@pytest.fixture
def serving(filled: Store) -> Iterator[ResidentServer]:
    srv = ResidentServer(filled, hooks=HookPlanner())
    assert srv.start()
    yield srv
    srv.stop()


def test_the_reply_is_what_the_hook_prints_and_counts(serving: ResidentServer, filled: Store) -> None:
    assert serving.path is not None
    ask = {"session_id": "s9", "cwd": "/home/dev", "prompt": "Did Ben fix the bike chain?"}
    got = quick.exchange(
        str(serving.path), unix.encode(_request(filled.path, "prompt", ask, LOCALMEM_HOOKS_PROMPT_BAR="-1"))
    )
    assert got["ok"] is True and got["stdout"].endswith("}\n")
    reply = json.loads(got["stdout"])["hookSpecificOutput"]
    assert reply["hookEventName"] == "UserPromptSubmit" and "bike" in reply["additionalContext"]
    record = got["record"]
    assert record["db"] == os.path.join(os.getcwd(), filled.path) and record["outcome"] == "replied"
    assert record["detail"]["via"] == "resident" and serving.served == 1
    # a prompt with nothing to recall for: answered at once, no read
    empty = quick.exchange(str(serving.path), unix.encode(_request(filled.path, "prompt", {**ask, "prompt": "/help"})))
    assert empty["stdout"] == "" and empty["record"]["detail"] == {"why": "no prompt to recall for"}
    assert serving.served == 1


@pytest.mark.parametrize(
    ("event", "payload", "env", "why"),
    [
        ("stop", {"session_id": "s"}, {}, "command: no transcript named"),  # the caller counts it its way
        ("stop", {"session_id": "s", "transcript_path": "/nowhere.jsonl"}, {}, "command: the transcript is not a file"),
        ("stop", {"session_id": "s", "transcript_path": __file__}, {"LOCALMEM_INGEST_TOOL_LINES": "none"}, "settings"),
        ("prompt", {"prompt": "bike"}, {"LOCALMEM_BUDGET_TOKENS": "900"}, "settings"),
        ("prompt", {"prompt": "bike"}, {"LOCALMEM_HOOKS_PROMPT_BAR": "x"}, "command: "),
        ("prompt", {"prompt": "bike"}, {"LOCALMEM_HOOKS_PROMPT_DEADLINE": "0.1"}, "command: no time left"),
        ("prompt", {"prompt": "bike"}, {"LOCALMEM_CONFIG": "relative.toml"}, "command: $LOCALMEM_CONFIG is relative"),
    ],
)
def test_what_the_hook_would_do_otherwise_is_refused(
    serving: ResidentServer, filled: Store, event: str, payload: dict[str, str], env: dict[str, str], why: str
) -> None:
    assert serving.path is not None
    got = quick.exchange(str(serving.path), unix.encode(_request(filled.path, event, payload, **env)))
    assert got["ok"] is False and got["why"].startswith(why), got


def test_a_recall_past_the_deadline_is_refused_when_the_time_is_up(filled: Store) -> None:
    """The server says how long the hook can wait (its deadline, less what it has run and a
    margin), answers a refusal then, and `stop` waits for the recall it left running."""
    srv = ResidentServer(filled, hooks=Slow(6.0))
    assert srv.start() and srv.path is not None
    try:
        ask = {"session_id": "s9", "cwd": "/home/dev", "prompt": "Did Ben fix the bike chain?"}
        request = _request(filled.path, "prompt", ask, elapsed=0.5, LOCALMEM_HOOKS_PROMPT_DEADLINE="1.2")
        t0 = time.monotonic()
        got = quick.exchange(str(srv.path), unix.encode(request))
        waited = time.monotonic() - t0
        assert got == {"ok": False, "why": "timeout"}
        assert waited < 4.0  # 0.6 s left (1.2 - 0.5 - the 0.1 s margin), not the recall's 6 s
    finally:
        t1 = time.monotonic()
        srv.stop()
    assert time.monotonic() - t1 > 2.0  # stop waited for the recall in flight


def test_an_old_style_server_without_a_planner_refuses_the_op(filled: Store) -> None:
    srv = ResidentServer(filled)
    reply, _ = srv.answer(_request(filled.path, "prompt", {"prompt": "bike"}))
    assert reply == {"ok": False, "why": "op"}
