"""``localmem bench fit``: refit the CuePack scorer and measure it honestly.

For every LoCoMo question (categories 1-4 with evidence) and, with ``--lme``, every
LongMemEval question (its haystack's ``has_answer`` turns, asked ``as_of`` its question
date) the candidate pool and its features are computed once; a pool turn is labelled
positive when it is an evidence turn. The scorer is an L2-regularised logistic regression (penalty 0.5·|w|², data term
weighted by C; the intercept is not penalised), each row weighted 1 / (evidence turns in
its question's pool) so every question counts once, as in the metric.

Folds: each LoCoMo conversation is one; LongMemEval questions fall in six folds by
their place in the file (index mod 6: the file lists ten questions per type in a row,
so every fold holds ten questions and every type). The two data sets weigh the same in
the fit (LongMemEval rows are scaled by LoCoMo questions / LongMemEval questions).

Reported, per data set: recall with the shipped weights, recall held out (each fold
scored by weights fitted on every other fold of both data sets: the figure to expect on
unseen conversations), and in-sample with the weights fitted on everything (what
``scorer.Weights`` ships).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from localmem.bench import lme_merged
from localmem.bench import longmemeval as longmemeval_bench
from localmem.bench.locomo import CATEGORIES, open_conversation_store
from localmem.bench.metrics import Tally, clean_evidence, found_fraction, read_benchmark
from localmem.config import Settings
from localmem.errors import InputError
from localmem.models import registry
from localmem.models.embedding import Embedder
from localmem.retrieval import scorer_file
from localmem.retrieval.pool import Pool, candidate_pool
from localmem.retrieval.reconstruct import assemble
from localmem.retrieval.scorer import DEFAULT_WEIGHTS, FEATURES, Weights
from localmem.storage.bench import reads
from localmem.storage.reads import queries
from localmem.storage.reads.queries import Filter
from localmem.storage.write.store import Store

LME_FOLDS = 6


@dataclass
class _Question:
    fold: tuple[str, int]  # ("locomo", conversation) or ("longmemeval", index mod 6)
    store: int
    text: str
    category: str
    evidence: list[str]
    pool: Pool
    labels: np.ndarray
    weight: float = 1.0
    dataset: str = ""  # the table it is reported in; "" = fold[0]

    @property
    def table(self) -> str:
        return self.dataset or self.fold[0]


def fit_logistic(
    x: np.ndarray,
    y: np.ndarray,
    sample_weight: np.ndarray,
    c: float = 1.0,
    iters: int = 100,
    offset: np.ndarray | None = None,
    intercept: bool = True,
) -> Weights:
    """Newton's method on 0.5·|w|² + C·Σ sw·logloss (intercept unpenalised), the logit
    being ``offset + x·w (+ b)``; without ``intercept`` b stays 0."""
    n, d = x.shape
    xa = np.hstack([x, np.ones((n, 1))]) if intercept else x
    k = xa.shape[1]
    off = np.zeros(n) if offset is None else offset
    w = np.zeros(k)
    reg = np.eye(k)
    if intercept:
        reg[d, d] = 0.0

    def objective(v: np.ndarray) -> float:
        z = off + xa @ v
        return float(0.5 * v @ reg @ v + c * sample_weight @ (np.logaddexp(0.0, z) - y * z))

    now = objective(w)
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(off + xa @ w)))
        grad = reg @ w + c * xa.T @ (sample_weight * (p - y))
        hess = reg + c * (xa * (sample_weight * p * (1 - p))[:, None]).T @ xa
        step = np.linalg.solve(hess + 1e-9 * np.eye(k), grad)
        # Damped Newton: a full step can overshoot far from the optimum (an offset logit
        # with free features the data barely constrains) and diverge; halve it until
        # the objective does not rise.
        t, trial = 1.0, objective(w - step)
        while t > 1e-6 and trial > now:
            t /= 2
            trial = objective(w - t * step)
        w -= t * step
        now = trial  # the objective at the new w
        if np.max(np.abs(t * step)) < 1e-8:
            break
    return Weights(coef=tuple(float(v) for v in w[:d]), intercept=float(w[d]) if intercept else 0.0)


def _fit(questions: Sequence[_Question], free: np.ndarray | None = None, base: Weights = DEFAULT_WEIGHTS) -> Weights:
    """Weights fitted on ``questions``. With ``free`` (a 0/1 mask over the features)
    only those features are fitted, on top of ``base``: every other weight and the
    intercept stay ``base``'s, so where the free features are 0 the scores are base's."""
    xs, ys, sws = [], [], []
    for q in questions:
        pos = q.labels.sum()
        xs.append(q.pool.feats)
        ys.append(q.labels)
        sws.append(np.full(len(q.labels), q.weight / pos if pos else 0.0))
    x, y, sw = np.vstack(xs), np.concatenate(ys), np.concatenate(sws)
    if free is None:
        return fit_logistic(x, y, sw)
    fixed = np.asarray(base.coef) * (1 - free)
    resid = fit_logistic(x * free, y, sw, offset=x @ fixed + base.intercept, intercept=False)
    return Weights(coef=tuple(float(v) for v in fixed + np.asarray(resid.coef) * free), intercept=base.intercept)


def _locomo_questions(
    data: Path, workdir: Path, embedder: Embedder, settings: Settings, limit: int | None, log: Callable[[str], None]
) -> tuple[list[Store], list[_Question], list[str]]:
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
            by_turn: dict[int, str | None] = reads.source_ids(store.conn)
            for qa in sample.get("qa", []):
                cat = qa.get("category")
                ev, _bad = clean_evidence(qa.get("evidence") or [])
                if cat not in CATEGORIES or not ev:
                    continue
                pool = candidate_pool(store, qa["question"], Filter())
                if pool is None:
                    continue
                labels = np.array([1.0 if by_turn.get(int(t)) in ev else 0.0 for t in pool.turn_ids])
                questions.append(_Question(("locomo", ci), ci, qa["question"], CATEGORIES[cat], ev, pool, labels))
    except BaseException:
        for s in stores:
            s.close()
        raise
    return stores, questions, [str(s["sample_id"]) for s in samples]


def _lme_question(
    store: Store, store_index: int, idx: int, item: dict[str, Any], evidence: list[str], dataset: str = ""
) -> _Question | None:
    """LongMemEval item ``idx`` asked of ``store`` as of its date (fold: ``idx`` mod 6);
    None when the store shows it nothing."""
    pool = candidate_pool(store, item["question"], Filter(as_of=longmemeval_bench.question_as_of(item)))
    if pool is None:
        return None
    rows = queries.turn_rows(store.conn, [int(t) for t in pool.turn_ids])
    labels = np.array([1.0 if rows[int(t)].source_id in evidence else 0.0 for t in pool.turn_ids])
    fold = ("longmemeval", idx % LME_FOLDS)
    return _Question(
        fold, store_index, item["question"], str(item["question_type"]), evidence, pool, labels, dataset=dataset
    )


def _lme_questions(
    data: Path,
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    built_only: bool,
    first_store: int,
    log: Callable[[str], None],
    dataset: str = "",
    limit: int | None = None,
) -> tuple[list[Store], list[_Question]]:
    """LongMemEval questions (their stores ``lme-<question_id>.db`` under ``workdir``,
    built when missing unless ``built_only``; the first ``limit`` with evidence)."""
    stores: list[Store] = []
    questions: list[_Question] = []
    try:
        for idx, item in enumerate(read_benchmark(data, "LongMemEval")):
            if limit is not None and len(stores) >= limit:
                break
            qid = str(item["question_id"])
            path = workdir / f"lme-{qid}.db"
            if built_only and not longmemeval_bench.is_built(path, item):
                continue
            evidence = longmemeval_bench.evidence_of(item)
            if not evidence:
                continue
            log(f"question {qid}: pool")
            store = longmemeval_bench.open_question_store(path, data, qid, embedder, settings)
            stores.append(store)
            q = _lme_question(store, first_store + len(stores) - 1, idx, item, evidence, dataset)
            if q is not None:
                questions.append(q)
    except BaseException:
        for s in stores:
            s.close()
        raise
    return stores, questions


def _merged_questions(
    data: Path, workdir: Path, embedder: Embedder, settings: Settings, first_store: int, log: Callable[[str], None]
) -> tuple[list[Store], list[_Question]]:
    """The same LongMemEval questions asked of ONE store of every haystack
    (``bench longmemeval --merged``'s, built into ``workdir`` when missing). A question
    keeps its per-haystack fold, so held-out weights never saw it in either shape."""
    store, _record = lme_merged.open_merged_store(workdir, data, embedder, settings, log)
    questions: list[_Question] = []
    try:
        for idx, item in enumerate(read_benchmark(data, "LongMemEval")):
            evidence = longmemeval_bench.evidence_of(item)
            if not evidence:
                continue
            q = _lme_question(store, first_store, idx, item, evidence, "longmemeval-merged")
            if q is not None:
                questions.append(q)
        log(f"merged store: {len(questions)} pools")
    except BaseException:
        store.close()
        raise
    return [store], questions


def evaluate(
    stores: Sequence[Store],
    questions: Sequence[_Question],
    budgets: Sequence[int],
    free: np.ndarray | None = None,
    shipped: Weights = DEFAULT_WEIGHTS,
) -> tuple[dict[tuple[str, str, int], Tally], Weights, dict[tuple[str, int], Weights]]:
    """Tallies per (data set, weights, budget) for shipped / held-out / in-sample weights
    (``free``: see ``_fit``, on top of ``shipped``)."""
    folds = {f: _fit([q for q in questions if q.fold != f], free, shipped) for f in sorted({q.fold for q in questions})}
    full = _fit(questions, free, shipped)
    tallies: dict[tuple[str, str, int], Tally] = {}
    for q in questions:
        for name, w in (("shipped", shipped), ("held-out", folds[q.fold]), ("in-sample", full)):
            prob = w.probability(q.pool.feats)
            for b in budgets:
                ctx = assemble(stores[q.store], q.text, q.pool, prob, b)
                tallies.setdefault((q.table, name, b), Tally()).add(q.category, found_fraction(ctx, q.evidence))
    return tallies, full, folds


def run(
    data: Path,
    budgets: Sequence[int],
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    limit: int | None = None,
    log: Callable[[str], None] = lambda _m: None,
    lme: Path | None = None,
    lme_workdir: Path | None = None,
    lme_built_only: bool = False,
    free: Sequence[str] | None = None,
    merged_workdir: Path | None = None,
    lme_train: Path | None = None,
    lme_train_workdir: Path | None = None,
    lme_train_limit: int | None = None,
    write_scorer: bool = False,
) -> dict[str, Any]:
    """``free``: fit only these features on top of the shipped weights (see ``_fit``);
    None refits every weight. ``merged_workdir``: also the ``lme`` questions asked of
    the merged store there. ``lme_train``: a second LongMemEval file (say train289)
    asked per haystack, reported as ``longmemeval-train``; its questions take folds by
    index mod 6 as well. Every data set weighs as much as LoCoMo in the fit.
    "shipped" is what a read with ``embedder`` scores with (its folder's scorer file, else
    the built-in weights); ``write_scorer``: write the weights fitted on all folds into
    the embedder folder's scorer file (``retrieval/scorer_file``)."""
    shipped = scorer_file.weights_for(embedder)
    target = scorer_file.scorer_path(embedder) if write_scorer else None
    if write_scorer and target is None:
        raise InputError("--write-scorer writes into the embedder's folder: give --embedder FOLDER (an ONNX folder)")
    if target is not None and write_scorer and target.parent.resolve() == registry.TRAINED_FOLDER:
        # the packaged default's weights are part of the release: a fit never rewrites them in place
        raise InputError(
            f"--write-scorer would rewrite the packaged embedder's weights ({target}): copy the folder "
            "(cp -r) and give --embedder COPY"
        )
    unknown = [f for f in free or () if f not in FEATURES]
    if unknown:
        raise InputError(f"unknown feature(s) {', '.join(unknown)}; known: {', '.join(FEATURES)}")
    mask = None if free is None else np.array([1.0 if f in free else 0.0 for f in FEATURES])
    stores, questions, names = _locomo_questions(data, workdir, embedder, settings, limit, log)
    try:
        sets: list[list[_Question]] = []
        if lme is not None:
            more, lq = _lme_questions(lme, lme_workdir or workdir, embedder, settings, lme_built_only, len(stores), log)
            stores += more
            sets.append(lq)
            if merged_workdir is not None:
                more, mq = _merged_questions(lme, merged_workdir, embedder, settings, len(stores), log)
                stores += more
                sets.append(mq)
        if lme_train is not None:
            where = lme_train_workdir or workdir
            more, tq = _lme_questions(
                lme_train,
                where,
                embedder,
                settings,
                lme_built_only,
                len(stores),
                log,
                "longmemeval-train",
                lme_train_limit,
            )
            stores += more
            sets.append(tq)
        n_locomo = len(questions)
        for qs in sets:
            for q in qs:
                q.weight = n_locomo / len(qs)
            questions += qs
        tallies, full, folds = evaluate(stores, questions, budgets, mask, shipped)
    finally:
        for s in stores:
            s.close()
    order = ["shipped", "held-out", "in-sample"]
    by_ds: dict[str, list[dict[str, Any]]] = {}
    for (ds, name, b), t in sorted(tallies.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]), kv[0][2])):
        groups = [g for g in sorted(t.counts) if g != "all"] + ["all"]
        row = {"weights": name, "budget": b, **{g: round(100 * t.mean(g), 1) for g in groups}}
        row["all_found"] = round(100 * t.all_found("all"), 1)
        by_ds.setdefault(ds, []).append(row)
    result = {
        "benchmark": "fit",
        "questions": {ds: sum(1 for q in questions if q.table == ds) for ds in by_ds},
        "features": list(FEATURES),
        "fitted_weights": {"coef": [round(c, 3) for c in full.coef], "intercept": round(full.intercept, 3)},
        "fold_weights": {
            (names[f[1]] if f[0] == "locomo" else f"lme-fold-{f[1]}"): [round(c, 2) for c in w.coef]
            for f, w in folds.items()
        },
        "rows": by_ds,
    }
    if target is not None:
        scorer_file.write_weights(
            target, full, embedder.model_id, _provenance(result, [data, lme, merged_workdir, lme_train])
        )
        result["scorer_file"] = str(target)
    return result


