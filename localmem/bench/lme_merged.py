"""``localmem bench longmemeval --merged``: every LongMemEval haystack in ONE store, the
shape of a user's years of history, each question asked as of its own date.

Invariants:
- A session id that several haystacks (or one haystack twice) hold is stored once, at
  its EARLIEST date: every question that saw it in its own haystack (at that date or a
  later one, always before the question) still sees it as of its own date.
- Evidence is each question's own ``has_answer`` turns, named by source id
  (``<session id>:<turn index>``), which do not change with the copy kept.
- The store is built once into ``workdir`` and marked built only after the last batch
  commits (``built.json``); a later run reuses it, an interrupted one resumes (turns
  already stored are not embedded again).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from localmem.bench.longmemeval import evidence_of, question_as_of
from localmem.bench.metrics import METHODS, Tally, found_fraction, read_benchmark
from localmem.config import Settings
from localmem.ingest import longmemeval
from localmem.models.embedding import Embedder
from localmem.records import SessionIn, TurnIn
from localmem.storage.write.store import Store

SOURCE = "longmemeval:merged"
STORE_NAME = "lme-merged.db"
MARK_NAME = "built.json"


def merged_sessions(data: Path) -> list[SessionIn]:
    """Every haystack's sessions, one per session id (its earliest date), in date order."""
    kept: dict[str, SessionIn] = {}
    for sess in longmemeval.parse(data):
        old = kept.get(sess.key)
        if old is None or (sess.started_at or "") < (old.started_at or ""):
            # A haystack that repeats a session id (at two dates) comes parsed as one
            # session holding both copies' turns: keep one copy of each native turn.
            firsts: dict[str | None, TurnIn] = {}
            for t in sess.turns:
                firsts.setdefault(t.source_id, t)
            kept[sess.key] = replace(sess, source=SOURCE, turns=tuple(firsts.values()))
    return sorted(kept.values(), key=lambda s: (s.started_at or "", s.key))


def _batches(sessions: Sequence[SessionIn], size: int) -> Iterator[tuple[Sequence[SessionIn], int]]:
    for start in range(0, len(sessions), size):
        chunk = sessions[start : start + size]
        yield chunk, start + len(chunk)


def open_merged_store(
    workdir: Path,
    data: Path,
    embedder: Embedder,
    settings: Settings,
    log: Callable[[str], None] = lambda _m: None,
    batch: int = 40,
) -> tuple[Store, dict[str, Any]]:
    """The merged store in ``workdir`` (built when not marked built) and its build record:
    sessions, turns, the seconds the build took (of the run that finished it)."""
    workdir.mkdir(parents=True, exist_ok=True)
    mark = workdir / MARK_NAME
    store = Store(workdir / STORE_NAME, embedder=embedder, settings=settings)
    try:
        if mark.is_file():
            return store, json.loads(mark.read_text("utf-8"))
        sessions = merged_sessions(data)
        turns = sum(len(s.turns) for s in sessions)
        log(f"building the merged store: {len(sessions)} sessions, {turns} turns")
        t0 = time.perf_counter()
        for _results, done in store.write_stream(_batches(sessions, batch)):
            log(f"{done}/{len(sessions)} sessions written ({time.perf_counter() - t0:.0f} s)")
        record = {
            "data": str(data),
            "sessions": len(sessions),
            "turns": turns,
            "build_seconds": round(time.perf_counter() - t0, 1),
        }
        mark.write_text(json.dumps(record), "utf-8")
        return store, record
    except BaseException:
        store.close()
        raise


def questions(data: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The questions with evidence, each with its own as-of time and evidence ids."""
    out = []
    for item in read_benchmark(data, "LongMemEval"):
        evidence = evidence_of(item)
        if evidence:
            out.append(
                {
                    "id": item["question_id"],
                    "type": item["question_type"],
                    "question": item["question"],
                    "as_of": question_as_of(item),
                    "evidence": evidence,
                }
            )
    return out[:limit] if limit else out


def run(
    data: Path,
    budgets: Sequence[int],
    methods: Sequence[str],
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    limit: int | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Evidence recall per type at every budget for every method, on the merged store."""
    qs = questions(data, limit)
    tallies = {(m, b): Tally() for m in methods for b in budgets}
    seconds = {m: 0.0 for m in methods}
    store, record = open_merged_store(workdir, data, embedder, settings, log)
    try:
        for i, q in enumerate(qs, 1):
            for m in methods:
                for b in budgets:
                    t0 = time.perf_counter()
                    ctx = METHODS[m](store, q["question"], b, q["as_of"])
                    seconds[m] += time.perf_counter() - t0
                    tallies[(m, b)].add(q["type"], found_fraction(ctx, q["evidence"]))
            log(f"{i}/{len(qs)} questions")
    finally:
        store.close()
    groups = [*sorted({k for t in tallies.values() for k in t.counts if k != "all"}), "all"]
    rows = [
        {"method": m, "budget": b, **{g: round(100 * tallies[(m, b)].mean(g), 1) for g in groups}}
        for m in methods
        for b in budgets
    ]
    calls = max(1, len(qs) * len(budgets))
    return {
        "benchmark": "longmemeval-merged",
        "data": str(data),
        "questions": len(qs),
        "store": record,
        "query_seconds": {m: round(seconds[m] / calls, 3) for m in methods},
        "groups": groups,
        "rows": rows,
    }


def table(result: dict[str, Any]) -> str:
    cols = ["method", "budget", *result["groups"]]
    short = {g: g.replace("single-session-", "ss-").replace("temporal-reasoning", "temporal") for g in cols}
    st = result["store"]
    lines = [
        f"LongMemEval evidence recall (%), ALL haystacks in one store ({st['sessions']} sessions, "
        f"{st['turns']} turns, built in {st['build_seconds']} s), {result['questions']} questions, "
        "each as of its own date",
        " | ".join(f"{short[c]:>14}" for c in cols),
        "-" * (17 * len(cols)),
    ]
    for r in result["rows"]:
        lines.append(" | ".join(f"{r.get(c, '')!s:>14}" for c in cols))
    lines.append("mean seconds a query: " + ", ".join(f"{m} {s}" for m, s in result["query_seconds"].items()))
    return "\n".join(lines)
