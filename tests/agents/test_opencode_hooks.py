"""localmem's hooks in the real OpenCode CLI, offline (``localmem hooks install --client opencode``).

The CLI and its offline set-up are test_opencode's (the loopback Anthropic Messages
stand-in; the recipe in tests/helpers/opencode_cli.py). ``localmem hooks install --client
opencode`` writes localmem's plugin, ``$XDG_CONFIG_HOME/opencode/plugin/localmem.js``, in a
temp HOME; two new sessions (``opencode run``) in one project folder say a decision, then
ask about it. Then: the store holds each prompt and reply exactly once, in order (the stop
hook's ingest finishes after the CLI exits: the hook status and the store are polled), and
nothing localmem injected; the hooks that ran were counted, none failed; the second
session's main-turn model request carries the decision inside exactly one
``<localmem-context nonce=…>`` block and the first session's carries none; no title
request carries a block. A third session whose session start gives nothing (a budget of
one token) gets the decision from its prompt's hook (``chat.message``). A ``localmem
capture`` afterwards finds nothing new (the hook and capture keep the same per-session
progress).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localmem.bench.agent_apis import StandIn
from localmem.hooks import status
from tests.helpers.agent_clis import blocks, stop_daemon, strings, wait_for_events, wait_for_turns
from tests.helpers.opencode_cli import env_for, opencode_bin

pytestmark = pytest.mark.slow

SAID = [
    (
        "For the opencode run we decided that the billing ledger stays in Postgres 16, not MySQL.",
        "Noted: the billing ledger stays in Postgres 16.",
    ),
    ("Where does the billing ledger live?", "It lives in Postgres 16, as decided."),
]
# What one `opencode run` session runs: the session start and the prompt before the model
# request, the stop at session.idle (OpenCode has no session end)
EVENTS = ("session-start", "prompt", "stop")


@pytest.fixture()
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the embedding model's, as tests/conftest.py keeps it
    return tmp_path_factory.getbasetemp() / "cache"


@pytest.fixture()
def world(tmp_path: Path, cache: Path) -> Iterator[tuple[StandIn, dict[str, str], Path, Path]]:
    """(stand-in, the environment every command runs in, project, store)."""
    home, project, db = tmp_path / "home", tmp_path / "project", tmp_path / "store" / "memory.db"
    for d in (home, project, db.parent):
        d.mkdir(parents=True)
    with StandIn("anthropic", reply="") as stand_in:
        env = env_for(home, stand_in)
        env.update(
            XDG_CACHE_HOME=str(cache),
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


def test_opencode_sessions_are_stored_once_and_the_next_one_gets_the_decision(
    world: tuple[StandIn, dict[str, str], Path, Path],
) -> None:
    stand_in, env, project, db = world
    command = opencode_bin()

    def localmem(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [str(Path(sys.executable).parent / "localmem"), "--db", str(db), *args]
        done = subprocess.run(argv, env=env, cwd=project, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done

    localmem("hooks", "install", "--client", "opencode")
    plugin = Path(env["XDG_CONFIG_HOME"]) / "opencode" / "plugin" / "localmem.js"
    assert plugin.is_file()
    marks = []
    for n, (prompt, reply) in enumerate(SAID, 1):
        marks.append(len(stand_in.requests))
        stand_in.reply = reply
        done = subprocess.run(
            [str(command), "run", prompt],
            cwd=project,
            env={**env, "PWD": str(project)},  # OpenCode takes its folder from $PWD, as a shell sets it
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"opencode exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
        assert reply in done.stdout
        wait_for_turns(db, 2 * n)  # the stop hook's ingest finishes after the CLI exits
        got = wait_for_hooks(db, n)  # every hook of the session done before the next starts
    marks.append(len(stand_in.requests))

    assert not got.get("last_error"), got
    assert not (got.get("events") or {}).get("session-end"), got
    rows = [line for line in localmem("export").stdout.splitlines() if line.strip()]
    turns = [(r["speaker"], r["text"], r.get("client"), r.get("cwd")) for r in map(json.loads, rows)]
    assert [(s, c, cwd) for s, _, c, cwd in turns] == [
        (s, "opencode", str(project)) for _ in SAID for s in ("user", "assistant")
    ], turns
    for (prompt, reply), (user, assistant) in zip(SAID, zip(turns[::2], turns[1::2], strict=True), strict=True):
        assert prompt in user[1] and "localmem-context" not in user[1]  # `opencode run` quotes a prompt with spaces
        assert assistant[1] == reply

    def requests(session: int) -> tuple[list[bytes], list[bytes]]:
        """(main-turn request bodies, other request bodies: the title) of session ``session``."""
        made = stand_in.requests[marks[session - 1] : marks[session]]
        turns = [r.body for r in stand_in.conversations() if r in made]
        others = [r.body for r in made if r.path.startswith("/v1/messages") and r.body not in turns]
        assert turns and others, f"session {session}: {len(turns)} model turns, {len(others)} other requests"
        return turns, others

    decision = SAID[0][0]
    first, first_title = requests(1)
    assert not [b for body in first for b in blocks(body) if decision in b]  # not before it was said
    second, second_title = requests(2)
    for body in second:
        carrying = [b for b in blocks(body) if decision in b]
        shown = [s for s in strings(json.loads(body)) if "localmem" in s]
        assert len(carrying) == 1, shown
    for body in first_title + second_title:
        assert not blocks(body) and b"localmem-context" not in body  # the title request gets none
    assert got["events"]["session-start"].get("replied", 0) >= 1, got  # the second session got its project back

    # a third session whose session start gives nothing (a budget of 1 token): the prompt's recall carries it
    mark = len(stand_in.requests)
    stand_in.reply = "Postgres 16."
    quick = {**env, "PWD": str(project), "LOCALMEM_HOOKS_SESSION_BUDGET": "1", "LOCALMEM_HOOKS_PROMPT_BAR": "0"}
    done = subprocess.run(
        [str(command), "run", "Which database holds the billing ledger?"],
        cwd=project,
        env=quick,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    third = [r.body for r in stand_in.conversations() if r in stand_in.requests[mark:]]
    carrying = [b for body in third for b in blocks(body) if decision in b]
    assert third and len(carrying) == len(third), ([blocks(body) for body in third], status.read(db))
    assert "bear on this prompt" in carrying[0]  # the prompt hook's block, not the session start's
    wait_for_turns(db, 6)

    again = json.loads(localmem("capture", "--only", "opencode", "--json").stdout)
    assert again["new"] == 0 and not again["errors"], again  # the hooks' progress is capture's
