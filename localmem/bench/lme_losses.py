"""``localmem bench longmemeval --merged --losses``: where each evidence turn that a
merged-store context misses was lost, per question type and budget (``bench locomo
--losses`` asks the same of each LoCoMo conversation: ``locomo_losses``).

Every missed evidence turn gets exactly one fate, checked in this order:
- ``date filter``: the turn is dated after the question's as-of time (invisible);
- ``not in pool``: none of the four ranked lists (``pool.LIST_NAMES``) held it in its
  top ``candidates``, and it was no neighbour of an anchor; its best list and rank there
  (searched ``depth`` deep) say how far it was;
- ``scored low``: in the pool, but the budget ran out before its place in the packing
  order; its rank by P(evidence) among the pool and its features say why;
- ``evicted``: packed, then CABLE replaced it with an antecedent turn;
- ``cut``: in the context but not its whole text (the metric does not count it).
The context is ``trace``'s, i.e. exactly ``reconstruct``'s.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localmem.bench.lme_merged import open_merged_store, questions
from localmem.config import Settings
from localmem.models.embedding import Embedder
from localmem.retrieval.packing import quote
from localmem.retrieval.pool import LIST_NAMES, ranked_lists
from localmem.retrieval.trace import trace
from localmem.storage.bench.lme_reads import turns_by_source_id
from localmem.storage.reads import queries
from localmem.storage.reads.queries import Filter
from localmem.storage.write.store import Store

FATES = ("date filter", "not in pool", "scored low", "evicted", "cut")


def question_losses(
    store: Store, q: dict[str, Any], budgets: Sequence[int], depth: int
) -> tuple[dict[int, int], list[dict[str, Any]]]:
    """(evidence found per budget, one record per missed evidence turn and budget)."""
    ids = turns_by_source_id(store.conn, q["evidence"])
    rows = queries.turn_rows(store.conn, [t for ts in ids.values() for t in ts])
    lists = ranked_lists(store, q["question"], Filter(as_of=q["as_of"]), depth)
    rank_in = [{t: i + 1 for i, t in enumerate(lst)} for lst in lists]
    found: dict[int, int] = {}
    lost: list[dict[str, Any]] = []
    for b in budgets:
        tr = trace(store, q["question"], b, q["as_of"])
        ctx_ids = {t.source_id: t for t in tr.context.turns}
        by_id = {t.turn_id: t for t in tr.turns}
        prank = {t.turn_id: i + 1 for i, t in enumerate(sorted(tr.turns, key=lambda t: -t.score))}
        found[b] = 0
        for ev in q["evidence"]:
            got = ctx_ids.get(ev)
            if got is not None and quote(got.text) in tr.context.text:
                found[b] += 1
                continue
            rec: dict[str, Any] = {"question": q["id"], "type": q["type"], "budget": b, "evidence": ev}
            tids = ids.get(ev, [])
            tid = tids[0] if tids else None
            cand = next((by_id[t] for t in tids if t in by_id), None)
            if tid is None:
                rec["fate"] = "not in pool"
                rec["note"] = "not stored"
            elif q["as_of"] is not None and (rows[tid].ts or "")[:19] > q["as_of"][:19]:
                rec["fate"] = "date filter"
            elif got is not None:
                rec["fate"] = "cut"
            elif cand is None:
                ranks = [r.get(tid) for r in rank_in]
                best = min(((r, n) for r, n in zip(ranks, LIST_NAMES, strict=True) if r is not None), default=None)
                rec.update(
                    fate="not in pool",
                    list_ranks=dict(zip(LIST_NAMES, ranks, strict=True)),
                    best_list=best[1] if best else f"none in top {depth}",
                    best_rank=best[0] if best else None,
                )
            else:
                rec.update(
                    fate="evicted" if cand.status == "evicted" else "scored low",
                    p_rank=prank[cand.turn_id],
                    pool=len(tr.turns),
                    reason=cand.reason,
                    score=cand.score,
                    features=cand.features,
                )
            lost.append(rec)
    return found, lost


@dataclass
class LossTally:
    """Evidence, found turns and lost records, summed over questions (one data set)."""

    budgets: Sequence[int]
    depth: int
    evidence: dict[str, int] = field(default_factory=dict)
    found: dict[tuple[str, int], int] = field(default_factory=dict)
    lost: list[dict[str, Any]] = field(default_factory=list)
    questions: int = 0

    def add(self, store: Store, q: dict[str, Any]) -> None:
        f, ls = question_losses(store, q, self.budgets, self.depth)
        self.evidence[q["type"]] = self.evidence.get(q["type"], 0) + len(q["evidence"])
        for b, n in f.items():
            self.found[(q["type"], b)] = self.found.get((q["type"], b), 0) + n
        self.lost.extend(ls)
        self.questions += 1

    def result(self, benchmark: str, store: dict[str, Any]) -> dict[str, Any]:
        return {
            "benchmark": benchmark,
            "store": store,
            "questions": self.questions,
            "budgets": list(self.budgets),
            "depth": self.depth,
            "evidence": self.evidence,
            "found": [{"type": t, "budget": b, "found": n} for (t, b), n in sorted(self.found.items())],
            "lost": self.lost,
        }


def run(
    data: Path,
    budgets: Sequence[int],
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    limit: int | None = None,
    log: Callable[[str], None] = lambda _m: None,
    depth: int = 1000,
) -> dict[str, Any]:
    qs = questions(data, limit)
    store, record = open_merged_store(workdir, data, embedder, settings, log)
    tally = LossTally(budgets, depth)
    try:
        for i, q in enumerate(qs, 1):
            tally.add(store, q)
            log(f"{i}/{len(qs)} questions traced")
    finally:
        store.close()
    return tally.result("longmemeval-merged-losses", record)


def _median(xs: list[float]) -> str:
    return f"{statistics.median(xs):.0f}" if xs else "-"


def table(result: dict[str, Any], title: str | None = None) -> str:
    """Missed evidence turns per type and budget by fate; for 'not in pool' the median best
    rank and the list that ranked it best most often, for 'scored low' the median rank by
    P(evidence) and the features that most often sit at 0 on the missed turns."""
    types = sorted(result["evidence"])
    found = {(r["type"], r["budget"]): r["found"] for r in result["found"]}
    head = ["type", "budget", "evidence", "found", *FATES, "not-in-pool: median best rank (list)",
            "scored-low: median P-rank / pool, zero features"]  # fmt: skip
    lines = [
        title
        or f"Where the evidence is lost, all haystacks in one store ({result['store']['turns']} turns); "
        f"lists searched {result['depth']} deep",
        " | ".join(head),
        " | ".join("---" for _ in head),
    ]
    for b in result["budgets"]:
        for t in [*types, "all"]:
            rs = [r for r in result["lost"] if r["budget"] == b and (t == "all" or r["type"] == t)]
            ev = sum(result["evidence"].values()) if t == "all" else result["evidence"][t]
            fd = sum(n for (tt, bb), n in found.items() if bb == b and (t == "all" or tt == t))
            nip = [r for r in rs if r["fate"] == "not in pool"]
            best = [float(r["best_rank"]) for r in nip if r.get("best_rank")]
            lists: dict[str, int] = {}
            for r in nip:
                lists[r.get("best_list", "?")] = lists.get(r.get("best_list", "?"), 0) + 1
            top_list = max(lists, key=lambda k: lists[k]) if lists else ""
            low = [r for r in rs if r["fate"] == "scored low"]
            zeros: dict[str, int] = {}
            for r in low:
                for k, v in r["features"].items():
                    if v == 0.0:
                        zeros[k] = zeros.get(k, 0) + 1
            zero_txt = ", ".join(k for k, _ in sorted(zeros.items(), key=lambda kv: -kv[1])[:3])
            pools = _median([float(r["pool"]) for r in low])
            cells = [
                t.replace("single-session-", "ss-"),
                str(b),
                str(ev),
                f"{fd} ({100 * fd / ev:.0f}%)" if ev else "0",
                *(str(sum(1 for r in rs if r["fate"] == f)) for f in FATES),
                f"{_median(best)} ({top_list})" if nip else "-",
                f"{_median([float(r['p_rank']) for r in low])} / {pools}; {zero_txt}" if low else "-",
            ]
            lines.append(" | ".join(cells))
    return "\n".join(lines)
