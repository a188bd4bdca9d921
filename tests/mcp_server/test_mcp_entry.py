"""The entry `localmem mcp-config --install` writes, started exactly as a desktop client
starts it (a real stdio subprocess under a real MCP client session), serves MCP and answers
a `localmem query` through the fast entry (`localmem.resident.quick`, op `cli`) on its
socket, byte for byte as the query prints in-process; an entry of an earlier version
(`python -m mcp_server`) still serves MCP, and the query is then answered by the full CLI.
Under both entries a prompt hook's raw line (`localmem.hooks.quick`, op `hook-cli`) is
answered by the server: the MCP package hands it the hooks' planner itself.

Whether the fast entry answered is read as in tests/resident/test_quick.py: a process it
answered never imports `localmem.cli`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from localmem.hooks import status
from localmem.resident import wire
from localmem.resident.listen import answers
from tests.helpers.fastentry import Q, Run, ingest, run

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _install(db: Path, cfg: Path, home: Path) -> dict[str, object]:
    """`localmem mcp-config --client cursor --install --path CFG`, as a user runs it."""
    env = {**os.environ, "HOME": str(home)}
    env.pop("LOCALMEM_MODEL", None)
    install = ["mcp-config", "--client", "cursor", "--install", "--path", str(cfg)]
    done = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *install],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    entry: dict[str, object] = json.loads(cfg.read_text("utf-8"))["mcpServers"]["localmem"]
    return entry


async def _served_query(entry: dict[str, object], db: Path, cwd: Path) -> tuple[list[str], Run]:
    """Start the server as the entry says, check MCP works, and run `localmem query`
    while it serves; the tools listed and the query's run."""
    command, args = entry["command"], entry["args"]
    assert isinstance(command, str) and isinstance(args, list)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCALMEM_")}
    params = StdioServerParameters(command=command, args=[*args, "--no-worker"], env=env, cwd=str(cwd))
    path = wire.socket_path(db)
    assert path is not None
    async with Client(params, read_timeout_seconds=120) as c:
        tools = [t.name for t in (await c.list_tools()).tools]
        found = await c.call_tool("reconstruct", {"query": Q})
        assert not found.is_error and "Maya" in str(found.content)
        deadline = time.monotonic() + 60
        while not answers(path):  # the socket is served beside MCP, from the server's start
            assert time.monotonic() < deadline, "the entry's server never served its socket"
            await anyio.sleep(0.1)
        queried = await anyio.to_thread.run_sync(lambda: run(["query", Q], db=db, cwd=cwd))
        hooked = await anyio.to_thread.run_sync(lambda: _prompt_hook(db))
    assert hooked.returncode == 0 and b"Maya" in hooked.stdout, hooked.stderr[-500:]
    assert b"| localmem.hooks.quick" in hooked.stderr and b"| localmem.config" not in hooked.stderr  # the raw line
    assert status.read(db)["last_run"]["via"] == "resident"
    return tools, queried


def _prompt_hook(db: Path) -> subprocess.CompletedProcess[bytes]:
    """A prompt hook, as the agents run it, while the entry's server runs."""
    payload = {"session_id": "s", "cwd": str(db.parent), "prompt": Q}
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "localmem.hooks", "--db", str(db), "prompt", "--client", "codex"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        timeout=300,
        env={**os.environ, "LOCALMEM_HOOKS_PROMPT_BAR": "-1", "LOCALMEM_HOOKS_DAEMON_IDLE": "0"},
    )


async def test_the_installed_entry_serves_mcp_and_answers_the_fast_entry(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    ingest(db)
    alone = run(["query", Q], db=db, cwd=tmp_path)  # no server: the full CLI, in-process
    assert alone.full_cli and alone.code == 0 and b"Maya" in alone.stdout
    entry = _install(db, tmp_path / "mcp.json", tmp_path)
    assert entry["args"] == ["-m", "localmem", "--db", str(db.resolve()), "serve"]
    tools, served = await _served_query(entry, db, tmp_path)
    assert "reconstruct" in tools and "remember" in tools
    assert not served.full_cli, served.stderr
    assert (served.stdout, served.stderr, served.code) == (alone.stdout, alone.stderr, alone.code)
    after = run(["query", Q], db=db, cwd=tmp_path)  # the client hung up: the socket went with it
    assert after.full_cli and after.stdout == alone.stdout


async def test_an_entry_of_an_earlier_version_still_serves(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    ingest(db)
    legacy = {"command": str(Path(sys.executable).absolute()), "args": ["-m", "mcp_server", "--db", str(db)]}
    tools, served = await _served_query(legacy, db, tmp_path)
    assert "reconstruct" in tools
    # its socket refuses op `cli` (no planner below the CLI): the full CLI asks it (op `context`)
    assert served.full_cli and served.code == 0 and b"Maya" in served.stdout
