"""Driving the agents' hook entry (``python -m localmem.hooks``) as the agents do: a real
process with the client's JSON on stdin; shared by tests/hooks/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from localmem.util import injected

SESSION = "11111111-aaaa-4bbb-8ccc-000000000001"
CWD = "/home/dev/app"


def hook(
    db: Path, event: str, payload: dict[str, Any] | bytes, client: str = "claude-code", **env: str
) -> subprocess.CompletedProcess[bytes]:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return subprocess.run(
        [sys.executable, "-m", "localmem.hooks", "--db", str(db), event, "--client", client],
        input=raw,
        capture_output=True,
        timeout=300,
        env={**os.environ, **env},
    )


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
