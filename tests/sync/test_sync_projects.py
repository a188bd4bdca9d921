"""Sync keeps where an agent's session ran: a session written with its client and project
on one device arrives on the other with them, so a project scope there finds its talk."""

from __future__ import annotations

from pathlib import Path

from localmem.records import Project, ProjectScope, SessionIn, TurnIn
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.reads import views
from tests.helpers.sync import open_device, sync


def test_a_synced_session_keeps_its_project(tmp_path: Path) -> None:
    root = tmp_path / "folder"
    root.mkdir()
    a, b = open_device(tmp_path / "a.db"), open_device(tmp_path / "b.db")
    where = Project(cwd="/home/sam/shop", repository="https://example.com/sam/shop", branch="main", commit="abc123")
    turns = (
        TurnIn("Which database for the shop?", "user", "user", "2024-03-01T10:00:00"),
        TurnIn("The shop uses Postgres 16 with Prisma.", "assistant", "assistant", "2024-03-01T10:01:00"),
    )
    a.write_sessions([SessionIn("s-1", turns, "2024-03-01T10:00:00", "claude-code:shop", "", "claude-code", where)])
    sync(a, root)
    sync(b, root)
    sid = int(b.conn.one("SELECT id FROM sessions WHERE key = 's-1'")[0])
    head = views.session_head(b.conn, sid)
    assert head is not None
    assert (head.client, head.cwd, head.repository, head.branch) == (
        "claude-code",
        "/home/sam/shop",
        "https://example.com/sam/shop",
        "main",
    )
    # the agent's reply is the project's own talk there too (elsewhere it is not visible)
    ctx = reconstruct(b, "which database does the shop use?", 200, scope=ProjectScope("/home/sam/shop"))
    assert any(t.text.startswith("The shop uses Postgres") for t in ctx.turns)
    away = reconstruct(b, "which database does the shop use?", 200, scope=ProjectScope("/home/sam/etl"))
    assert not any(t.text.startswith("The shop uses Postgres") for t in away.turns)
