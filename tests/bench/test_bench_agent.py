"""``localmem bench agent`` for real: the pinned Claude Code CLI (tests/helpers/agent_clis.py:
skipped where it is absent, a failure in CI) runs two timed rounds of each measure on a small
store, and the report holds both sides, the added time, and every Stop counted by the
background worker; ``--client opencode`` the same with the pinned OpenCode CLI
(tests/helpers/opencode_cli.py) and localmem's plugin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from localmem.bench import agent_cost, agent_cost_opencode
from tests.helpers import opencode_cli
from tests.helpers.agent_clis import PINS, cli_path


def test_two_rounds_of_the_real_cli(tmp_path: Path) -> None:
    cli = cli_path("claude-code")
    package, version = PINS["claude-code"][:2]
    assert f"{package}@{version}" == agent_cost.NPM  # the bench names the version CI pins
    argv = [sys.executable, "-m", "localmem", "bench", "agent", "--cli", str(cli), "--turns", "500"]
    done = subprocess.run(
        [*argv, "--rounds", "2", "--json", "--workdir", str(tmp_path)], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    r = json.loads(done.stdout.strip().splitlines()[-1])
    assert r["rounds"] == 2 and r["turns"] == 500
    for what in ("turn", "session"):
        for side in ("without", "with", "added"):
            assert set(r[what][side]) == {"p50_ms", "p95_ms", "max_ms"}
        assert r[what]["with"]["p50_ms"] > 0 and r[what]["without"]["p50_ms"] > 0
    assert r["stops"] == 6 and r["stops_counted"] == 6  # every Stop of the hooked home ingested
    assert r["requests"] >= 11  # 5 sessions, 2 greetings, 4 turns: each asked the stand-in
    assert "| a turn in a running session" in done.stdout


def test_two_rounds_of_the_real_opencode(tmp_path: Path) -> None:
    cli = opencode_cli.opencode_bin()
    assert "{}@{}".format(*opencode_cli.PIN[:2]) == agent_cost_opencode.NPM  # the version CI pins
    argv = [sys.executable, "-m", "localmem", "bench", "agent", "--client", "opencode", "--cli", str(cli)]
    done = subprocess.run(
        [*argv, "--turns", "500", "--rounds", "2", "--json", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    r = json.loads(done.stdout.strip().splitlines()[-1])
    assert r["client"] == "opencode" and r["rounds"] == 2 and r["turns"] == 500
    for what in ("turn", "session", "next"):
        for side in ("without", "with", "added"):
            assert set(r[what][side]) == {"p50_ms", "p95_ms", "max_ms"}
        assert 0 < r[what]["without"]["p50_ms"] <= r[what]["without"]["max_ms"] < 300_000
        assert 0 < r[what]["with"]["p50_ms"] <= r[what]["with"]["max_ms"] < 300_000
    assert r["session"]["without"]["p50_ms"] > r["turn"]["without"]["p50_ms"]  # a process start is in a session
    # every stop of the hooked home counted: the first session, 2 sessions, 2 next turns, 2 served turns and
    # the served session's greeting
    assert r["stops"] == 8 and r["stops_counted"] == 8
    # in each home: a session asks for its turn and a title (3 sessions), a next turn for its turn (2), the served
    # session as a session (its greeting) then its turn (2)
    assert r["requests"] >= 2 * (3 * 2 + 2 + 2 + 2)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("real OpenCode (") and lines[1].startswith("| what | without localmem")
    assert sum(line.startswith(("| a turn", "| a whole `opencode run`", "| the next turn")) for line in lines) == 3


@pytest.mark.parametrize(("client", "command"), [("claude-code", "claude"), ("opencode", "opencode")])
def test_a_missing_cli_is_named(tmp_path: Path, client: str, command: str) -> None:
    argv = [sys.executable, "-m", "localmem", "bench", "agent", "--client", client, "--cli", str(tmp_path / "nope")]
    done = subprocess.run(
        [*argv, "--turns", "10", "--workdir", str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "nope: no such file" in done.stderr and f"the {command} command" in done.stderr
