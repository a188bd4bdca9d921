"""``localmem bench locomo``: evidence recall per category at token budgets.

Each LoCoMo conversation goes into its own store (the question is asked of its own
conversation only); stores are kept in ``workdir`` so a re-run only re-reads them.
Category 5 (adversarial) is excluded; questions with no usable evidence are counted
and skipped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from localmem.answering.explore import explore
from localmem.bench.metrics import METHODS, Tally, clean_evidence, found_fraction, read_benchmark
from localmem.bench.preamble import store_with
from localmem.config import Settings
from localmem.enrichment.antecedent import cable_totals, per_turn
from localmem.ingest import locomo
from localmem.models.embedding import Embedder
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.bench.reads import count_edges
from localmem.storage.write.store import Store
from localmem.toolkit import turn_refs

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def open_conversation_store(
    workdir: Path, sample_id: str, data: Path, embedder: Embedder, settings: Settings, sessions: int | None = None
) -> Store:
    """The conversation's store (its first ``sessions`` sessions only, when given)."""
    name = f"locomo-{sample_id}.db" if sessions is None else f"locomo-{sample_id}-s{sessions}.db"
    parsed = list(locomo.parse(data, sample=sample_id))
    return store_with(workdir / name, embedder, settings, parsed[:sessions] if sessions is not None else parsed)


def within_sessions(evidence: Sequence[str], sessions: int | None) -> bool:
    """True when every evidence id (``D3:5``: session 3) is among the first ``sessions``."""
    if sessions is None:
        return True
    for e in evidence:
        head = e.split(":", 1)[0].lstrip("D")
        if not head.isdigit() or int(head) > sessions:
            return False
    return True


def run(
    data: Path,
    budgets: Sequence[int],
    methods: Sequence[str],
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    limit: int | None = None,
    log: Callable[[str], None] = lambda _m: None,
    sessions: int | None = None,
) -> dict[str, Any]:
    samples = read_benchmark(data, "LoCoMo")
    tallies = {(m, b): Tally() for m in methods for b in budgets}
    skipped = malformed = asked = 0
    timings: dict[str, float] = {m: 0.0 for m in methods}
    added = {m: [0, 0] for m in methods}  # antecedent turns put in context, of them evidence
    built: list[dict[str, Any]] = []
    for sample in samples[:limit] if limit else samples:
        sid = str(sample["sample_id"])
        log(f"conversation {sid}: ingest")
        store = open_conversation_store(workdir, sid, data, embedder, settings, sessions)
        try:
            for qa in sample.get("qa", []):
                cat = qa.get("category")
                if cat not in CATEGORIES:
                    continue
                ev, bad = clean_evidence(qa.get("evidence") or [])
                malformed += bad
                if not ev:
                    skipped += 1
                    continue
                if not within_sessions(ev, sessions):
                    continue
                asked += 1
                for m in methods:
                    for b in budgets:
                        t0 = time.perf_counter()
                        ctx = METHODS[m](store, qa["question"], b, None)
                        timings[m] += time.perf_counter() - t0
                        if ctx.tokens > b:
                            raise AssertionError(f"{m} exceeded the budget: {ctx.tokens} > {b}")
                        tallies[(m, b)].add(CATEGORIES[cat], found_fraction(ctx, ev))
                        extra = [t for t in ctx.turns if t.reason == "antecedent"]
                        added[m][0] += len(extra)
                        added[m][1] += sum(t.source_id in ev for t in extra)
            edges = count_edges(store.conn, "antecedent")
            built.append({"sample": sid, "turns": store.stats()["turns"], "edges": edges, **cable_totals(store)})
        finally:
            store.close()
        log(f"conversation {sid}: {asked} questions so far")
    groups = [*CATEGORIES.values(), "all"]
    rows = []
    for m in methods:
        for b in budgets:
            t = tallies[(m, b)]
            rows.append(
                {
                    "method": m,
                    "budget": b,
                    **{g: round(100 * t.mean(g), 1) for g in groups},
                    "all_found": round(100 * t.all_found("all"), 1),
                }
            )
    return {
        "benchmark": "locomo",
        "data": str(data),
        "questions": asked,
        "sessions": sessions,
        "skipped_no_evidence": skipped,
        "malformed_evidence_entries": malformed,
        "embedder": embedder.model_id,
        "ms_per_query": {m: round(1000 * timings[m] / max(1, asked * len(budgets)), 2) for m in methods},
        "rows": rows,
        "antecedent_turns_added": {m: {"turns": a, "evidence": e} for m, (a, e) in added.items() if a},
        "cable": _cable_summary(built),
    }


def _cable_summary(built: list[dict[str, Any]]) -> dict[str, Any]:
    """CABLE's construction over the conversations: per processed turn, edges,
    candidates and model calls (conversations without antecedent runs are left out)."""
    done = [b for b in built if b["runs"]]
    if not done:
        return {}
    totals = {k: sum(int(b[k]) for b in done) for k in done[0] if k not in ("sample", "turns")}
    return {"conversations": len(done), "turns_processed": totals["runs"], "edges": totals["edges"], **per_turn(totals)}