def _provenance(result: dict[str, Any], inputs: Sequence[Path | None]) -> dict[str, Any]:
    """What a scorer file records about its fit: the inputs, the questions per data set
    and the held-out recall ("all") per budget, the figures to expect on unseen data."""
    held = {
        ds: {str(r["budget"]): r["all"] for r in rows if r["weights"] == "held-out"}
        for ds, rows in result["rows"].items()
    }
    return {
        "by": "localmem bench fit --write-scorer",
        "inputs": [str(p) for p in inputs if p is not None],
        "questions": result["questions"],
        "held_out_recall": held,
    }


def table(result: dict[str, Any]) -> str:
    lines = []
    for ds, rows in result["rows"].items():
        cols = ["weights", "budget", *[k for k in rows[0] if k not in ("weights", "budget")]]
        short = {c: c.replace("single-session-", "ss-").replace("temporal-reasoning", "temporal") for c in cols}
        lines += [
            f"CuePack scorer: {ds} evidence recall (%), {result['questions'][ds]} questions; "
            "held-out = each fold scored by weights fitted on the other folds",
            " | ".join(f"{short[c]:>11}" for c in cols),
            "-" * (14 * len(cols)),
        ]
        lines += [" | ".join(f"{r.get(c, '')!s:>11}" for c in cols) for r in rows]
        lines.append("")
    fw = result["fitted_weights"]
    lines.append(
        "fitted on all: "
        + ", ".join(f"{n} {c}" for n, c in zip(result["features"], fw["coef"], strict=True))
        + f", intercept {fw['intercept']}"
    )
    if "scorer_file" in result:
        lines.append(f"written to {result['scorer_file']} (every read with this embedder scores with them)")
    return "\n".join(lines)
