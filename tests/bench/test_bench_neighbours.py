"""``localmem bench neighbours`` for real: two rounds (the second restores a plain backup
with the daemon running and kills the daemon -9), every process real (daemon, MCP server,
Python's sqlite3, Debian's sqlite3 shell where installed, ingest, query, backup, restore).
Nothing acknowledged is lost, nothing rolled back comes back or is answered, and the restore
is done by `localmem restore`, not the copy older versions documented."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def test_two_rounds_lose_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "localmem",
            "bench",
            "neighbours",
            "--rounds",
            "2",
            "--json",
            "--workdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rounds_run"] == 2 and result["acknowledged"] >= 20
    assert (result["lost"], result["resurrected"], result["stale_answers"], result["rounds_damaged"]) == (0, 0, 0, 0)
    restored = [r for r in result["rounds"] if r["restore"]]
    assert restored and all(r["notes"] == [] for r in restored), restored  # `localmem restore` took the backup
    assert [r["killed"] for r in result["rounds"]] == ["none", "daemon"]
    assert all(r["errors"] == [] for r in result["rounds"]), result["rounds"]
    assert "| all |" in done.stdout
    if os.environ.get("CI"):  # .ci/run installs Debian's sqlite3: the shell neighbour must have run
        assert result["shell"], "no sqlite3 shell on PATH"
