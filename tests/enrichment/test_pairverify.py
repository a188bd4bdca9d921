"""The model-free antecedent verifier: construction, links through the door, the fit."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from localmem.bench import cable_fit
from localmem.enrichment import pairverify
from localmem.enrichment.pairverify import MODEL_ID, PAIR_FEATURES, PairWeights
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder, session

ACCEPT_ALL = PairWeights((0.0,) * len(PAIR_FEATURES), 0.0, 0.0)  # p = 0.5 >= 0 for every pair


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "m.db", embedder=HashEmbedder())
    store.write_sessions(
        [
            session(
                "s1", "2023-05-01T10:00:00",
                ("Caroline", "I signed the contract with the Seattle adoption agency today."),
                ("Melanie", "That is wonderful, Caroline! How long does the agency take?"),
                ("Caroline", "They said the Seattle office needs six months of paperwork."),
            ),
            session(
                "s2", "2023-06-10T10:00:00",
                ("Melanie", "How is the paperwork for the adoption going?"),
                ("Caroline", "The Seattle agency approved my paperwork, the home visit is next."),
                ("Melanie", "ok"),
            ),
        ]
    )  # fmt: skip
    return store


def test_links_go_to_earlier_turns_through_the_door(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        got = pairverify.link_store(store, ACCEPT_ALL, max_links=2)
        rows = store.conn.execute("SELECT src, dst, reason FROM edges WHERE kind = 'antecedent'").fetchall()
        assert got["turns"] == 6 and got["links"] == len(rows) > 0
        per_dst: dict[int, int] = {}
        for src, dst, reason in rows:
            assert src < dst and reason.startswith(MODEL_ID)
            per_dst[dst] = per_dst.get(dst, 0) + 1
        assert max(per_dst.values()) <= 2
        journal = store.conn.execute("SELECT count(*), min(model) FROM changes WHERE kind = 'antecedent'").fetchone()
        assert journal == (len(rows), MODEL_ID)
        runs: dict[int, str] = dict(store.conn.execute("SELECT turn_id, skipped FROM antecedent_runs").fetchall())
        assert len(runs) == 6
        assert runs[min(runs)] == "no earlier turns" and "low information" in runs.values()
        assert pairverify.link_store(store, ACCEPT_ALL) == {"turns": 0, "links": 0}  # processed once
    finally:
        store.close()


def test_threshold_rejects_and_subtraction_removes_direct_hits(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        assert pairverify.link_store(store, PairWeights(ACCEPT_ALL.coef, 0.0, 0.9))["links"] == 0
        voc = pairverify.vocabulary(store)
        last = max(voc.turns) - 1  # the approval turn
        full = pairverify.construct(store, voc, last, subtraction=False)
        sub = pairverify.construct(store, voc, last, subtraction=True)
        assert set(sub.candidates) == set(full.candidates) - set(full.direct)
        assert all(c < last for c in full.candidates)
        assert full.feats.shape == (len(full.candidates), len(PAIR_FEATURES))
        assert set(full.feats[:, PAIR_FEATURES.index("in_b")]) <= {0.0, 1.0}
    finally:
        store.close()


def test_queries_come_from_entities_and_rare_words(tmp_path: Path) -> None:
    store = _store(tmp_path)
    try:
        voc = pairverify.vocabulary(store)
        qs = pairverify.antecedent_queries("The Seattle agency approved my paperwork, the home visit is next.", voc)
        assert qs and "Seattle" in qs[0]
        assert pairverify.entities("Seattle is far. I met Anna there.", frozenset()) == frozenset({"anna"})
    finally:
        store.close()


def test_fit_learns_a_separating_feature_and_scores_per_turn() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, len(PAIR_FEATURES)))
    y = X[:, 5] > 1.0
    coef, icpt = cable_fit.fit_logistic(X, y, l2=0.1)
    assert coef[5] == max(coef) and coef[5] > 2
    part = {"X": X, "y": y, "owner": np.arange(400) // 4, "positive_pairs": int(y.sum()), "turns": 100}
    s = cable_fit.score([part], PairWeights(tuple(coef), icpt, 0.5), max_links=1)
    assert s["precision"] > 0.8 and s["links_per_turn"] <= 1.0


def test_link_command_runs_without_the_model_layer(tmp_path: Path) -> None:
    """`localmem link` in a real subprocess, with llama_cpp made unimportable."""
    import json
    import os
    import subprocess
    import sys

    blocker = tmp_path / "block" / "llama_cpp"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('llama_cpp is not installed')\n")
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join([str(blocker.parent), env.get("PYTHONPATH", "")])
    sample = Path(__file__).resolve().parents[2] / "localmem" / "data" / "sample_conversation.jsonl"
    db = str(tmp_path / "m.db")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "localmem", "--db", db, *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, check=True)

    cli("ingest", str(sample))
    first = json.loads(cli("link", "--json").stdout)
    assert first["model"] == MODEL_ID and first["turns"] > 0
    assert json.loads(cli("link", "--json").stdout)["turns"] == 0
