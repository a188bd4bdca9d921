"""``localmem serve --sync DIR`` through a real MCP client session (a stdio subprocess):
started before DIR exists, it says it waits and syncs once DIR appears (it used to stop
for good); a segment it refuses is in its log (stderr), and ``localmem doctor`` names it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("LOCALMEM_MODEL", "LOCALMEM_SYNC_PASSPHRASE")}
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    return e


async def _until(check: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await anyio.sleep(0.3)


async def test_serve_sync_waits_for_the_folder_and_logs_refusals(tmp_path: Path) -> None:
    folder, db, log = tmp_path / "Sync" / "localmem", tmp_path / "mem.db", tmp_path / "server.log"
    args = ["-m", "localmem", "--db", str(db), "serve", "--no-worker", "--sync", str(folder), "--sync-interval", "0.5"]
    params = StdioServerParameters(command=sys.executable, args=args, env=_env(), cwd=str(ROOT))
    with log.open("w", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as c:
            res = await c.call_tool("remember", {"turns": [{"text": "Ana keeps bees on the roof."}], "session": "bees"})
            assert not res.is_error
            await _until(lambda: "waiting for it to appear" in log.read_text("utf-8"))
            folder.mkdir(parents=True)  # the sync tool makes the folder later
            await _until(lambda: any(folder.rglob("00000001.seg")))
            other = folder / "0123456789abcdef"
            other.mkdir()
            (other / "00000001.seg").write_bytes(b"LMSEG/1\n{not json}\nbody")
            await _until(lambda: "refused 0123456789abcdef/00000001.seg" in log.read_text("utf-8"))
            assert "background sync stopped" not in log.read_text("utf-8")
    doctor = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), "doctor", "--json"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=str(ROOT),
        timeout=300,
    )
    assert "0123456789abcdef/00000001.seg" in doctor.stdout and "REFUSED" in doctor.stdout
