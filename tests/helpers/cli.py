"""The real `localmem` command for tests: ``run`` (the installed module in a subprocess),
``driver`` (the command line of a process that serves the CLI with a fake, optionally slow,
embedder), the repository ``ROOT``, a log of ``jsonl_lines`` to ingest and ``stored_units``
(how far an ingest in another process got)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import apsw

ROOT = Path(__file__).resolve().parents[2]


def jsonl_lines(start: int, stop: int) -> str:
    return "".join(
        json.dumps({"session": f"s{i // 50}", "speaker": "Ann", "text": f"Line number {i} talks about topic {i % 7}."})
        + "\n"
        for i in range(start, stop)
    )


DRIVER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.helpers.fakes import HashEmbedder
import localmem.models.registry

class Slow(HashEmbedder):
    def embed(self, texts):
        time.sleep({delay})
        return super().embed(texts)

localmem.models.registry.default_embedder = lambda spec="default": Slow()
from localmem.cli import main
sys.exit(main(sys.argv[1:]))
"""


def driver(*args: str, delay: float = 0.0) -> list[str]:
    return [sys.executable, "-c", DRIVER.format(root=str(ROOT), delay=delay), *args]


def stored_units(db: Path) -> int:
    try:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
        conn.set_busy_timeout(2000)
        row = conn.execute("SELECT max(resume_unit) FROM ingest_files").fetchone()
        conn.close()
    except apsw.Error:
        return 0
    return int(row[0] or 0) if row else 0


def run(*args: str, db: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "localmem"]
    if db is not None:
        cmd += ["--db", str(db)]
    proc = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300, env=os.environ.copy())
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}")
    return proc
