"""``localmem bench cable-fit``: fit and validate the model-free antecedent verifier.

On each LoCoMo conversation's store (``bench locomo``'s, kept in ``workdir``), the
construction of ``enrichment/pairverify.py`` runs for every turn; each candidate (m_i, m_j)
is labelled positive when both turns are evidence of the same multi-hop question. A
logistic regression (L2, Newton steps) is fitted on all conversations and, for validation,
leave-one-conversation-out. Reported: precision / recall of the accepted links at the
threshold, the share of positive pairs the searches reach at all (the verifier's ceiling),
and links per turn. With ``link_dir`` the accepted links are written into copies of the
stores (through the door), so ``bench locomo --workdir link_dir`` measures expansion.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from localmem.bench.locomo import open_conversation_store
from localmem.bench.metrics import clean_evidence, read_benchmark
from localmem.config import Settings
from localmem.enrichment import pairverify
from localmem.enrichment.pairverify import PAIR_FEATURES, PairWeights
from localmem.models.embedding import Embedder
from localmem.storage.bench.reads import source_ids
from localmem.storage.write.store import Store


def positives(sample: dict[str, Any]) -> set[frozenset[str]]:
    """Unordered pairs of evidence ids of the same multi-hop (category 1) question."""
    out: set[frozenset[str]] = set()
    for qa in sample.get("qa", []):
        if qa.get("category") != 1:
            continue
        ev, _bad = clean_evidence(qa.get("evidence") or [])
        out |= {frozenset((a, b)) for a in ev for b in ev if a != b}
    return out


def collect(store: Store, pos: set[frozenset[str]], subtraction: bool) -> dict[str, Any]:
    """Features, labels and owning turn of every candidate of every turn's construction."""
    voc = pairverify.vocabulary(store)
    src = source_ids(store.conn)
    feats, labels, owner, cand = [], [], [], []
    turns = skipped = 0
    for tid in sorted(voc.turns):
        out = pairverify.construct(store, voc, tid, subtraction=subtraction)
        turns += 1
        skipped += bool(out.skipped)
        for j, row in zip(out.candidates, out.feats, strict=True):
            feats.append(row)
            labels.append(frozenset((src.get(tid), src.get(j))) in pos)
            owner.append(tid)
            cand.append(j)
    ids = {i for i, s in src.items() if s}
    # positive pairs whose two turns are in the store: the verifier's denominator
    by_src = {s: i for i, s in src.items() if s}
    reachable = sum(all(x in by_src for x in p) for p in pos)
    return {
        "X": np.array(feats, dtype=np.float64).reshape(-1, len(PAIR_FEATURES)),
        "y": np.array(labels, dtype=bool),
        "owner": np.array(owner, dtype=np.int64),
        "cand": np.array(cand, dtype=np.int64),
        "turns": turns,
        "skipped": skipped,
        "positive_pairs": reachable,
        "stored": len(ids),
    }


