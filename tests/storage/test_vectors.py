from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from localmem.config import Settings
from localmem.errors import EmbedderMismatch
from localmem.records import SessionIn, TurnIn
from localmem.storage.engine import db
from localmem.storage.vectors.mirrors import _positions
from localmem.storage.vectors.stored import UNDATED, quantize
from localmem.storage.vectors.table_mirror import TurnMirror
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder


def _table_vectors(store: Store) -> dict[int, np.ndarray]:
    return {
        int(i): np.frombuffer(b, dtype=np.float32)
        for i, b in store.conn.execute("SELECT cue_id, embedding FROM cue_vec").fetchall()
    }


def test_mirror_tracks_writes_and_deletes(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions[:1])
    m = store.mirror("cue")
    assert len(m.ids) == len(_table_vectors(store))
    store.write_sessions(garden_sessions[1:])
    m = store.mirror("cue")
    table = _table_vectors(store)
    assert sorted(m.ids.tolist()) == sorted(table)
    codes = quantize(np.array([table[i] for i in m.ids.tolist()]), m.words)
    assert np.array_equal(m.codes.T, codes)  # the mirror's sign codes are the stored vectors'
    assert np.array_equal(m.vectors(store.conn, np.arange(len(m.ids))), [table[i] for i in m.ids.tolist()])
    store.forget(session="s2")
    m = store.mirror("cue")
    assert sorted(m.ids.tolist()) == sorted(_table_vectors(store))


def test_mirror_sees_another_connections_writes(tmp_path: Path, garden_sessions: list[SessionIn]) -> None:
    path = tmp_path / "m.db"
    a = Store(path, embedder=HashEmbedder(), settings=Settings(db=path))
    b = Store(path, embedder=HashEmbedder(), settings=Settings(db=path))
    a.write_sessions(garden_sessions[:2])
    assert len(b.mirror("turn").ids) == 6
    b.forget(session="s1")
    a.write_sessions(garden_sessions[2:])  # a's mirror must notice b's delete too
    assert sorted(a.mirror("turn").ids.tolist()) == sorted(r[0] for r in a.conn.execute("SELECT id FROM turns"))
    a.close()
    b.close()


