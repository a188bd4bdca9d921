from __future__ import annotations

from pathlib import Path

import numpy as np

from localmem.config import Settings
from localmem.records import SessionIn
from localmem.storage.store import Store

from .conftest import HashEmbedder


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
    for i, row in zip(m.ids.tolist(), m.mat, strict=True):
        assert np.allclose(row, table[i])
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


def test_top_is_exact_nearest_neighbours(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    m = store.mirror("turn")
    q = store.embedder.embed(["bike chain shop"])[0]
    brute = sorted(((float(v @ q), int(i)) for i, v in zip(m.ids, m.mat, strict=True)), reverse=True)
    got = m.top(q, 3)
    assert [s for _t, _turn, s in got] == [s for s, _i in brute[:3]] or np.allclose(
        [s for _t, _turn, s in got], [s for s, _i in brute[:3]], atol=1e-6
    )
    assert {t for t, _turn, _s in got} <= {i for s, i in brute if s >= brute[2][0] - 1e-6}
    assert m.top(q, 100)[-1][2] == brute[-1][0]


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
