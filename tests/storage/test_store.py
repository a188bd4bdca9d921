from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from localmem.config import Settings
from localmem.errors import EmbedderMismatch, InputError
from localmem.records import SessionIn, TurnIn
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder


def count(store: Store, sql: str) -> int:
    return int(store.conn.execute(sql).fetchone()[0])


def test_write_returns_ids_and_stores_everything(store: Store, garden_sessions: list[SessionIn]) -> None:
    res = store.write_sessions(garden_sessions)
    assert [r.new_turns for r in res] == [3, 3, 2]
    ids = [i for r in res for i in r.turn_ids]
    assert len(set(ids)) == 8
    assert count(store, "SELECT count(*) FROM turns") == 8
    assert count(store, "SELECT count(*) FROM turn_vec") == 8
    n_cues = count(store, "SELECT count(*) FROM cues WHERE kind = 'statement'")
    assert n_cues >= 8
    assert count(store, "SELECT count(*) FROM cue_vec") == n_cues
    # every statement cue's span points at exactly its text in the source turn
    for text, start, end, turn_text in store.conn.execute(
        "SELECT c.text, c.span_start, c.span_end, t.text FROM cues c JOIN turns t ON t.id = c.turn_id"
    ):
        assert turn_text[start:end] == text
    assert count(store, "SELECT count(*) FROM turns_fts WHERE turns_fts MATCH 'tomatoes'") == 3


def test_rewrite_writes_nothing(store: Store, garden_sessions: list[SessionIn], embedder: HashEmbedder) -> None:
    first = store.write_sessions(garden_sessions)
    calls = embedder.calls
    before = store.stats()
    again = store.write_sessions(garden_sessions)
    assert [r.turn_ids for r in again] == [r.turn_ids for r in first]
    assert all(r.new_turns == 0 for r in again)
    assert store.stats() == before
    assert embedder.calls == calls + 1  # only the empty batch call; nothing new embedded


def test_grown_session_appends_in_order(store: Store) -> None:
    t = [TurnIn("first message here", "A"), TurnIn("second message here", "B")]
    store.write(t, session="chat")
    res = store.write([*t, TurnIn("third message here", "A")], session="chat")
    assert (res.new_turns, res.existing_turns) == (1, 2)
    ords = store.conn.execute("SELECT text FROM turns ORDER BY ord").fetchall()
    assert [r[0] for r in ords] == ["first message here", "second message here", "third message here"]


