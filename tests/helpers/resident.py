"""A real resident process for tests: ``localmem serve --transport socket`` on a store, the
daemons a hook or a query started for a store, and the modules a served client must never
import; shared by tests/resident/, tests/hooks/ and tests/cli/."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from localmem.resident import wire

HEAVY = (
    "numpy",
    "onnxruntime",
    "tokenizers",
    "mcp",
    "anyio",
    "localmem.memory",
    "localmem.retrieval",
    "localmem.models",
)


class Server:
    """`localmem serve --transport socket` on ``db``, ready once its socket answers."""

    def __init__(self, db: Path, env: dict[str, str] | None = None) -> None:
        self.db = db
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "localmem", "--db", str(db), "serve", "--transport", "socket"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        path = wire.socket_path(db)
        assert path is not None
        self.path = path
        deadline = time.monotonic() + 120
        while not answers(path):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"server did not start: {self.proc.communicate()[1]}")
            time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            # a wide margin: on a loaded 2-core machine a server's orderly exit (its threads
            # joined, calls in flight waited for, the store closed) once took over 30 s
            self.proc.wait(120)


def answers(path: Path) -> bool:
    import socket

    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def daemons(db: Path) -> list[int]:
    """The pids of the socket daemons serving ``db`` that a hook or a query started
    (``serve --idle-exit``, the store's real path in their command line)."""
    real = os.path.realpath(db)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--idle-exit" in argv and real.encode() in argv:
            found.append(int(entry.name))
    return found
