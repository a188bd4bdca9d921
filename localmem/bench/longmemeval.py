"""``localmem bench longmemeval``: evidence recall at budgets and session recall@5
(the share of answer sessions among the first five, and recall_any@5), per question type. Each question's haystack is its own store; the question is asked
as of the end of its question date. Evidence = turns with ``has_answer: true``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw

from localmem.bench.metrics import METHODS, Tally, found_fraction, read_benchmark
from localmem.bench.preamble import store_with
from localmem.config import Settings
from localmem.ingest import longmemeval
from localmem.models.embedding import Embedder
from localmem.storage.bench.reads import count_turns
from localmem.storage.engine import db
from localmem.storage.write.store import Store
from localmem.util.text import parse_time


def evidence_of(item: dict[str, Any]) -> list[str]:
    """The question's evidence turns as source ids (``<session id>:<turn index>``)."""
    return [
        f"{sid}:{ti}"
        for sid, sess in zip(item["haystack_session_ids"], item["haystack_sessions"], strict=True)
        for ti, t in enumerate(sess)
        if t.get("has_answer")
    ]


def question_as_of(item: dict[str, Any]) -> str:
    """The time a question is asked as of: the end of its question date's day. The
    haystacks date some sessions minutes or hours after the question on the same day
    (in dev60: 10 of 97 evidence turns, 6 of 10 temporal-reasoning questions); the
    question's minute would hide them from every method."""
    return parse_time(item["question_date"])[:10] + "T23:59:59"


def is_built(path: Path, item: dict[str, Any]) -> bool:
    """True when a question's store holds every non-empty turn of its haystack (a store
    another process is still writing is not built yet)."""
    if not path.is_file():
        return False
    want = sum(1 for sess in item["haystack_sessions"] for t in sess if str(t.get("content", "")).strip())
    try:
        conn = db.connect(path, readonly=True)
    except apsw.Error:
        return False
    try:
        return count_turns(conn) >= want
    except apsw.Error:
        return False
    finally:
        conn.close()


def open_question_store(path: Path, data: Path, qid: str, embedder: Embedder, settings: Settings) -> Store:
    """The question's store, its haystack written (known turns embed nothing again)."""
    return store_with(path, embedder, settings, list(longmemeval.parse(data, question=qid)))


def haystack_stores(
    data: Path,
    items: Sequence[dict[str, Any]],
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    built_only: bool = False,
) -> Iterator[tuple[dict[str, Any], list[str], Store | None]]:
    """Each item whose store is in ``workdir`` (every item unless ``built_only``), with
    its evidence ids and its store open and written; None, and no store opened, when it
    has no evidence. Each store closes when the next item is asked for."""
    for item in items:
        qid = item["question_id"]
        path = workdir / f"lme-{qid}.db"
        if built_only and not is_built(path, item):
            continue
        evidence = evidence_of(item)
        if not evidence:
            yield item, evidence, None
            continue
        store = open_question_store(path, data, qid, embedder, settings)
        try:
            yield item, evidence, store
        finally:
            store.close()


def run(
    data: Path,
    budgets: Sequence[int],
    methods: Sequence[str],
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    limit: int | None = None,
    log: Callable[[str], None] = lambda _m: None,
    built_only: bool = False,
) -> dict[str, Any]:
    items = read_benchmark(data, "LongMemEval")
    tallies = {(m, b): Tally() for m in methods for b in budgets}
    sess5 = {m: Tally() for m in methods}
    any5 = {m: Tally() for m in methods}
    asked = skipped = 0
    for item, evidence, store in haystack_stores(
        data, items[:limit] if limit else items, workdir, embedder, settings, built_only
    ):
        if store is None:
            skipped += 1
            continue
        asked += 1
        qtype = item["question_type"]
        answer_sessions = set(item.get("answer_session_ids") or [])
        as_of = question_as_of(item)
        for m in methods:
            for b in budgets:
                ctx = METHODS[m](store, item["question"], b, as_of)
                tallies[(m, b)].add(qtype, found_fraction(ctx, evidence))
            # Session recall@5: the first five distinct sessions in the method's rank order.
            ranked = METHODS[m](store, item["question"], settings.max_budget_tokens, as_of)
            by_score = sorted(ranked.turns, key=lambda t: -t.score)
            top: list[str] = []
            for ev in by_score:
                if ev.session not in top:
                    top.append(ev.session)
            hit = len(answer_sessions & set(top[:5])) / len(answer_sessions) if answer_sessions else 0.0
            sess5[m].add(qtype, hit)
            # The form other memory servers publish ("R@5", LongMemEval's recall_any@5):
            # at least one answer session among the first five.
            any5[m].add(qtype, 1.0 if answer_sessions & set(top[:5]) else 0.0)
        log(f"{asked} questions")
    groups = [*sorted({k for t in tallies.values() for k in t.counts if k != "all"}), "all"]
    rows = []
    for m in methods:
        for b in budgets:
            t = tallies[(m, b)]
            rows.append({"method": m, "budget": b, **{g: round(100 * t.mean(g), 1) for g in groups}})
        rows.append({"method": m, "budget": "sess@5", **{g: round(100 * sess5[m].mean(g), 1) for g in groups}})
        rows.append({"method": m, "budget": "any@5", **{g: round(100 * any5[m].mean(g), 1) for g in groups}})
    return {
        "benchmark": "longmemeval",
        "data": str(data),
        "questions": asked,
        "skipped_no_evidence": skipped,
        "groups": groups,
        "rows": rows,
    }


def table(result: dict[str, Any]) -> str:
    cols = ["method", "budget", *result["groups"]]
    short = {g: g.replace("single-session-", "ss-").replace("temporal-reasoning", "temporal") for g in cols}
    lines = [
        f"LongMemEval evidence recall (%), {result['questions']} questions; 'sess@5' = share of answer "
        "sessions among the first five sessions, 'any@5' = questions with any answer session there",
        " | ".join(f"{short[c]:>14}" for c in cols),
        "-" * (17 * len(cols)),
    ]
    for r in result["rows"]:
        lines.append(" | ".join(f"{r.get(c, '')!s:>14}" for c in cols))
    return "\n".join(lines)
