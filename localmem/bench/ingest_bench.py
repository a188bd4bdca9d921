"""``localmem bench ingest``: ingest throughput against the embedding model alone, and
where the time goes.

The file is ingested into a fresh store by the real path (``ingest_file``: plan, then
batches through ``Store.write_sessions``) with timers (``time.perf_counter``) around its
stages, installed for the run and removed after it; nothing the stages do changes:
- parse: reading the file into sessions (``plan`` reads it once to check it, ``run``
  again to write it; both count);
- prepare: checking, timing, hashing and sentence-splitting each turn, and the lookup
  of hashes already stored;
- embed: the model's forward passes (``Store._embed``; one pass per turn, cues pooled
  from it);
- sql: the write transactions (turns, cues, FTS, vec0, temporal edges, resume point),
  less the two stages below that run inside them;
- mirror: bringing the in-memory cue mirror up to date before linking;
- edges: semantic edges (each new cue's nearest cues in the mirror);
- other: the rest of the ingest's wall time.
Then the same turn texts (as embedded: ``[date] speaker: text``) are embedded by the
model alone, in the same process and run: ``embed_only_turns_per_s`` is the ceiling
ingest can reach on this machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import localmem.ingest.runner as runner_mod
import localmem.storage.store as store_mod
from localmem.config import Settings
from localmem.ingest import detect
from localmem.ingest import longmemeval as lme
from localmem.models.embedding import Embedder
from localmem.storage.store import Store, turn_doc

STAGES = ["parse", "prepare", "embed", "sql", "mirror", "edges", "other"]


class Timers:
    def __init__(self) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)

    def wrap(self, stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[stage] += time.perf_counter() - t0

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
                    self.seconds[stage] += time.perf_counter() - t0
                yield item

        return timed


@contextmanager
def profiled(store: Store, timers: Timers) -> Iterator[None]:
    """Timers around the ingest stages of ``store`` (module functions the write path
    looks up at call time, and this store's own methods), removed on exit."""
    hooks: list[tuple[Any, str, str]] = [
        (runner_mod, "units", "parse"),
        (store_mod, "prepare", "prepare"),
        (store_mod, "link_semantic", "edges"),
        (store, "_known_hashes", "prepare"),
        (store, "_embed", "embed"),
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
    for u in lme.units(path):
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
    db_path = workdir / "ingest.db"
    for p in (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm")):
        p.unlink(missing_ok=True)
    embedder.embed(["load the model before anything is timed"])
    timers = Timers()
    with Store(db_path, embedder=embedder, settings=settings) as store:
        with profiled(store, timers):
            t0 = time.perf_counter()
            report = runner_mod.ingest_file(store, path, fmt, question=question)
            total = time.perf_counter() - t0
        docs = [turn_doc(str(sp), str(text), ts) for sp, text, ts in store.conn.execute(
            "SELECT speaker, text, ts FROM turns ORDER BY id")]  # fmt: skip
    log(f"ingested {report.new} turns in {total:.1f} s; now the model alone on the same {len(docs)} texts")
    t1 = time.perf_counter()
    embedder.embed(docs)
    embed_only = time.perf_counter() - t1
    sec = timers.seconds
    sec["sql"] -= sec["mirror"] + sec["edges"]
    sec["other"] = max(0.0, total - sum(sec[s] for s in STAGES if s != "other"))
    return {
        "benchmark": "ingest",
        "file": str(path),
        "format": fmt,
        "question": question,
        "embedder": embedder.model_id,
        "turns": report.new,
        "seconds": round(total, 2),
        "turns_per_s": round(report.new / total, 1) if total else None,
        "embed_only_s": round(embed_only, 2),
        "embed_only_turns_per_s": round(len(docs) / embed_only, 1) if embed_only else None,
        "share": {s: round(100 * sec[s] / total, 1) if total else 0.0 for s in STAGES},
        "stage_s": {s: round(sec[s], 2) for s in STAGES},
    }


def table(result: dict[str, Any]) -> str:
    what = Path(result["file"]).name + (f" (question {result['question']})" if result["question"] else "")
    lines = [
        f"ingest of {what} ({result['embedder']}; real write path; share = % of ingest wall time)",
        f"{'turns':>7} | {'turns_per_s':>11} | {'embed_only_turns_per_s':>22} | "
        + " | ".join(f"{s + '%':>7}" for s in STAGES),
        "-" * (48 + 10 * len(STAGES)),
        f"{result['turns']:>7} | {result['turns_per_s']!s:>11} | {result['embed_only_turns_per_s']!s:>22} | "
        + " | ".join(f"{result['share'][s]:>7}" for s in STAGES),
    ]
    return "\n".join(lines)
