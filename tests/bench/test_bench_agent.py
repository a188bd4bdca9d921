"""``localmem bench agent`` for real: the pinned Claude Code CLI (tests/helpers/agent_clis.py:
skipped where it is absent, a failure in CI) runs two timed rounds of each measure on a small
store, and the report holds both sides, the added time, and every Stop counted by the
background worker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from localmem.bench import agent_cost
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


def test_a_missing_cli_is_named(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "localmem", "bench", "agent", "--cli", str(tmp_path / "nope"), "--turns", "10"]
    done = subprocess.run([*argv, "--workdir", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "nope: no such file" in done.stderr and "Traceback" not in done.stderr
