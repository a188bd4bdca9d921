"""``localmem bench extraction``: what the model layer costs and yields per turn.

The file (any ingestible format; for LoCoMo the first ``--sample``/conversation unless
given) is written to a fresh store, cut to the first ``limit`` turns, and the worker
enriches every turn through the real queue. Reported per turn: model calls, prompt and
generated tokens, cues kept; plus turns/s of the enrichment phase (model, grounding,
cue embedding and writes; not the ingest) and the share of extracted cues rejected by
grounding.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from localmem.bench.metrics import read_benchmark
from localmem.bench.preamble import fresh_file
from localmem.config import Settings
from localmem.enrichment.layers import layer_stats
from localmem.enrichment.worker import run_worker
from localmem.ingest import detect, runner
from localmem.models.embedding import Embedder
from localmem.models.llm import Generator
from localmem.storage.bench.reads import count_jobs
from localmem.storage.bench.synthetic import keep_jobs_of_first_turns
from localmem.storage.write.store import Store


def run(
    data: Path,
    gen: Generator,
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    limit: int | None = None,
    sample: str | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    db_path = fresh_file(workdir / "extraction.db")
    fmt = detect(data)
    if fmt == "locomo" and sample is None:
        sample = str(read_benchmark(data, "LoCoMo")[0]["sample_id"])
    # extraction's own cost: antecedent links are measured by ``bench locomo --model``
    settings = replace(settings, cable=replace(settings.cable, enabled=False))
    with Store(db_path, embedder=embedder, settings=settings) as store:
        plan = runner.plan(store, data, fmt, sample=sample)
        runner.run(store, plan)
        if limit:
            keep_jobs_of_first_turns(store.conn, limit)
        turns = count_jobs(store.conn)
        log(f"{turns} turns to enrich with {gen.model_id}")
        t0 = time.perf_counter()
        done = 0

        def progress(n: int) -> None:
            nonlocal done
            done += n
            rate = done / max(time.perf_counter() - t0, 1e-9)
            log(f"{done}/{turns} turns, {rate:.2f} turns/s, ETA {(turns - done) / rate:.0f}s")

        stats = run_worker(store, gen, until_empty=True, progress=progress)
        elapsed = time.perf_counter() - t0
        layers = layer_stats(store)
    n = max(stats.turns, 1)
    kept, rejected = stats.cues_kept, stats.cues_rejected
    return {
        "benchmark": "extraction",
        "data": str(data),
        "sample": sample,
        "model": gen.model_id,
        "turns": stats.turns,
        "turns_per_s": round(stats.turns / elapsed, 3) if elapsed > 0 else 0.0,
        "model_calls_per_turn": round(stats.calls / n, 3),
        "prompt_tokens_per_turn": round(stats.prompt_tokens / n, 1),
        "generated_tokens_per_turn": round(stats.generated_tokens / n, 1),
        "cues_per_turn": round(kept / n, 3),
        "rejected_cue_rate": round(rejected / (kept + rejected), 3) if kept + rejected else 0.0,
        "low_information_turns": layers["low_information_turns"],
        "memory_types": layers["memory_types"],
        "memory_type_from_model": layers["memory_type_from_model"],
        "failed_jobs": stats.failed,
        "parked_jobs": layers["jobs"]["parked"],
        "seconds": round(elapsed, 1),
    }


def table(result: dict[str, Any]) -> str:
    keys = (
        "turns",
        "turns_per_s",
        "model_calls_per_turn",
        "prompt_tokens_per_turn",
        "generated_tokens_per_turn",
        "cues_per_turn",
        "rejected_cue_rate",
        "low_information_turns",
        "seconds",
    )
    lines = [f"Extraction with {result['model']} on {result['data']} ({result['sample'] or 'all'})"]
    lines += [f"  {k:<27} {result[k]}" for k in keys]
    lines.append("  memory types                " + ", ".join(f"{k} {v}" for k, v in result["memory_types"].items()))
    return "\n".join(lines)
