"""The real server checked by a client of another implementation: the TypeScript MCP SDK
(npm ``@modelcontextprotocol/sdk``, installed by ``.ci/run`` into ``.ci/node``), over stdio
and streamable HTTP. ``tests/ts/mcp_client.cjs`` lists the tools, calls remember and
reconstruct and validates each structured result against the tool's output schema."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.servers import env, start_http

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "ts" / "mcp_client.cjs"
MODULES = Path(os.environ.get("LOCALMEM_NODE_MODULES") or ROOT / ".ci" / "node" / "node_modules")
NODE = shutil.which("node")
HAVE_SDK = NODE is not None and (MODULES / "@modelcontextprotocol" / "sdk" / "package.json").exists()

pytestmark = pytest.mark.skipif(
    not HAVE_SDK and not os.environ.get("CI"),
    reason="node or @modelcontextprotocol/sdk not installed (npm install --prefix .ci/node, as .ci/run does)",
)


def ts_client(*args: str) -> dict[str, Any]:
    assert NODE is not None, "node is not installed"
    e = {**env(), "NODE_PATH": str(MODULES)}
    proc = subprocess.run([NODE, str(SCRIPT), *args], capture_output=True, text=True, timeout=180, env=e, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-4000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def check(out: dict[str, Any]) -> None:
    assert {"remember", "reconstruct", "forget", "memory_stats"} <= set(out["tools"])
    assert out["remember"]["new_turns"] == 2 and len(out["remember"]["turn_ids"]) == 2
    assert "south window" in out["reconstruct"]["text"] and out["reconstruct"]["turns"]
    assert out["validated"] == ["remember", "reconstruct"]


def test_typescript_sdk_over_stdio(tmp_path: Path) -> None:
    out = ts_client("stdio", sys.executable, str(tmp_path / "mem.db"))
    assert out["transport"] == "stdio"
    check(out)


def test_typescript_sdk_over_streamable_http(tmp_path: Path) -> None:
    proc, port = start_http(tmp_path / "mem.db")
    try:
        out = ts_client("http", f"http://127.0.0.1:{port}/mcp")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert out["transport"] == "http"
    check(out)