def test_nearest_is_exact_when_the_shortlist_holds_every_row(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    m = store.mirror("turn")
    q = store.embedder.embed(["bike chain shop"])[0]
    mat = m.vectors(store.conn, np.arange(len(m.ids)))
    brute = sorted(((float(v @ q), int(i)) for i, v in zip(m.ids, mat, strict=True)), reverse=True)
    pos, sims = m.nearest(store.conn, q, 3)
    assert np.allclose(sims, [s for s, _i in brute[:3]], atol=1e-6)
    assert set(m.ids[pos].tolist()) <= {i for s, i in brute if s >= brute[2][0] - 1e-6}
    assert np.isclose(m.nearest(store.conn, q, 100)[1][-1], brute[-1][0])
    ok = m.ids != brute[0][1]  # a mask leaves rows out
    assert brute[0][1] not in m.ids[m.nearest(store.conn, q, 3, ok)[0]].tolist()


def test_neighbours_follow_session_order_across_gaps(store: Store, garden_sessions: list[SessionIn]) -> None:
    res = store.write_sessions(garden_sessions)
    s1 = res[0].turn_ids
    store.forget(turn_ids=[s1[1]])  # leaves a gap in session s1's ord values
    tm = store.turn_mirror()
    first = tm.index_of(np.array([s1[0]]))
    assert tm.ids[tm.neighbour(first, 1)[0]] == s1[2]  # the gap is skipped
    assert tm.neighbour(first, -1)[0] == -1  # nothing before the first turn
    last_s1 = tm.index_of(np.array([s1[2]]))
    assert tm.neighbour(last_s1, 1)[0] == -1  # never crosses into the next session


def _open(path: Path, embedder: HashEmbedder | None = None, *, rebind: bool = False) -> Store:
    return Store(path, embedder=embedder or HashEmbedder(), settings=Settings(db=path), rebind=rebind)


def _turn_facts(store: Store) -> dict[int, tuple[int, str]]:
    tm = store.turn_mirror()
    return {int(i): (int(s), str(t)) for i, s, t in zip(tm.ids, tm.session, tm.ts, strict=True)}


def _table_facts(store: Store) -> dict[int, tuple[int, str]]:
    rows = store.conn.execute("SELECT id, session_id, coalesce(unixepoch(ts), ?) FROM turns", (int(UNDATED),))
    return {int(i): (int(s), str(t)) for i, s, t in rows.fetchall()}


def test_mirror_reloads_when_a_forgotten_id_is_reused(tmp_path: Path, garden_sessions: list[SessionIn]) -> None:
    """Same count, same max id, different row: a change counter, not count/max, tells."""
    path = tmp_path / "m.db"
    a, b = _open(path), _open(path)
    b.write_sessions(garden_sessions[:2])
    b.write_sessions([SessionIn(key="late", turns=(TurnIn(text="Ana sold the old bike."),), started_at="2024-05-01")])
    before = _turn_facts(a)
    newest = max(before)
    b.forget(turn_ids=[newest])
    res = b.write_sessions(
        [SessionIn(key="s1", turns=(TurnIn(text="Ben bought a new bike."),), started_at="2025-01-01", source="test")]
    )
    assert res[0].turn_ids == (newest,)  # the freed id was given out again
    assert _turn_facts(a) == _table_facts(a) != before
    a.close()
    b.close()


def test_a_mirror_once_returned_never_changes(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions[:1])
    tm, view = store.turn_mirror(), store.mirrors()
    ids, codes, ts = tm.ids.copy(), tm.codes.copy(), tm.ts.copy()
    store.write_sessions(garden_sessions[1:])
    store.forget(session="s1")
    assert np.array_equal(tm.ids, ids) and np.array_equal(tm.codes, codes) and np.array_equal(tm.ts, ts)
    assert np.array_equal(view.cue_pos, view.turn.index_of(view.cue.turns))
    assert len(store.turn_mirror().ids) != len(ids)


def test_snapshot_reads_one_commit(tmp_path: Path, garden_sessions: list[SessionIn]) -> None:
    """Inside a snapshot, SQL and both mirrors stay at one commit while another
    connection writes and forgets; the next snapshot sees the new state."""
    path = tmp_path / "m.db"
    a, b = _open(path), _open(path)
    b.write_sessions(garden_sessions[:2])
    with a.snapshot():
        view = a.mirrors()
        count = a.conn.execute("SELECT count(*) FROM turns").fetchone()[0]
        b.forget(session="s1")
        b.write_sessions(garden_sessions[2:])
        assert a.mirrors() is view
        assert a.conn.execute("SELECT count(*) FROM turns").fetchone()[0] == count == len(view.turn.ids)
        assert (view.cue_pos >= 0).all()
    assert sorted(a.turn_mirror().ids.tolist()) == sorted(_table_facts(a))
    assert (a.mirrors().cue_pos >= 0).all()
    a.close()
    b.close()


def test_rows_loaded_in_a_rolled_back_transaction_are_dropped(tmp_path: Path, garden_sessions: list[SessionIn]) -> None:
    """A mirror refreshed inside a write transaction sees its uncommitted rows; when
    that transaction rolls back, their ids are free again and must not stay mirrored."""
    path = tmp_path / "m.db"
    a, b = _open(path), _open(path)
    a.write_sessions(garden_sessions[:1])
    vec = a.embedder.embed(["a turn that never was"])[0].tobytes()
    with pytest.raises(RuntimeError), db.transaction(a.conn):
        sid = a.conn.execute("INSERT INTO sessions(source, key) VALUES ('x', 'ghost') RETURNING id").fetchone()[0]
        tid = a.conn.execute(
            "INSERT INTO turns(session_id, ord, text, hash, words, ts) VALUES (?, 0, 'ghost', 'h', 1, '1999-01-01') "
            "RETURNING id",
            (sid,),
        ).fetchone()[0]
        a.conn.execute("INSERT INTO turn_vec(turn_id, embedding) VALUES (?, ?)", (tid, vec))
        assert tid in a.turn_mirror().ids  # seen inside the transaction
        raise RuntimeError("abort")
    res = b.write_sessions(garden_sessions[1:2])
    assert tid in res[0].turn_ids  # the rolled-back id, given out again
    assert _turn_facts(a) == _table_facts(a)
    a.close()
    b.close()


class _Negated(HashEmbedder):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return -super().embed(texts)


def test_reindex_by_another_process_reloads_the_vectors(tmp_path: Path, garden_sessions: list[SessionIn]) -> None:
    path = tmp_path / "m.db"
    # a store that follows its record loads the new embedder (a fixed one here would be refused)
    a = Store(
        path, embedder=HashEmbedder(), settings=Settings(db=path), follow=lambda _spec: _Negated(model_id="negated")
    )
    a.write_sessions(garden_sessions)
    tm = a.turn_mirror()
    old = tm.vectors(a.conn, np.arange(len(tm.ids)))
    other = _open(path, _Negated(model_id="negated"), rebind=True)
    other.reindex()
    other.close()
    tm = a.turn_mirror()
    assert np.allclose(tm.vectors(a.conn, np.arange(len(tm.ids))), -old)
    assert np.array_equal(tm.codes.T, quantize(-old, tm.words))
    a.close()


def test_reindex_to_another_dimension_is_a_clear_error(tmp_path: Path, garden_sessions: list[SessionIn]) -> None:
    path = tmp_path / "m.db"
    a = _open(path)
    a.write_sessions(garden_sessions)
    a.turn_mirror()
    other = _open(path, HashEmbedder(dim=32, model_id="small"), rebind=True)
    other.reindex()
    other.close()
    with pytest.raises(EmbedderMismatch, match="holds vectors of embedder 'small' \\(32-d\\)"):
        a.turn_mirror()
    a.close()


@pytest.mark.parametrize("sparse", [False, True])
def test_cue_positions_by_table_and_by_search_agree(sparse: bool) -> None:
    """A view's cue -> turn positions: through a table by id when turn ids are dense, by
    binary search when not; both say -1 for an id the turn mirror lacks."""
    rng = np.random.default_rng(3)
    ids = np.sort(rng.choice(np.arange(1, 5000), 3000, replace=False)).astype(np.int32)
    if sparse:
        ids = np.concatenate([ids, np.array([2**31 - 2], dtype=np.int32)])
    turn = TurnMirror(8)
    turn.ids = ids
    asked = np.concatenate([rng.integers(-5, 5100, 20000), ids[:50], [0, -1, int(ids[-1]), int(ids[-1]) + 1]])
    pos = _positions(turn, asked.astype(ids.dtype))
    assert pos.dtype == np.int32
    assert np.array_equal(pos, turn.index_of(asked))
    assert (pos[np.isin(asked, ids, invert=True)] == -1).all()
