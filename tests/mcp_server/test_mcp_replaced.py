"""A store replaced under a running MCP server (another file renamed over its path, as a
restore by hand or a sync client does) is no longer served: through a real MCP client session
with the server as a stdio subprocess, the next call is a tool error that says so and how to
go on, and when the server exits the new file is left as it was (no checkpoint of the old
store's frames into it, its own ``-wal`` not deleted)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import apsw
import pytest
from mcp import Client, StdioServerParameters

from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder, session

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _texts(db: Path) -> set[str]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        return {str(r[0]) for r in conn.execute("SELECT text FROM turns")}
    finally:
        conn.close()


async def test_a_store_renamed_over_is_refused_and_left_alone(tmp_path: Path) -> None:
    db, other = tmp_path / "m.db", tmp_path / "other.db"
    env = {k: v for k, v in os.environ.items() if k != "LOCALMEM_MODEL"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_server", "--db", str(db)], env=env)
    async with Client(params, read_timeout_seconds=120) as c:
        first = await c.call_tool("remember", {"turns": [{"text": "Ana keeps bees."}], "session": "s"})
        assert not first.is_error
        store = Store(other, embedder=HashEmbedder())  # another store, open in this process: it keeps a -wal
        store.conn.execute("PRAGMA wal_autocheckpoint = 0")
        store.write_sessions([session("n", "2024-01-01T10:00:00", ("Ben", "The new file's own turn."))])
        os.replace(other, db)
        for wal in ("-wal", "-shm"):
            if Path(f"{other}{wal}").exists():
                os.replace(f"{other}{wal}", f"{db}{wal}")
        late = await c.call_tool("remember", {"turns": [{"text": "Written after the swap."}], "session": "s"})
        assert late.is_error
        said = " ".join(getattr(part, "text", "") for part in late.content)
        assert "another file" in said and "restart" in said
    store.close()
    assert _texts(db) == {"The new file's own turn."}
