"""``localmem bench fit``: refit the CuePack scorer and measure it honestly.

For every LoCoMo question (categories 1-4 with evidence) the candidate pool and its
features are computed once; a pool turn is labelled positive when it is an evidence
turn. The scorer is an L2-regularised logistic regression (penalty 0.5·|w|², data term
weighted by C; the intercept is not penalised), each row weighted 1 / (evidence turns in
its question's pool) so every question counts once, as in the metric.

Reported: recall with the shipped weights, recall leave-one-conversation-out (each
conversation scored by weights fitted on the others: the figure to expect on unseen
conversations), and the weights fitted on everything (what ``scorer.Weights`` ships).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from localmem.bench.locomo import CATEGORIES, open_conversation_store
from localmem.bench.metrics import Tally, clean_evidence, found_fraction, read_benchmark
from localmem.config import Settings
from localmem.errors import InputError
from localmem.models.embedding import Embedder
from localmem.retrieval.pool import Pool, candidate_pool
from localmem.retrieval.reconstruct import assemble
from localmem.retrieval.scorer import DEFAULT_WEIGHTS, FEATURES, Weights
from localmem.storage.queries import Filter
from localmem.storage.store import Store


@dataclass
class _Question:
    conv: int
    text: str
    category: str
    evidence: list[str]
    pool: Pool
    labels: np.ndarray


def fit_logistic(x: np.ndarray, y: np.ndarray, sample_weight: np.ndarray, c: float = 1.0, iters: int = 100) -> Weights:
    """Newton's method on 0.5·|w|² + C·Σ sw·logloss (intercept unpenalised)."""
    n, d = x.shape
    xa = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    reg = np.eye(d + 1)
    reg[d, d] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(xa @ w)))
        grad = reg @ w + c * xa.T @ (sample_weight * (p - y))
        hess = reg + c * (xa * (sample_weight * p * (1 - p))[:, None]).T @ xa
        step = np.linalg.solve(hess + 1e-9 * np.eye(d + 1), grad)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return Weights(coef=tuple(float(v) for v in w[:d]), intercept=float(w[d]))


def _fit(questions: Sequence[_Question]) -> Weights:
    xs, ys, sws = [], [], []
    for q in questions:
        pos = q.labels.sum()
        xs.append(q.pool.feats)
        ys.append(q.labels)
        sws.append(np.full(len(q.labels), 1.0 / pos if pos else 0.0))
    return fit_logistic(np.vstack(xs), np.concatenate(ys), np.concatenate(sws))


def run(
    data: Path,
    budgets: Sequence[int],
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    limit: int | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    samples = read_benchmark(data, "LoCoMo")
    samples = samples[:limit] if limit else samples
    if len(samples) < 2:
        raise InputError("leave-one-conversation-out needs at least two conversations", path=str(data))
    stores: list[Store] = []
    questions: list[_Question] = []
    try:
        for ci, sample in enumerate(samples):
            sid = str(sample["sample_id"])
            log(f"conversation {sid}: pools")
            store = open_conversation_store(workdir, sid, data, embedder, settings)
            stores.append(store)
            by_turn: dict[int, str | None] = dict(store.conn.execute("SELECT id, source_id FROM turns").fetchall())
            for qa in sample.get("qa", []):
                cat = qa.get("category")
                ev, _bad = clean_evidence(qa.get("evidence") or [])
                if cat not in CATEGORIES or not ev:
                    continue
                pool = candidate_pool(store, qa["question"], Filter())
                if pool is None:
                    continue
                labels = np.array([1.0 if by_turn.get(int(t)) in ev else 0.0 for t in pool.turn_ids])
                questions.append(_Question(ci, qa["question"], CATEGORIES[cat], ev, pool, labels))
        folds = {ci: _fit([q for q in questions if q.conv != ci]) for ci in range(len(samples))}
        full = _fit(questions)
        tallies: dict[tuple[str, int], Tally] = {}
        for q in questions:
            for name, w in (("shipped", DEFAULT_WEIGHTS), ("held-out", folds[q.conv]), ("in-sample", full)):
                prob = w.probability(q.pool.feats)
                for b in budgets:
                    ctx = assemble(stores[q.conv], q.text, q.pool, prob, b)
                    tallies.setdefault((name, b), Tally()).add(q.category, found_fraction(ctx, q.evidence))
    finally:
        for s in stores:
            s.close()
    groups = [*CATEGORIES.values(), "all"]
    rows = [
        {
            "weights": name,
            "budget": b,
            **{g: round(100 * t.mean(g), 1) for g in groups},
            "all_found": round(100 * t.all_found("all"), 1),
        }
        for (name, b), t in sorted(
            tallies.items(), key=lambda kv: (["shipped", "held-out", "in-sample"].index(kv[0][0]), kv[0][1])
        )
    ]
    return {
        "benchmark": "fit",
        "questions": len(questions),
        "features": list(FEATURES),
        "fitted_weights": {"coef": [round(c, 3) for c in full.coef], "intercept": round(full.intercept, 3)},
        "fold_weights": {str(samples[ci]["sample_id"]): [round(c, 2) for c in w.coef] for ci, w in folds.items()},
        "rows": rows,
    }


def table(result: dict[str, Any]) -> str:
    cols = ["weights", "budget", *CATEGORIES.values(), "all", "all_found"]
    lines = [
        f"CuePack scorer: LoCoMo evidence recall (%), {result['questions']} questions; "
        "held-out = each conversation scored by weights fitted on the others",
        " | ".join(f"{c:>11}" for c in cols),
        "-" * (14 * len(cols)),
    ]
    lines += [" | ".join(f"{r[c]!s:>11}" for c in cols) for r in result["rows"]]
    fw = result["fitted_weights"]
    lines.append(
        "fitted on all: "
        + ", ".join(f"{n} {c}" for n, c in zip(result["features"], fw["coef"], strict=True))
        + f", intercept {fw['intercept']}"
    )
    return "\n".join(lines)
