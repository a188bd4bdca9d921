"""The MCP server as a real process: ``env`` (this checkout on PYTHONPATH, no chat
model) and ``start_http`` (the HTTP transport on a free port)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.cli import ROOT


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.pop("LOCALMEM_MODEL", None)
    return e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_http(db: Path, *extra: str, token: str | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """The server on a free port; ``token`` goes in $LOCALMEM_MCP_TOKEN, as the docs advise."""
    port = free_port()
    e = {k: v for k, v in env().items() if k != "LOCALMEM_MCP_TOKEN"}
    if token:
        e["LOCALMEM_MCP_TOKEN"] = token
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_server", "--db", str(db), "--transport", "http", "--port", str(port), *extra],
        env=e,
        cwd=str(ROOT),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read().decode() if proc.stderr else "server exited")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("HTTP server did not start")
