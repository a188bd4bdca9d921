"""The read-time second hop: the widened query and the joined pool (real store)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from localmem.config import RetrievalParams, Settings
from localmem.retrieval import second_hop
from localmem.retrieval.pool import candidate_pool
from localmem.retrieval.reconstruct import Recorder, reconstruct
from localmem.retrieval.scorer import DEFAULT_WEIGHTS, FEATURES
from localmem.storage.reads.queries import Filter
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder, session


def test_widened_query_adds_names_first_and_skips_what_the_query_has() -> None:
    q = second_hop.widened_query("What did Caroline paint?", ["Caroline painted a sunset over Lake Tahoe for Melanie."])
    extra = q.removeprefix("What did Caroline paint?").split()
    assert extra[:3] == ["Lake", "Tahoe", "Melanie"]
    assert "Caroline" not in extra and "painted" in extra
    assert second_hop.widened_query("hello", []) == "hello"


def test_second_pool_keeps_the_first_rows_and_adds_new_turns(tmp_path: Path) -> None:
    store = Store(tmp_path / "m.db", embedder=HashEmbedder())
    try:
        store.write_sessions(
            [
                session(
                    "s1", "2023-05-01T10:00:00", ("Ann", "I painted a sunset at Lake Tahoe."), ("Bo", "Nice colours.")
                ),
                session(
                    "s2", "2023-06-01T10:00:00", ("Bo", "Tahoe trip photos are up on the wall."), ("Ann", "Lovely.")
                ),
            ]
        )
        flt = Filter()
        with store.snapshot():
            pool = candidate_pool(store, "what did Ann paint", flt, DEFAULT_WEIGHTS)
            assert pool is not None
            prob = DEFAULT_WEIGHTS.probability(pool.feats)
            merged, mprob, q2 = second_hop.second_pool(store, "what did Ann paint", pool, prob, flt)
        n = len(pool.turn_ids)
        assert "Tahoe" in q2
        assert np.array_equal(merged.turn_ids[:n], pool.turn_ids) and np.array_equal(mprob[:n], prob)
        assert len(set(merged.turn_ids.tolist())) == len(merged.turn_ids) == len(mprob)
        assert all(r[0] == "second_hop" for r in merged.reasons[n:])
    finally:
        store.close()


def _hop_store(tmp_path: Path, discount: float) -> Store:
    """Ann's painting (found by the question) names Lake Tahoe; a later session about
    Tahoe shares no word with the question. Many filler sessions and two candidates per
    list keep the Tahoe turn out of the first pool."""
    params = RetrievalParams(candidates=2, second_hop=discount, cable=False)
    path = tmp_path / f"hop-{discount}.db"
    store = Store(path, embedder=HashEmbedder(), settings=Settings(db=path, retrieval=params))
    sessions = [
        session("s0", "2023-05-01T10:00:00", ("Ann", "I painted a sunset at Lake Tahoe."), ("Bo", "Nice colours.")),
        session("s1", "2023-06-01T10:00:00", ("Bo", "The Tahoe cabin has a new dock."), ("Ann", "Lovely.")),
    ]
    for i in range(2, 40):
        sessions.append(
            session(
                f"s{i}",
                f"2023-07-{i % 28 + 1:02d}T10:00:00",
                ("Bo", f"Filler chat number {i} about lunch."),
                ("Ann", "Sure."),
            )
        )
    store.write_sessions(sessions)
    return store


def test_reconstruct_joins_the_second_hop_only_when_the_setting_is_on(tmp_path: Path) -> None:
    off, on = _hop_store(tmp_path, 0.0), _hop_store(tmp_path, 1.0)
    try:
        text = reconstruct(off, "what did Ann paint", 4000).text
        assert "Lake Tahoe" in text and "Tahoe cabin" not in text
        recorder = Recorder()
        text = reconstruct(on, "what did Ann paint", 4000, recorder=recorder).text
        assert "Lake Tahoe" in text and "Tahoe cabin" in text
        assert recorder.selection is not None
        assert any(c.reason == "second_hop" for c in recorder.selection.ranked)
        # A traced read explains every row alike: the widened pool's zero-weight
        # features are computed too, not left 0 as an untraced read leaves them.
        assert recorder.pool is not None
        hop = [r[0] == "second_hop" for r in recorder.pool.reasons]
        assert any(hop) and np.all(recorder.pool.feats[hop, FEATURES.index("scent")] != 0.0)
    finally:
        off.close()
        on.close()
