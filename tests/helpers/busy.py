"""Another process holding a store's write lock (``lock_held``), for tests of waiting
out a busy store."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HOLD = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
"""


@contextmanager
def lock_held(db: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the write lock until the block ends."""
    cmd = [sys.executable, "-c", HOLD, str(db)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    try:
        yield proc
    finally:
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 0
