"""The read-time second hop: the widened query and the joined pool (real store)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from localmem.retrieval import second_hop
from localmem.retrieval.pool import candidate_pool
from localmem.retrieval.scorer import DEFAULT_WEIGHTS
from localmem.storage.queries import Filter
from localmem.storage.store import Store

from .conftest import HashEmbedder, session


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