def table(result: dict[str, Any]) -> str:
    cols = ["method", "budget", *CATEGORIES.values(), "all", "all_found"]
    lines = [
        f"LoCoMo evidence recall (mean fraction of evidence turns in context, %), {result['questions']} questions, "
        f"{result['skipped_no_evidence']} without usable evidence skipped"
        + (f", first {result['sessions']} sessions of each conversation" if result.get("sessions") else ""),
        " | ".join(f"{c:>11}" for c in cols),
        "-" * (14 * len(cols)),
    ]
    for r in result["rows"]:
        lines.append(" | ".join(f"{r[c]!s:>11}" for c in cols))
    lines.append("ms per query: " + ", ".join(f"{k} {v}" for k, v in result["ms_per_query"].items()))
    for m, a in result.get("antecedent_turns_added", {}).items():
        n = result["questions"] * sum(r["method"] == m for r in result["rows"])
        lines.append(
            f"{m}: {a['turns']} antecedent turns added over {n} contexts, {a['evidence']} of them evidence turns"
        )
    c = result.get("cable") or {}
    if c:
        lines.append(
            f"CABLE construction ({c['conversations']} conversations, {c['turns_processed']} turns): "
            f"{c['edges']} edges, per turn {c['edges_per_turn']} edges, {c['candidates_per_turn']} candidates, "
            f"{c['calls_per_turn']} model calls, {c['prompt_tokens_per_turn']} prompt tokens; "
            f"acceptance {100 * c['acceptance_rate']:.1f}%"
        )
    return "\n".join(lines)


def run_explore(
    data: Path,
    gen: Any,
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    limit: int | None = None,
    questions: int | None = None,
    budget: int = 2000,
    max_rounds: int = 8,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """``--mode explore``: per question, the evidence recall of the turns the model
    explored and of its supports, rounds, calls and tokens, beside reconstruct's recall
    at ``budget`` on the same questions."""
    samples = read_benchmark(data, "LoCoMo")
    rows: list[dict[str, Any]] = []
    for sample in samples[:limit] if limit else samples:
        sid = str(sample["sample_id"])
        store = open_conversation_store(workdir, sid, data, embedder, settings)
        try:
            for qa in sample.get("qa", []):
                if questions is not None and len(rows) >= questions:
                    break
                ev, _bad = clean_evidence(qa.get("evidence") or [])
                if qa.get("category") not in CATEGORIES or not ev:
                    continue
                t0 = time.perf_counter()
                res = explore(store, gen, qa["question"], max_rounds=max_rounds)
                secs = time.perf_counter() - t0
                src = {t: r.source_id for t, r in turn_refs(store, res.evidence).items()}
                seen = {src.get(t) for t in res.evidence}
                sup = {src.get(t) for t in res.support}
                ctx = reconstruct(store, qa["question"], budget)
                rows.append(
                    {
                        "question": qa["question"],
                        "category": CATEGORIES[qa["category"]],
                        "explored_recall": sum(e in seen for e in ev) / len(ev),
                        "support_recall": sum(e in sup for e in ev) / len(ev),
                        "reconstruct_recall": found_fraction(ctx, ev),
                        "explored_turns": len(res.evidence),
                        "rounds": res.model_rounds,
                        "calls": res.calls,
                        "tokens": res.prompt_tokens + res.generated_tokens,
                        "stop": res.stop_reason,
                        "seconds": round(secs, 1),
                        "answer": res.answer,
                        "gold": str(qa.get("answer", "")),
                    }
                )
                log(f"{sid} q{len(rows)}: {rows[-1]['stop']}, {res.calls} calls, {secs:.1f}s")
        finally:
            store.close()
    n = max(1, len(rows))

    def mean(k: str) -> float:
        return round(sum(float(r[k]) for r in rows) / n, 3)

    keys = ("explored_recall", "support_recall", "reconstruct_recall", "explored_turns", "rounds", "calls", "tokens")
    return {
        "benchmark": "locomo-explore",
        "model": gen.model_id,
        "questions": len(rows),
        "reconstruct_budget": budget,
        "mean": {k: mean(k) for k in keys},
        "rows": rows,
    }


def explore_table(result: dict[str, Any]) -> str:
    m = result["mean"]
    return "\n".join(
        [
            f"LoCoMo explore, {result['questions']} questions, model {result['model']}",
            f"evidence recall: explored turns {100 * m['explored_recall']:.1f}%, supports "
            f"{100 * m['support_recall']:.1f}%, reconstruct@{result['reconstruct_budget']} "
            f"{100 * m['reconstruct_recall']:.1f}%",
            f"per question: {m['rounds']} rounds, {m['calls']} calls, {m['tokens']} tokens, "
            f"{m['explored_turns']} turns explored",
        ]
    )
