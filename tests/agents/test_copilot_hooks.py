"""localmem's hooks in the real GitHub Copilot CLI, offline, added either way a person can:
``localmem hooks install --client copilot`` (its hooks folder) or ``localmem hooks plugin
--client copilot`` and the one line it prints (Copilot's own ``plugin marketplace add`` and
``plugin install``: Copilot validates nothing, so the proof that it loads the plugin is its
hooks running in the sessions).

The CLI and its offline set-up are test_copilot_capture's (the loopback Responses stand-in,
``COPILOT_OFFLINE=true``). ``localmem hooks install --client copilot`` writes
``~/.copilot/hooks/localmem.json`` in a temp HOME; two new sessions (``copilot -p``) say a
decision, then ask about it. Then: the store holds each prompt and reply exactly once, in
order, and nothing localmem injected (the ingest hooks finish after the CLI exits: the
store is polled); the hooks that ran were counted, none failed; the second session's model
request carries the decision inside a ``<localmem-context nonce=…>`` block (sessionStart's
and userPromptSubmitted's ``additionalContext``) and the first session's does not.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localmem.bench.agent_apis import StandIn
from tests.helpers.agent_clis import blocks, stop_daemon, strings, wait_for_events, wait_for_turns
from tests.helpers.copilot_cli import copilot_bin
from tests.helpers.copilot_cli import env_for as copilot_env

pytestmark = pytest.mark.slow

SAID = [
    (
        "For the copilot run we decided that the crate manifest stays in Postgres 16, not MySQL.",
        "Noted: the crate manifest stays in Postgres 16.",
    ),
    ("Where does the crate manifest live?", "It lives in Postgres 16, as decided."),
]
# What one `copilot -p` session runs (1.0.102): sessionEnd fires once the turn completes
EVENTS = ("session-start", "prompt", "stop", "session-end")


@pytest.fixture()
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the embedding model's, as tests/conftest.py keeps it; Copilot unpacks its package here too
    return tmp_path_factory.getbasetemp() / "cache"


@pytest.fixture()
def world(tmp_path: Path, cache: Path) -> Iterator[tuple[StandIn, dict[str, str], Path, Path]]:
    """(stand-in, the environment every command runs in, project, store)."""
    home, project, db = tmp_path / "home", tmp_path / "project", tmp_path / "store" / "memory.db"
    for d in (home, project, db.parent):
        d.mkdir(parents=True)
    with StandIn("openai", reply="") as stand_in:
        env = copilot_env(home, stand_in)
        env.update(
            XDG_CACHE_HOME=str(cache),
            XDG_DATA_HOME=str(home / ".local" / "share"),
            LOCALMEM_QUERY_DAEMON_IDLE="0",
            LOCALMEM_HOOKS_DAEMON_IDLE="60",  # the daemon a hook starts leaves by itself soon after the test
        )
        try:
            yield stand_in, env, project, db
        finally:
            stop_daemon(env, db)  # the resident process a hook started


def wait_for_hooks(db: Path, sessions: int) -> dict[str, Any]:
    """The hook status once each of ``EVENTS`` has run ``sessions`` times."""
    return wait_for_events(db, EVENTS, sessions)


@pytest.mark.parametrize("route", ["hooks install", "plugin"])
def test_copilot_sessions_are_stored_once_and_the_next_one_gets_the_decision(
    world: tuple[StandIn, dict[str, str], Path, Path], route: str
) -> None:
    stand_in, env, project, db = world
    command = copilot_bin()

    def localmem(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(Path(sys.executable).parent / "localmem"), "--db", str(db), *args]
        done = subprocess.run(argv, env=env, cwd=project, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done

    if route == "plugin":
        added = json.loads(localmem("hooks", "plugin", "--client", "copilot", "--json").stdout)["add"]
        for part in added.split(" && "):  # the one line, as a person pastes it
            argv = shlex.split(part)
            assert argv[0] == "copilot"
            done = subprocess.run(
                [str(command), *argv[1:]], cwd=project, env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, done.stdout + done.stderr
        listed = subprocess.run(
            [str(command), "plugin", "list"], cwd=project, env=env, capture_output=True, text=True, timeout=120
        ).stdout
        assert "localmem@localmem" in listed and "(enabled)" in listed, listed
        assert not (Path(env["HOME"]) / ".copilot" / "hooks" / "localmem.json").exists()
    else:
        localmem("hooks", "install", "--client", "copilot")
        assert (Path(env["HOME"]) / ".copilot" / "hooks" / "localmem.json").is_file()
    marks = []
    for n, (prompt, reply) in enumerate(SAID, 1):
        marks.append(len(stand_in.requests))
        stand_in.reply = reply
        argv = [str(command), "-p", prompt, "--allow-all-tools", "--no-auto-update"]
        done = subprocess.run(
            argv, cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, f"copilot exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
        wait_for_turns(db, 2 * n)  # the ingest hooks finish after the CLI exits
        got = wait_for_hooks(db, n)  # every hook of the session done before the next starts
    marks.append(len(stand_in.requests))

    assert not got.get("last_error"), got
    rows = [line for line in localmem("export").stdout.splitlines() if line.strip()]
    turns = [(r["speaker"], r["text"], r.get("client")) for r in map(json.loads, rows)]
    assert turns == [
        (speaker, text, "copilot-cli")
        for pair in SAID
        for speaker, text in zip(("user", "assistant"), pair, strict=True)
    ]

    def model_turn(session: int) -> bytes:
        asked = [r for r in stand_in.conversations() if r in stand_in.requests[marks[session - 1] : marks[session]]]
        assert asked, f"session {session} made no model request"
        return asked[-1].body

    decision = SAID[0][0]
    assert not [b for b in blocks(model_turn(1)) if decision in b]  # not before it was said
    recalled = blocks(model_turn(2))
    assert any(decision in b for b in recalled), [s for s in strings(json.loads(model_turn(2))) if "localmem" in s]
    assert got["events"]["session-start"].get("replied", 0) >= 1, got  # the second session got its project back
    if route == "plugin":  # the plugin runs the hooks: `install --all` adds no second set
        did = json.loads(localmem("hooks", "install", "--all", "--json").stdout)["agents"]
        assert [a["action"] for a in did if a["client"] == "copilot"] == ["left"], did
