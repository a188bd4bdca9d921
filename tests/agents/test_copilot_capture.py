"""The real GitHub Copilot CLI, offline, and what `localmem capture` reads of its sessions.

Copilot CLI runs with no network in offline mode against a model provider of one's own
(``COPILOT_OFFLINE=true``, ``COPILOT_PROVIDER_BASE_URL``: ``copilot help environment``); here
that is the loopback stand-in of the OpenAI Responses API (``localmem.bench.agent_apis``,
``COPILOT_PROVIDER_WIRE_API=responses``). Two real sessions, the second a ``--resume`` of
the first that appends to the same ``events.jsonl``: `localmem capture --only copilot`
stores each prompt and reply once, in order (a reply written in the last 2 minutes held
back until the log settles), with the session's project, and nothing the
CLI wraps around a prompt for the model (``<current_datetime>``), nor its system prompt.

The CLI: ``PIN`` from ``.ci/node`` (``npm install --prefix .ci/node @github/copilot@1.0.102``),
or the binary ``$LOCALMEM_COPILOT_BIN`` names; the test skips when neither is there (fails
under ``$LOCALMEM_REQUIRE_AGENTS``, as CI sets it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from localmem.bench.agent_apis import StandIn
from tests.helpers.copilot_cli import copilot_bin, env_for


def settled(log: Path) -> None:
    """The log as capture finds it once the session is over (written more than 2 minutes ago)."""
    old = log.stat().st_mtime - 3600
    os.utime(log, (old, old))


def test_capture_reads_real_copilot_sessions(tmp_path: Path) -> None:
    command = copilot_bin()
    home, project, db = tmp_path / "home", tmp_path / "project", tmp_path / "store" / "memory.db"
    for d in (home, project, db.parent):
        d.mkdir(parents=True)
    said = [
        ("We decided to keep the invoice cache in SQLite, not Redis.", "Noted: the invoice cache stays in SQLite."),
        ("Which database did we pick for the invoice cache?", "SQLite, for the invoice cache."),
    ]
    with StandIn("openai", reply="") as stand_in:
        env = env_for(home, stand_in)

        def copilot(*args: str, reply: str) -> subprocess.CompletedProcess[str]:
            stand_in.reply = reply
            argv = [str(command), *args, "--allow-all-tools", "--no-auto-update"]
            done = subprocess.run(
                argv, cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300
            )
            assert done.returncode == 0, f"copilot exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
            return done

        def capture() -> dict[str, object]:
            argv = [sys.executable, "-m", "localmem", "--db", str(db), "capture", "--only", "copilot", "--json"]
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
            return dict(json.loads(done.stdout))

        first = copilot("-p", said[0][0], reply=said[0][1])
        sid = re.search(r"--resume=([0-9a-f-]{36})", first.stdout + first.stderr)
        logs = list((home / ".copilot" / "session-state").glob("*/events.jsonl"))
        assert len(logs) == 1, logs
        got = capture()  # written just now: the agent's last step is held back until the log settles
        assert got["new"] == 1 and len(got["held"]) == 1 and not got["errors"], got  # type: ignore[arg-type]
        settled(logs[0])
        assert capture()["new"] == 1
        copilot(f"--resume={sid.group(1) if sid else logs[0].parent.name}", "-p", said[1][0], reply=said[1][1])
        assert list((home / ".copilot" / "session-state").glob("*/events.jsonl")) == logs  # the same log, grown
        settled(logs[0])
        again = capture()
        assert again["new"] == 2 and again["already_present"] == 0 and not again["errors"], again
        assert len(stand_in.conversations()) == 2

    done = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), "export"], env=env, capture_output=True, text=True
    )
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert [(r["speaker"], r["text"]) for r in rows] == [
        (speaker, text) for pair in said for speaker, text in zip(("user", "assistant"), pair, strict=True)
    ]
    raw = db.read_bytes() + b"".join(p.read_bytes() for p in db.parent.glob("memory.db-*"))
    assert b"current_datetime" not in raw and b"You are the GitHub Copilot CLI" not in raw
    assert all(r.get("client") == "copilot-cli" for r in rows), rows[0]
    assert all(r.get("cwd") == str(project) for r in rows), rows[0]