def test_temporal_edges_follow_window(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    w = store.params.temporal_window
    for src, dst in store.conn.execute(
        "SELECT a.ord, b.ord FROM edges e JOIN turns a ON a.id = e.src JOIN turns b ON b.id = e.dst "
        "WHERE e.kind = 'temporal'"
    ):
        assert 0 < dst - src <= w
    # no temporal edge crosses sessions
    assert (
        count(
            store,
            "SELECT count(*) FROM edges e JOIN turns a ON a.id = e.src JOIN turns b ON b.id = e.dst "
            "WHERE e.kind = 'temporal' AND a.session_id != b.session_id",
        )
        == 0
    )


def test_semantic_edges_link_similar_turns(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    rows = store.conn.execute("SELECT src, dst, weight FROM edges WHERE kind = 'semantic'").fetchall()
    assert rows
    assert all(src < dst and -1.0 <= w <= 1.0 for src, dst, w in rows)
    texts = dict(store.conn.execute("SELECT id, text FROM turns").fetchall())
    # the two tomato turns of different sessions share a semantic edge
    tomato = [i for i, t in texts.items() if "tomatoes" in t]
    assert any({s, d} <= set(tomato) for s, d, _ in rows)


def test_forget_cascades_everywhere(store: Store, garden_sessions: list[SessionIn]) -> None:
    res = store.write_sessions(garden_sessions)
    victim = res[1].turn_ids
    assert store.forget(turn_ids=victim) == 3
    for sql in (
        "SELECT count(*) FROM turns",
        "SELECT count(*) FROM turn_vec",
    ):
        assert count(store, sql) == 5
    assert count(store, f"SELECT count(*) FROM cues WHERE turn_id IN {tuple(victim)}") == 0
    assert count(store, "SELECT count(*) FROM cue_vec") == count(store, "SELECT count(*) FROM cues")
    assert count(store, f"SELECT count(*) FROM edges WHERE src IN {tuple(victim)} OR dst IN {tuple(victim)}") == 0
    assert count(store, "SELECT count(*) FROM turns_fts WHERE turns_fts MATCH 'bike'") == 0
    assert count(store, "SELECT count(*) FROM sessions") == 2  # the emptied session goes too


def test_forget_by_session_and_before(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    assert store.forget(session="s1") == 3
    assert store.forget(before="2024-03-01") == 3
    assert count(store, "SELECT count(*) FROM turns") == 2
    with pytest.raises(InputError):
        store.forget()


def test_embedder_mismatch_is_refused_then_reindexed(tmp_path: Path, garden_sessions: list[SessionIn]) -> None:
    path = tmp_path / "m.db"
    with Store(path, embedder=HashEmbedder(64, "model-a"), settings=Settings(db=path)) as s:
        s.write_sessions(garden_sessions)
    with pytest.raises(EmbedderMismatch, match="model-a"):
        Store(path, embedder=HashEmbedder(32, "model-b"), settings=Settings(db=path))
    with Store(path, embedder=HashEmbedder(32, "model-b"), settings=Settings(db=path), rebind=True) as s:
        assert s.reindex() == 8
    with Store(path, embedder=HashEmbedder(32, "model-b"), settings=Settings(db=path)) as s:
        assert s.stats()["embedder"] == "model-b"
        assert reconstruct(s, "tomatoes garden", 200).turns


def test_bad_turns_store_nothing(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions[:1])
    before = store.stats()
    bad = SessionIn(key="x", turns=(TurnIn("fine text"), TurnIn("   ")), source="test")
    with pytest.raises(InputError, match="turn 1"):
        store.write_sessions([garden_sessions[1], bad])
    assert store.stats() == before
    with pytest.raises(InputError, match="unrecognised date"):
        store.write([TurnIn("some text", timestamp="not a date")], session="y")
    assert store.stats() == before


def test_data_survives_reopen(tmp_path: Path, garden_sessions: list[SessionIn]) -> None:
    path = tmp_path / "m.db"
    with Store(path, embedder=HashEmbedder(), settings=Settings(db=path)) as s:
        s.write_sessions(garden_sessions)
    with Store(path, embedder=HashEmbedder(), settings=Settings(db=path)) as s:
        assert s.stats()["turns"] == 8


def _vectors(store: Store) -> dict[tuple[str, int], bytes]:
    out = {("turn", int(i)): bytes(b) for i, b in store.conn.execute("SELECT turn_id, embedding FROM turn_vec")}
    out.update({("cue", int(i)): bytes(b) for i, b in store.conn.execute("SELECT cue_id, embedding FROM cue_vec")})
    return out


def test_reindex_embeds_like_the_write_path(tmp_path: Path, garden_sessions: list[SessionIn]) -> None:
    from localmem.models.embedding import OnnxMiniLM

    path = tmp_path / "m.db"
    emb = OnnxMiniLM()  # span-pooled statement cues: reindex must pool them the same way
    with Store(path, embedder=emb, settings=Settings(db=path)) as s:
        s.write_sessions(garden_sessions)
        before = _vectors(s)
    with Store(path, embedder=emb, settings=Settings(db=path), rebind=True) as s:
        s.reindex()
        after = _vectors(s)
    assert before.keys() == after.keys()
    for key, blob in before.items():
        assert np.allclose(np.frombuffer(blob, np.float32), np.frombuffer(after[key], np.float32), atol=1e-5), key


def test_forget_takes_any_number_of_ids(store: Store, garden_sessions: list[SessionIn]) -> None:
    ids = [i for r in store.write_sessions(garden_sessions) for i in r.turn_ids]
    many = [*range(10**6, 10**6 + 50_000), ids[0], ids[-1]]  # past SQLite's 32,766 parameters
    assert store.forget(many) == 2
    assert count(store, f"SELECT count(*) FROM turns WHERE id IN ({ids[0]}, {ids[-1]})") == 0
    assert count(store, "SELECT count(*) FROM changes WHERE kind = 'forget'") == 2
