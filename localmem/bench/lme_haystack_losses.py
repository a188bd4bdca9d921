"""``localmem bench longmemeval --losses`` (without ``--merged``): where each evidence
turn that a per-haystack context misses was lost, per question type and budget — the
same fates, in the same order, as the merged store's (``lme_losses``). Each question is
asked of its own haystack's store, as in ``bench longmemeval``, as of its own date; the
context explained is ``reconstruct``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from localmem.bench.lme_losses import LossTally
from localmem.bench.longmemeval import evidence_of, is_built, open_question_store, question_as_of
from localmem.bench.metrics import read_benchmark
from localmem.config import Settings
from localmem.models.embedding import Embedder


def run(
    data: Path,
    budgets: Sequence[int],
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    limit: int | None = None,
    log: Callable[[str], None] = lambda _m: None,
    built_only: bool = False,
    depth: int = 1000,
) -> dict[str, Any]:
    items = read_benchmark(data, "LongMemEval")
    items = items[:limit] if limit else items
    tally = LossTally(budgets, depth)
    turns = 0
    for item in items:
        qid = item["question_id"]
        path = workdir / f"lme-{qid}.db"
        evidence = evidence_of(item)
        if not evidence or (built_only and not is_built(path, item)):
            continue
        store = open_question_store(path, data, qid, embedder, settings)
        try:
            turns += store.stats()["turns"]
            q = {"id": qid, "type": item["question_type"], "question": item["question"]}
            tally.add(store, {**q, "as_of": question_as_of(item), "evidence": evidence})
        finally:
            store.close()
        log(f"{tally.questions} questions traced ({qid})")
    return tally.result("longmemeval-losses", {"turns": turns, "haystacks": tally.questions})
