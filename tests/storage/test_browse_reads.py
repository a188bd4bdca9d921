"""The memory browser's reads (``storage.reads.browse``, ``selection``) on real stores:
filters, the one order of sessions and months (every session reachable by paging, a
month's offset is the sessions before it), windows of a session, and a forget preview
that counts exactly what the forget then removes."""

from __future__ import annotations

from pathlib import Path

import pytest

from localmem.config import Settings
from localmem.errors import InputError
from localmem.records import Project, SessionIn, TurnIn
from localmem.storage.reads import browse, selection
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder


def _fill(s: Store) -> None:
    sessions = []
    for i in range(23):  # 23 dated sessions over three months, one undated
        month, day = 3 + i // 10, 1 + i % 10
        sessions.append(
            SessionIn(
                key=f"s{i:02d}",
                source="locomo:conv-1" if i % 3 else "chatgpt",
                started_at=f"2024-{month:02d}-{day:02d}T09:00:00",
                turns=(
                    TurnIn(f"session {i} opens about item {i}", "Ana", "user"),
                    TurnIn(f"answer {i} from the assistant", "assistant", "assistant"),
                ),
            )
        )
    sessions.append(SessionIn(key="bare", source="notes", turns=(TurnIn("a thought without a date", "Ana"),)))
    s.write_sessions(sessions)


@pytest.fixture
def filled(tmp_path: Path) -> Store:
    s = Store(tmp_path / "m.db", embedder=HashEmbedder(), settings=Settings(db=tmp_path / "m.db"))
    _fill(s)
    return s


def test_paging_reaches_every_session_in_one_order(filled: Store) -> None:
    seen: list[str] = []
    offset = 0
    while True:
        page = browse.sessions(filled.conn, {}, 5, offset)
        assert page.total == 24
        if not page.items:
            break
        seen += [r.key for r in page.items]
        offset += len(page.items)
    assert len(seen) == len(set(seen)) == 24 and seen[-1] == "bare"  # undated last
    starts = [r.start for r in browse.sessions(filled.conn, {}, 50, 0).items if r.start]
    assert starts == sorted(starts, reverse=True)
    months = browse.months(filled.conn, {})
    assert [m.month for m in months] == ["2024-05", "2024-04", "2024-03", "undated"]
    assert sum(m.sessions for m in months) == 24 and sum(m.turns for m in months) == 47
    at = 0
    for m in months:  # a month's first session sits at the count of the sessions before it
        first = browse.sessions(filled.conn, {}, 1, at).items[0]
        assert (first.start or "undated")[:7] == m.month[:7]
        at += m.sessions


def test_filters_narrow_turns_and_sessions(filled: Store) -> None:
    c = filled.conn
    role = browse.clean({"role": "assistant"})
    assert browse.turns(c, role, 100, 0).total == 23
    family = browse.clean({"source": "locomo"})  # a family takes every locomo:… source
    assert browse.sessions(c, family, 100, 0).total == 15
    assert browse.sessions(c, browse.clean({"source": "locomo:conv-1"}), 100, 0).total == 15
    april = browse.clean({"start": "2024-04-01", "end": "2024-04-30"})  # the end day is included
    assert {r.start[:7] for r in browse.sessions(c, april, 100, 0).items if r.start} == {"2024-04"}
    assert browse.sessions(c, april, 100, 0).total == 10
    assert browse.turns(c, {**april, **role}, 100, 0).total == 10
    newest = browse.turns(c, {}, 3, 0).items
    rows = browse.turn_rows(c, newest)
    assert [rows[i].ts for i in newest] == sorted((rows[i].ts for i in newest), reverse=True)
    assert browse.turns(c, {}, 100, 0).items[-1] == max(browse.turn_ids(c, browse.clean({"speaker": "Ana"})))
    with pytest.raises(InputError, match="unknown filter"):
        browse.clean({"colour": "red"})
    with pytest.raises(InputError, match="not a date"):
        browse.clean({"start": "yesterday-ish"})
    f = browse.facets(c)
    assert f.sources[0] == ("locomo", 15) and ("chatgpt", 8) in f.sources and ("notes", 1) in f.sources
    assert dict(f.roles) == {"user": 24, "assistant": 23}


def test_session_windows_and_places(filled: Store) -> None:
    ids = filled.write([TurnIn(f"line {i}", "Ana") for i in range(30)], "long", source="notes").turn_ids
    sid = browse.place_in_session(filled.conn, ids[17])
    assert sid is not None and sid[1] == 17
    win = browse.session_window(filled.conn, sid[0], 10, 10)
    assert win.total == 30 and [r.id for r in win.items] == list(ids[10:20])
    assert browse.place_in_session(filled.conn, 10**9) is None


def test_preview_counts_what_the_forget_removes(filled: Store) -> None:
    c = filled.conn
    april = browse.turn_ids(c, browse.clean({"start": "2024-04-01", "end": "2024-04-30", "role": "user"}))
    whole = selection.session_turn_ids(c, int(c.one("SELECT id FROM sessions WHERE key = 's00'")[0]))
    ids = april + whole
    p = selection.preview(c, ids)
    before = {
        "turns": c.one("SELECT count(*) FROM turns")[0],
        "sessions": c.one("SELECT count(*) FROM sessions")[0],
        "cues": c.one("SELECT count(*) FROM cues")[0],
        "edges": c.one("SELECT count(*) FROM edges")[0],
    }
    assert (p.turns, p.sessions, p.sessions_emptied) == (12, 11, 1)
    assert p.first == "2024-03-01T09:00:00" and len(p.hashes) == 12
    assert filled.forget(ids) == 12
    after = {
        "turns": c.one("SELECT count(*) FROM turns")[0],
        "sessions": c.one("SELECT count(*) FROM sessions")[0],
        "cues": c.one("SELECT count(*) FROM cues")[0],
        "edges": c.one("SELECT count(*) FROM edges")[0],
    }
    assert before["turns"] - after["turns"] == p.turns
    assert before["sessions"] - after["sessions"] == p.sessions_emptied
    assert before["cues"] - after["cues"] == sum(p.cues.values())
    assert before["edges"] - after["edges"] == sum(p.edges.values())
    assert sorted(str(r[0]) for r in c.execute("SELECT hash FROM forgotten")) == p.hashes
    assert selection.existing(c, ids) == []


def test_client_and_project_filters(filled: Store) -> None:
    shop = Project(cwd="/home/me/code/shop", branch="main")
    for key, client, project in (
        ("agent-1", "claude-code", shop),
        ("agent-2", "codex", Project(cwd="/home/me/code/shop/api")),
        ("agent-3", "claude-code", Project(cwd="/home/me/code/shopfront")),
    ):
        filled.write(
            SessionIn(
                key=key,
                source="claude-code",
                client=client,
                project=project,
                turns=(TurnIn(f"{key} ran", "assistant", "assistant"),),
            )
        )
    c = filled.conn
    shop_sessions = browse.sessions(c, browse.clean({"project": "/home/me/code/shop"}), 10, 0)
    assert sorted(r.key for r in shop_sessions.items) == ["agent-1", "agent-2"]  # the folder and below, not a sibling
    assert browse.turns(c, browse.clean({"client": "claude-code"}), 10, 0).total == 2
    f = browse.facets(c)
    assert f.clients == [("claude-code", 2), ("codex", 1)]
    assert {p for p, _ in f.projects} == {"/home/me/code/shop", "/home/me/code/shop/api", "/home/me/code/shopfront"}
