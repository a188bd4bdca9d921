"""The recall log (``storage.layers.recalls``, migration 0013): what each reconstruct
handed a client, bounded, private (secrets out of the query, never journaled), reached by
forget (cascade), and never in the way of the caller (best effort, short wait)."""

from __future__ import annotations

import time
from pathlib import Path

from localmem.config import Settings
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.engine import db
from localmem.storage.layers import recalls
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder, session


def _store(path: Path) -> Store:
    s = Store(path, embedder=HashEmbedder(), settings=Settings(db=path))
    s.write_sessions(
        [
            session("a", "2024-03-01T10:00:00", ("Ana", "The spare key is under the blue pot."), ("Ben", "Thanks!")),
            session("b", "2024-03-02T10:00:00", ("Ana", "I moved the key to the shed."), ("Ben", "Noted.")),
        ]
    )
    return s


def test_a_call_and_its_turns_are_logged_in_context_order(tmp_path: Path) -> None:
    with _store(tmp_path / "m.db") as s:
        ctx = reconstruct(s, "where is the spare key? token sk-ant-api03-" + "A" * 90, 500)
        assert ctx.turns
        rec = recalls.from_context(ctx, "mcp:claude", "reconstruct", scope="a", session="s-1", project="/src/x")
        assert "sk-ant-api03" not in rec.query and "[secret:" in rec.query  # the query's secret stays out
        journal = s.conn.one("SELECT count(*) FROM changes")[0]
        cid = recalls.log(s.conn, rec, keep=10)
        assert cid is not None
        assert s.conn.one("SELECT count(*) FROM changes")[0] == journal  # not a fact: never journaled
        got = recalls.call(s.conn, cid)
        assert got is not None and (got.client, got.tool, got.turns, got.kept) == (
            "mcp:claude",
            "reconstruct",
            len(ctx.turns),
            len(ctx.turns),
        )
        assert (got.scope, got.session, got.project, got.tokens) == ("a", "s-1", "/src/x", ctx.tokens)
        handed = recalls.call_turns(s.conn, cid)
        assert [t.turn_id for t in handed] == [t.turn_id for t in ctx.turns]
        assert [t.place for t in handed] == list(range(1, len(handed) + 1))
        assert [t.reason for t in handed] == [t.reason for t in ctx.turns]
        top = recalls.turn_recalls(s.conn, ctx.turns[0].turn_id)
        assert top.total == 1 and top.items[0].calls == 1 and top.items[0].clients == "mcp:claude"
        assert recalls.turn_recall_sessions(s.conn, ctx.turns[0].turn_id)[0][:3] == ("mcp:claude", "s-1", 1)


def test_bounded_cleared_and_off(tmp_path: Path) -> None:
    with _store(tmp_path / "m.db") as s:
        ctx = reconstruct(s, "spare key", 300)
        for i in range(7):
            recalls.log(s.conn, recalls.from_context(ctx, "cli", f"query-{i}"), keep=3)
        page = recalls.calls(s.conn, 10, 0)
        assert page.total == 3 and [c.tool for c in page.items] == ["query-6", "query-5", "query-4"]
        assert s.conn.one("SELECT count(DISTINCT call_id) FROM recall_turns")[0] == 3  # turns pruned with calls
        assert recalls.calls(s.conn, 10, 0, client="mcp").total == 0
        assert recalls.clients(s.conn) == [("cli", 3)]
        assert recalls.log(s.conn, recalls.from_context(ctx, "cli", "off"), keep=0) is None
        assert recalls.calls(s.conn, 10, 0).total == 3
        assert recalls.clear(s.conn) == 3
        assert s.conn.one("SELECT count(*) FROM recall_turns")[0] == 0


def test_forget_reaches_the_log(tmp_path: Path) -> None:
    with _store(tmp_path / "m.db") as s:
        ctx = reconstruct(s, "where is the key", 500)
        cid = recalls.log(s.conn, recalls.from_context(ctx, "cli", "query"), keep=10)
        assert cid is not None
        gone = ctx.turns[0].turn_id
        s.forget([gone])
        got = recalls.call(s.conn, cid)
        assert got is not None and got.turns == len(ctx.turns) and got.kept == len(ctx.turns) - 1
        assert gone not in [t.turn_id for t in recalls.call_turns(s.conn, cid)]
        assert recalls.turn_recalls(s.conn, gone).total == 0


def test_a_busy_store_costs_the_record_not_the_caller(tmp_path: Path) -> None:
    with _store(tmp_path / "m.db") as s:
        ctx = reconstruct(s, "spare key", 300)
        other = db.connect(tmp_path / "m.db")
        try:
            other.execute("BEGIN IMMEDIATE")  # another writer holds the lock
            t0 = time.monotonic()
            assert recalls.log(s.conn, recalls.from_context(ctx, "cli", "query"), keep=10) is None
            assert time.monotonic() - t0 < 5  # waited about WAIT_MS, not the 10 s busy timeout
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert recalls.log(s.conn, recalls.from_context(ctx, "cli", "query"), keep=10) is not None
