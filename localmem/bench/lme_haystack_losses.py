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
from localmem.bench.longmemeval import haystack_stores, question_as_of
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
    tally = LossTally(budgets, depth)
    turns = 0
    for item, evidence, store in haystack_stores(
        data, items[:limit] if limit else items, workdir, embedder, settings, built_only
    ):
        if store is None:
            continue
        turns += store.stats()["turns"]
        q = {"id": item["question_id"], "type": item["question_type"], "question": item["question"]}
        tally.add(store, {**q, "as_of": question_as_of(item), "evidence": evidence})
        log(f"{tally.questions} questions traced ({q['id']})")
    return tally.result("longmemeval-losses", {"turns": turns, "haystacks": tally.questions})
