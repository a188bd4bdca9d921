"""Driving the agents' hook entry (``python -m localmem.hooks``) as the agents do: a real
process with the client's JSON on stdin; shared by tests/hooks/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from localmem.hooks import detach, status
from localmem.util import injected

SESSION = "11111111-aaaa-4bbb-8ccc-000000000001"
CWD = "/home/dev/app"


def hook(
    db: Path, event: str, payload: dict[str, Any] | bytes, client: str = "claude-code", **env: str
) -> subprocess.CompletedProcess[bytes]:
    """Run the hook as the agent does. An ingest event returns once the background worker
    has counted this run in the hook status (``settled``), as a test then reads the store."""
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    runs = status_runs(db, event)
    done = subprocess.run(
        [sys.executable, "-m", "localmem.hooks", "--db", str(db), event, "--client", client],
        input=raw,
        capture_output=True,
        timeout=300,
        env={**os.environ, **env},
    )
    if event in detach.INGEST_EVENTS:
        settled(db, event, runs + 1)
    return done


def status_runs(db: Path, event: str) -> int:
    return status.runs(db, event)


def settled(db: Path, event: str, runs: int, timeout: float = 240.0) -> None:
    """Wait until ``event`` has been counted ``runs`` times in the store's hook status (the
    background worker counts each run when it is done)."""
    got = status.wait_for_runs(db, event, runs, timeout)
    assert got >= runs, f"{event}: the background ingest never counted run {runs}"


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args], capture_output=True, text=True, timeout=300
    )


def context_of(run: subprocess.CompletedProcess[bytes], event_name: str) -> str:
    assert run.returncode == 0 and run.stderr == b"", run.stderr
    reply = json.loads(run.stdout)
    assert reply["hookSpecificOutput"]["hookEventName"] == event_name
    text: str = reply["hookSpecificOutput"]["additionalContext"]
    first, last = text.splitlines()[0], text.splitlines()[-1]
    assert first.startswith(injected.OPEN + ' nonce="') and last == first.replace("<", "</", 1)  # one block
    return text
