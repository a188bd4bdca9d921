"""``localmem bench shortlist``: how much of the exact top-k the dense lists keep, on a real store.

The two dense candidate lists of a query (turn cosine, statement-cue cosine) come from a
Hamming shortlist of the binary codes, rescored with exact vectors
(``VectorMirror.nearest``). Above ``HELD_ROWS`` rows a table's exact vectors are read from the
file, so fewer rows are rescored. This bench asks each query through ``nearest`` and
through brute force over every vector the list may return (all turns; the statement cues),
and reports recall@k of the exact top-k (the share of the k rows returned that are at least
as similar as the exact k-th best, so ties count once) and how often a query lost any of it. Queries: the questions of a LongMemEval JSON (``--data``), embedded by
the store's embedder. Read-only.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from localmem.bench.metrics import read_benchmark
from localmem.models.embedding import Embedder
from localmem.storage.vectors.table_mirror import HELD_ROWS, VectorMirror
from localmem.storage.write.store import Store

CHUNK = 20_000


def _exact_top(conn: Any, mirror: VectorMirror, allowed: np.ndarray, qvecs: np.ndarray, k: int) -> list[float]:
    """Per query, the cosine of its exact k-th best row among ``allowed`` positions: a returned
    row at least that similar is one of an exact top-k (ties make the set itself ambiguous)."""
    best: list[list[tuple[float, int]]] = [[] for _ in range(len(qvecs))]
    for start in range(0, len(allowed), CHUNK):
        pos = allowed[start : start + CHUNK]
        sims = mirror.vectors(conn, pos) @ qvecs.T  # rows x queries
        for q in range(len(qvecs)):
            top = np.argsort(-sims[:, q], kind="stable")[:k]
            best[q] = sorted(best[q] + [(float(sims[i, q]), int(pos[i])) for i in top], reverse=True)[:k]
    return [b[-1][0] if len(b) >= k else -1.0 for b in best]


def run(
    db: Path, data: Path, embedder: Embedder, *, ks: tuple[int, ...] = (10, 30), limit: int | None = None
) -> dict[str, Any]:
    items = read_benchmark(data, "LongMemEval")
    questions = [str(it["question"]) for it in items][:limit]
    store = Store(db, embedder=embedder)
    try:
        qvecs = np.asarray(store.embedder.embed(questions), dtype=np.float32)
        out: dict[str, Any] = {"store": str(db), "queries": len(questions), "lists": []}
        with store.snapshot():
            view = store.mirrors()
            for name, mirror, allowed in (
                ("turn cosine", view.turn, np.arange(len(view.turn.ids))),
                ("statement-cue cosine", view.cue, np.flatnonzero(view.cue.statement)),
            ):
                ok = np.zeros(len(mirror.ids), dtype=bool)
                ok[allowed] = True
                for k in ks:
                    t0 = time.perf_counter()
                    exact = _exact_top(store.conn, mirror, allowed, qvecs, k)
                    recalls, seconds = [], []
                    for q, qvec in enumerate(qvecs):
                        t1 = time.perf_counter()
                        _, sims = mirror.nearest(store.conn, qvec, k, ok)
                        seconds.append(time.perf_counter() - t1)
                        recalls.append(int(np.sum(sims >= exact[q] - 1e-5)) / min(k, len(allowed)))
                    out["lists"].append(
                        {
                            "list": name,
                            "rows": len(allowed),
                            "vectors_from": "memory" if mirror.held is not None else "file",
                            "k": k,
                            "recall_mean": round(100 * statistics.fmean(recalls), 1),
                            "recall_min": round(100 * min(recalls), 1),
                            "queries_losing_any": sum(1 for r in recalls if r < 1),
                            "nearest_ms_p50": round(1000 * statistics.median(seconds), 1),
                            "exact_s": round(time.perf_counter() - t0, 1),
                        }
                    )
        out["held_rows_limit"] = HELD_ROWS
        return out
    finally:
        store.close()


def print_report(result: dict[str, Any]) -> None:
    print(f"dense-list recall of the exact top-k, {result['queries']} queries, {result['store']}")
    print("list                   rows      vectors  k    recall mean  recall min  queries losing any  nearest ms p50")
    for r in result["lists"]:
        print(
            f"{r['list']:<21}  {r['rows']:>8}  {r['vectors_from']:<7}  {r['k']:<3}  {r['recall_mean']:>11}  "
            f"{r['recall_min']:>10}  {r['queries_losing_any']:>18}  {r['nearest_ms_p50']:>14}"
        )