def fit_logistic(X: np.ndarray, y: np.ndarray, l2: float = 1.0, pos_weight: float = 1.0) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by Newton steps (intercept not penalised)."""
    A = np.hstack([X, np.ones((len(X), 1))])
    w = np.zeros(A.shape[1])
    sw = np.where(y, pos_weight, 1.0)
    reg = np.full(A.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(A @ w)))
        g = A.T @ (sw * (p - y)) + reg * w
        H = (A * (sw * p * (1 - p))[:, None]).T @ A + np.diag(reg) + 1e-9 * np.eye(A.shape[1])
        step = np.linalg.solve(H, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1])


def score(parts: list[dict[str, Any]], w: PairWeights, max_links: int) -> dict[str, float]:
    """Precision / recall of the accepted links (at most ``max_links`` per turn) of ``parts``."""
    tp = acc = npos = turns = 0
    for part in parts:
        prob = w.probability(part["X"])
        keep = np.zeros(len(prob), dtype=bool)
        for tid in np.unique(part["owner"]):
            idx = np.flatnonzero(part["owner"] == tid)
            idx = idx[np.argsort(-prob[idx], kind="stable")][:max_links]
            keep[idx[prob[idx] >= w.threshold]] = True
        tp += int((keep & part["y"]).sum())
        acc += int(keep.sum())
        npos += part["positive_pairs"]
        turns += part["turns"]
    return {
        "precision": round(tp / acc, 3) if acc else 0.0,
        "recall": round(tp / npos, 3) if npos else 0.0,
        "links_per_turn": round(acc / turns, 3) if turns else 0.0,
        "accepted": acc,
        "true_links": tp,
    }


def run(
    data: Path,
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    threshold: float = 0.5,
    max_links: int = 3,
    l2: float = 1.0,
    subtraction: bool = True,
    link_dir: Path | None = None,
    weights: PairWeights | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    samples = read_benchmark(data, "LoCoMo")
    parts = []
    for sample in samples:
        sid = str(sample["sample_id"])
        log(f"conversation {sid}: construction")
        store = open_conversation_store(workdir, sid, data, embedder, settings)
        try:
            part = collect(store, positives(sample), subtraction)
        finally:
            store.close()
        part["sample"] = sid
        parts.append(part)
    X = np.vstack([p["X"] for p in parts])
    y = np.concatenate([p["y"] for p in parts])
    coef, icpt = fit_logistic(X, y, l2)
    fitted = PairWeights(tuple(round(float(c), 3) for c in coef), round(icpt, 3), threshold)
    loco = []
    for k, held in enumerate(parts):
        rest = [p for i, p in enumerate(parts) if i != k]
        c, b = fit_logistic(np.vstack([p["X"] for p in rest]), np.concatenate([p["y"] for p in rest]), l2)
        loco.append((held, PairWeights(tuple(c), b, threshold)))
    tp = fp = acc = 0
    for held, w in loco:
        s = score([held], w, max_links)
        tp += int(s["true_links"])
        acc += int(s["accepted"])
        fp += int(s["accepted"] - s["true_links"])
    npos = sum(p["positive_pairs"] for p in parts)
    turns = sum(p["turns"] for p in parts)
    reached = int(y.sum())
    result: dict[str, Any] = {
        "benchmark": "cable-fit",
        "features": list(PAIR_FEATURES),
        "weights": {"coef": list(fitted.coef), "intercept": fitted.intercept, "threshold": threshold},
        "candidates": len(y),
        "candidate_positives": reached,
        "positive_pairs": npos,
        "reach": round(reached / npos, 3) if npos else 0.0,
        "candidates_per_turn": round(len(y) / turns, 2) if turns else 0.0,
        "in_sample": score(parts, fitted, max_links),
        "loco": {
            "precision": round(tp / acc, 3) if acc else 0.0,
            "recall": round(tp / npos, 3) if npos else 0.0,
            "links_per_turn": round(acc / turns, 3) if turns else 0.0,
            "accepted": acc,
            "true_links": tp,
        },
    }
    if link_dir is not None:
        use = weights if weights is not None else fitted
        result["written"] = write_links(parts, workdir, link_dir, use, max_links, subtraction, embedder, settings)
    return result


def write_links(
    parts: list[dict[str, Any]],
    workdir: Path,
    link_dir: Path,
    w: PairWeights,
    max_links: int,
    subtraction: bool,
    embedder: Embedder,
    settings: Settings,
) -> int:
    """Copy each store to ``link_dir`` and link it with ``pairverify.link_store``."""
    link_dir.mkdir(parents=True, exist_ok=True)
    total = 0
    for part in parts:
        name = f"locomo-{part['sample']}.db"
        shutil.copyfile(workdir / name, link_dir / name)
        store = Store(link_dir / name, embedder=embedder, settings=settings)
        try:
            total += pairverify.link_store(store, w, max_links, subtraction)["links"]
        finally:
            store.close()
    return total


def table(r: dict[str, Any]) -> str:
    i, lo = r["in_sample"], r["loco"]
    return "\n".join(
        [
            f"pair verifier ({', '.join(r['features'])}): {r['candidates']} candidates "
            f"({r['candidates_per_turn']} per turn), {r['candidate_positives']} of {r['positive_pairs']} "
            f"multi-hop evidence pairs reached by the searches ({100 * r['reach']:.1f}%)",
            f"in-sample: precision {i['precision']}, recall {i['recall']}, links per turn {i['links_per_turn']}",
            f"leave-one-conversation-out: precision {lo['precision']}, recall {lo['recall']}, "
            f"links per turn {lo['links_per_turn']}",
            f"weights: coef {r['weights']['coef']}, intercept {r['weights']['intercept']}",
        ]
        + ([f"links written: {r['written']}"] if "written" in r else [])
    )
