"""``localmem bench locomo --losses``: where each evidence turn a LoCoMo context misses
was lost, per category and budget — the same fates, in the same order, as the merged
LongMemEval store's (``lme_losses``): not in pool (with its best rank in the four lists,
searched ``depth`` deep), scored low, evicted, cut. LoCoMo questions have no date, so
none is lost to the date filter. Each conversation is its own store, as in
``bench locomo``; the context explained is ``reconstruct``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from localmem.bench.lme_losses import LossTally
from localmem.bench.locomo import CATEGORIES, open_conversation_store
from localmem.bench.metrics import clean_evidence, read_benchmark
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
    depth: int = 1000,
) -> dict[str, Any]:
    samples = read_benchmark(data, "LoCoMo")
    samples = samples[:limit] if limit else samples
    tally = LossTally(budgets, depth)
    turns = 0
    for sample in samples:
        sid = str(sample["sample_id"])
        store = open_conversation_store(workdir, sid, data, embedder, settings)
        try:
            turns += store.stats()["turns"]
            for i, qa in enumerate(sample.get("qa", [])):
                cat = qa.get("category")
                ev, _bad = clean_evidence(qa.get("evidence") or [])
                if cat in CATEGORIES and ev:
                    q = {"id": f"{sid}#{i}", "type": CATEGORIES[cat], "question": qa["question"], "as_of": None}
                    tally.add(store, {**q, "evidence": ev})
        finally:
            store.close()
        log(f"conversation {sid}: traced")
    return tally.result("locomo-losses", {"turns": turns, "conversations": len(samples)})
