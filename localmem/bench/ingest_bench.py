"""``localmem bench ingest``: ingest throughput against the embedding model alone, and
where the time goes.

The file is ingested into a fresh store by the real path (``ingest_file``: plan, then
batches through ``Store.write_stream``, which embeds batch k+1 on a worker thread while
batch k commits) with timers (``time.perf_counter``) around its stages, installed for
the run and removed after it; nothing the stages do changes:
- parse: reading the file into sessions (``plan`` reads it once to check it, ``run``
  again to write it; both count);
- prepare: checking, timing, hashing and sentence-splitting each turn, and the lookup
  of hashes already stored;
- embed: the model's forward passes (``Store.embed``, on the worker thread: one pass
  per turn, cues pooled from it, plus one pass per cue past the model's window);
- sql: the write transactions (turns, cues, FTS, vec0, temporal edges, resume point),
  less the two stages below that run inside them;
- mirror: bringing the in-memory cue mirror up to date before linking;
- edges: semantic edges (each new cue's nearest cues in the mirror);
- other: wall time during which no stage ran.
Each share is a stage's time over the ingest's wall time; embed runs beside the others,
so shares add up to more than 100 by ``overlap``. ``embed`` is the share of wall time
the model was busy: the figure issue 15 asks to be >= 90.

Then the model alone, in the same process and run, on the same turns:
``embed_only_turns_per_s`` embeds the turn texts as embedded (``[date] speaker: text``);
``model_turns_per_s`` does exactly the model work ingest asks for (the same turn passes
plus the passes of statement cues past the window), so ingest can reach it but not
exceed it. On LoCoMo the two are the same work (no cue lies past the window).
``cpu_s``, ``embed_only_cpu_s``, ``model_cpu_s``: this process's CPU seconds (all threads)
for the same three, which other load on the machine inflates far less than wall time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import localmem.ingest.runner as runner_mod
import localmem.storage.write.store as store_mod
from localmem.bench.preamble import fresh_file
from localmem.config import Settings
from localmem.ingest import detect, longmemeval
from localmem.models.embedding import Embedder
from localmem.storage.bench import reads
from localmem.storage.write.store import Store
from localmem.storage.write.vectorize import turn_doc, turn_vectors

STAGES = ["parse", "prepare", "embed", "sql", "mirror", "edges", "other"]


class Timers:
    """Time per stage, and the intervals, so that time when no stage ran can be told
    from time when two ran at once (the model beside the write)."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self.spans: list[tuple[float, float]] = []

    def _add(self, stage: str, t0: float) -> None:
        t1 = time.perf_counter()
        self.seconds[stage] += t1 - t0
        self.spans.append((t0, t1))

    def busy(self) -> float:
        """Seconds during which at least one stage ran (the union of the intervals)."""
        total, end = 0.0, float("-inf")
        for a, b in sorted(self.spans):
            if b > end:
                total += b - max(a, end)
                end = b
        return total

    def wrap(self, stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._add(stage, t0)

        return timed

    def wrap_iter(self, stage: str, fn: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
        def timed(*args: Any, **kwargs: Any) -> Iterator[Any]:
            it = fn(*args, **kwargs)
            while True:
                t0 = time.perf_counter()
                try:
                    item = next(it)
                except StopIteration:
                    return
                finally:
                    self._add(stage, t0)
                yield item

        return timed


@contextmanager
def profiled(store: Store, timers: Timers) -> Iterator[None]:
    """Timers around the ingest stages of ``store`` (module functions the write path
    looks up at call time, and this store's own methods), removed on exit."""
    hooks: list[tuple[Any, str, str]] = [
        (runner_mod, "units", "parse"),
        (store_mod, "prepare_all", "prepare"),  # what Store.stage calls per session
        (store_mod, "link_semantic", "edges"),
        (store, "_known_hashes", "prepare"),
        (store, "embed", "embed"),
        (store, "retrying", "sql"),
        (store, "mirror", "mirror"),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in hooks]
    for owner, name, stage in hooks:
        fn = getattr(owner, name)
        setattr(owner, name, timers.wrap_iter(stage, fn) if stage == "parse" else timers.wrap(stage, fn))
    try:
        yield
    finally:
        for owner, name, fn in saved:
            if owner is store:
                delattr(store, name)  # the class's method shows through again
            else:
                setattr(owner, name, fn)


def first_question(path: Path) -> str:
    """The question id of a LongMemEval file's first haystack."""
    for u in longmemeval.units(path):
        for s in u.sessions:
            return s.source.removeprefix("longmemeval:")
    return ""


def run(
    path: Path,
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    *,
    fmt: str | None = None,
    question: str | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    fmt = fmt or detect(path)
    if fmt == "longmemeval" and question is None:
        question = first_question(path)  # one haystack, not the whole file
    db_path = fresh_file(workdir / "ingest.db")
    embedder.embed(["load the model before anything is timed"])
    timers = Timers()
    with Store(db_path, embedder=embedder, settings=settings) as store:
        with profiled(store, timers):
            t0, c0 = time.perf_counter(), time.process_time()
            report = runner_mod.ingest_file(store, path, fmt, question=question)
            total, cpu = time.perf_counter() - t0, time.process_time() - c0
        rows = reads.turn_texts(store.conn)
        spans = reads.statement_spans(store.conn)
    docs = [turn_doc(r.speaker, r.text, r.ts) for r in rows]
    log(f"ingested {report.new} turns in {total:.1f} s; now the model alone on the same {len(docs)} turns")
    t1, c1 = time.perf_counter(), time.process_time()
    embedder.embed(docs)
    embed_only, embed_only_cpu = time.perf_counter() - t1, time.process_time() - c1
    t2, c2 = time.perf_counter(), time.process_time()
    turn_vectors(
        embedder, settings.retrieval.cue_vectors, [(r.speaker, r.text, r.ts, spans.get(r.turn_id, [])) for r in rows]
    )
    model_only, model_cpu = time.perf_counter() - t2, time.process_time() - c2
    sec = timers.seconds
    sec["sql"] -= sec["mirror"] + sec["edges"]
    sec["other"] = max(0.0, total - timers.busy())
    overlap = sum(sec.values()) - total

    def rate(seconds: float) -> float | None:
        return round(len(docs) / seconds, 1) if seconds else None

    return {
        "benchmark": "ingest",
        "file": str(path),
        "format": fmt,
        "question": question,
        "embedder": embedder.model_id,
        "load_avg": round(os.getloadavg()[0], 2),
        "turns": report.new,
        "seconds": round(total, 2),
        "turns_per_s": round(report.new / total, 1) if total else None,
        "embed_only_s": round(embed_only, 2),
        "embed_only_turns_per_s": rate(embed_only),
        "model_s": round(model_only, 2),
        "model_turns_per_s": rate(model_only),
        # CPU seconds of this process (all threads): less sensitive to other load than wall time.
        "cpu_s": round(cpu, 2),
        "embed_only_cpu_s": round(embed_only_cpu, 2),
        "model_cpu_s": round(model_cpu, 2),
        "share": {s: round(100 * sec[s] / total, 1) if total else 0.0 for s in STAGES},
        "overlap": round(100 * max(0.0, overlap) / total, 1) if total else 0.0,
        "stage_s": {s: round(sec[s], 2) for s in STAGES},
    }


def table(result: dict[str, Any]) -> str:
    what = Path(result["file"]).name + (f" (question {result['question']})" if result["question"] else "")
    lines = [
        f"ingest of {what} ({result['embedder']}; real write path; share = % of ingest wall time, "
        f"stages overlap by {result['overlap']}%; load average {result['load_avg']})",
        f"{'turns':>7} | {'turns_per_s':>11} | {'embed_only_turns_per_s':>22} | {'model_turns_per_s':>17} | "
        + " | ".join(f"{s + '%':>7}" for s in STAGES),
        "-" * (68 + 10 * len(STAGES)),
        f"{result['turns']:>7} | {result['turns_per_s']!s:>11} | {result['embed_only_turns_per_s']!s:>22} | "
        f"{result['model_turns_per_s']!s:>17} | " + " | ".join(f"{result['share'][s]:>7}" for s in STAGES),
    ]
    return "\n".join(lines)
