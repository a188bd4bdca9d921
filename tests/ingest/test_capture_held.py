"""``localmem capture`` says what it held back: a log written in the last two minutes whose
last step is still open is named, with the time from which capture reads it whole; once
it has settled, capture reads it to its end and says nothing of it (real CLI processes)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from localmem.bench import agent_logs
from localmem.ingest import capture

SESSION = "33333333-aaaa-4bbb-8ccc-000000000003"


def _capture(db: Path, root: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    args = ["capture", "--only", "claude-code", "--dir", f"claude-code={root}", "--quiet", *flags]
    run = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )
    assert run.returncode == 0, run.stderr
    return run


def test_capture_names_what_it_held_back_and_when_it_reads_it(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    log = root / "-home-dev-x" / f"{SESSION}.jsonl"
    log.parent.mkdir(parents=True)
    lines = list(agent_logs.transcript(SESSION, "/home/dev/x", 2))
    log.write_text("\n".join(lines[:8]) + "\n", "utf-8")  # exchange 1 stops after its tool call: open
    db = tmp_path / "m.db"
    written = log.stat().st_mtime
    out = _capture(db, root).stdout
    m = re.search(
        r"held back the last step of 1 log written in the last 2 minutes \(still being written\): "
        r"`localmem capture` reads it after (\d\d:\d\d:\d\d), `localmem watch` as soon as it settles",
        out,
    )
    assert m, out
    assert m.group(1) == time.strftime("%H:%M:%S", time.localtime(written + capture.RECENT))
    # the same in --json, file by file
    got = json.loads(_capture(db, root, "--json").stdout)
    assert [h["file"] for h in got["held"]] == [str(log)] and got["held"][0]["client"] == "claude-code"
    # settled (last written three minutes ago): read to its end, nothing held, nothing said
    old = time.time() - 180
    os.utime(log, (old, old))
    settled = _capture(db, root)
    assert "held back" not in settled.stdout and " 1 new turns" in settled.stdout, settled.stdout
    assert json.loads(_capture(db, root, "--json").stdout)["held"] == []
