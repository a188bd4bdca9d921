"""An export keeps where an agent's sessions ran: ``export`` then ``ingest`` into a fresh
store, and ``query --project`` finds the project's turns there as it did in the store they
came from (real CLI processes, a real Claude Code transcript); a chat's lines carry no
project keys, and an older export without them still reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from localmem.bench import agent_logs

SESSION = "22222222-aaaa-4bbb-8ccc-000000000002"


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )
    assert run.returncode == 0, run.stderr
    return run


def _project_turns(db: Path, project: Path) -> list[str]:
    got = json.loads(_cli(db, "query", "--json", "--project", str(project), "what does module 2 return?").stdout)
    return [t["text"] for t in got["turns"]]


def test_export_then_ingest_keeps_each_sessions_project(tmp_path: Path) -> None:
    project = tmp_path / "work" / "app"
    (project / ".git").mkdir(parents=True)
    (project / ".git" / "config").write_text('[remote "origin"]\n\turl = https://tok@example.com/me/app.git\n')
    log = tmp_path / "claude" / f"{SESSION}.jsonl"
    log.parent.mkdir()
    log.write_text("\n".join(agent_logs.transcript(SESSION, str(project), 3)) + "\n", "utf-8")
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"session": "c1", "speaker": "Maya", "text": "Module 2 is my favourite song."}) + "\n")
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    _cli(a, "ingest", str(log))
    _cli(a, "ingest", str(chat))
    answer = "Module 2 returns an empty list for empty input; done."
    assert answer in _project_turns(a, project)
    out = tmp_path / "mem.jsonl"
    _cli(a, "export", "--out", str(out))
    lines = [json.loads(x) for x in out.read_text("utf-8").splitlines()]
    agent = [x for x in lines if x["session"] == SESSION]
    assert agent and all(x["cwd"] == str(project) and x["client"] == "claude-code" for x in agent)
    assert all(x["branch"] == "main" for x in agent)
    assert not any(k in x for x in lines if x["session"] == "c1" for k in ("cwd", "client", "repository"))
    _cli(b, "ingest", str(out))
    # the moved store scopes the project's talk as the first one did; elsewhere sees none of it
    assert answer in _project_turns(b, project)
    elsewhere = tmp_path / "work" / "other"
    elsewhere.mkdir()
    assert answer not in _project_turns(b, elsewhere)
    # the same bytes again from the moved store: nothing lost on the way
    assert _cli(b, "export").stdout == out.read_text("utf-8")


def test_an_export_without_project_keys_still_reads(tmp_path: Path) -> None:
    old = tmp_path / "old.jsonl"
    line = {"localmem": 1, "source": "mcp", "session": "s", "title": "", "started_at": None, "id": None}
    old.write_text(json.dumps({**line, "speaker": "Ana", "role": "user", "timestamp": None, "text": "hi"}) + "\n")
    db = tmp_path / "m.db"
    assert json.loads(_cli(db, "ingest", "--json", str(old)).stdout)["new"] == 1
    assert "cwd" not in _cli(db, "export").stdout
