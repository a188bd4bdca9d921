"""Running ``localmem`` as the console script does and telling whether the fast entry
(``localmem.resident.quick``) answered: read from ``-X importtime``, since a process it
answered never imports ``localmem.cli`` (tests/resident/test_quick.py,
tests/mcp_server/test_mcp_entry.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "localmem" / "data" / "sample_conversation.jsonl"
Q = "Which shoes did Maya switch to?"
_IMPORT_LINE = re.compile(rb"^import time:[^\n]*\n", re.MULTILINE)


@dataclass(frozen=True)
class Run:
    stdout: bytes
    stderr: bytes  # without -X importtime's lines
    code: int
    full_cli: bool  # the process imported localmem.cli: the fast entry did not answer


def run(
    args: list[str],
    *,
    db: Path | None,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    cwd: Path,
    full: bool = False,
) -> Run:
    """`localmem [--db DB] ARGS` as the console script runs it, or (``full``) the full CLI alone."""
    where = ["--db", str(db)] if db is not None else []
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "localmem.cli" if full else "localmem", *where, *args],
        input=stdin,
        capture_output=True,
        timeout=300,
        env=env or os.environ.copy(),
        cwd=cwd,
    )
    names = [line.rsplit(b"|", 1)[-1].strip() for line in _IMPORT_LINE.findall(proc.stderr)]
    return Run(proc.stdout, _IMPORT_LINE.sub(b"", proc.stderr), proc.returncode, b"localmem.cli" in names)


def ingest(db: Path, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), "ingest", str(SAMPLE)],
        capture_output=True,
        timeout=300,
        env=env or os.environ.copy(),
    )
    assert proc.returncode == 0, proc.stderr


def imported_by(module: str) -> set[str]:
    """The modules a fresh interpreter loads to import ``module`` (all but its start-up's)."""
    code = f"import sys; b = set(sys.modules); import {module}; print(*sorted(set(sys.modules) - b))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())
