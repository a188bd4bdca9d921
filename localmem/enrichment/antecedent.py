"""CABLE's construction: verified antecedent edges into a new turn, one job per turn.

An ``antecedent`` job is queued for a turn when enrichment stores its memory type
(``localmem/enrichment/enrich.py``). For that turn m_i:

1. no search when it is low-information (extraction's flag or the rule-based filter)
   or when no turn comes before it; the memory type is extraction's, else the keyword
   classifier's;
2. up to Nq antecedent queries from the model, with the prompt of the turn's memory
   type (``localmem/enrichment/antecedent_prompts.py``; a fallback prompt for untyped turns, a
   topical one with ``generic_queries``);
3. dual retrieval with the read path's own ranking (``reconstruct.retrieve``), only
   over turns strictly earlier than m_i (``Filter.before``): B = top-Kb for the turn's
   own text, H = union of top-Kh per query keeping each turn's best score;
4. C = H minus B (all of H with ``subtraction`` off), best first; empty C: no link;
5. the model verifies C at temperature 0, ``verify_batch`` candidates per call; a
   candidate whose verdict is not ``valid: true`` is rejected. With ``verification`` off every
   candidate is accepted (reason "unverified", confidence = its retrieval score);
6. one transaction (``localmem/storage/layers/edges.py``): the job is marked done (only while
   this worker holds it), the run is recorded in ``antecedent_runs`` and accepted links
   become edges m_j -> m_i (kind ``antecedent``, weight = confidence, reason = the
   verdict's), journaled by the door for changes (``localmem/storage/write/changes.py``).

A reply that is not the JSON asked for (``localmem/models/replies.py``: empty, cut
off, not JSON, a missing ``queries`` or verdict key) stops the construction: the job
is a failed attempt (back-off, retried, parked after ``job_attempts``), recorded with
the call log in one transaction, and nothing is linked. Model calls and retrieval
happen before the transaction, never inside it. A turn is
processed once (``antecedent_runs`` primary key); edges are append-only and go with
the turns they touch. Cost per turn is bounded: at most Nq*Kh candidates and
1 + ceil(Nq*Kh / verify_batch) model calls.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from localmem.config import CableParams
from localmem.enrichment.antecedent_prompts import line, query_messages, query_schema, verify_messages, verify_schema
from localmem.enrichment.grounding import keyword_memory_type, low_information
from localmem.enrichment.stats import WorkerStats
from localmem.models.llm import Generator
from localmem.models.replies import CallRecord, ReplyError, parse_reply, record
from localmem.retrieval.pool import earlier_mask, retrieve
from localmem.storage.layers import edges
from localmem.storage.layers.edges import AntecedentRun
from localmem.storage.layers.queue import Job, fail, unfinished
from localmem.storage.reads.queries import Filter, turn_rows
from localmem.storage.write.changes import LinkWrite
from localmem.storage.write.store import Store

KIND = "antecedent"
QUERY_TOKENS = 120
VERDICT_TOKENS = 70  # per candidate in a verification call


@dataclass(frozen=True)
class Link:
    src: int  # the earlier turn m_j
    confidence: float
    reason: str


@dataclass
class Outcome:
    """What the construction of one turn found and what it cost."""

    turn_id: int
    memory_type: str | None = None
    skipped: str = ""
    queries: list[str] = field(default_factory=list)
    direct: list[int] = field(default_factory=list)  # B
    retrieved: dict[int, float] = field(default_factory=dict)  # H, best score per turn
    candidates: list[int] = field(default_factory=list)  # C, best first
    links: list[Link] = field(default_factory=list)
    calls: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0
    records: list[CallRecord] = field(default_factory=list)  # for the call log
    error: str = ""  # a refused reply stopped the construction: the job failed


def construct(store: Store, gen: Generator, turn_id: int, params: CableParams) -> Outcome:
    """Steps 1-5 for one turn: no writes."""
    got = edges.antecedent_input(store.conn, turn_id)
    if got is None:
        return Outcome(turn_id, skipped="turn forgotten")
    speaker, text, ts, persons = got.speaker, got.text, got.ts, got.persons
    # A turn without extraction gets the keyword classifier's type (CABLE's own fallback);
    # a turn that matches none of its phrases gets the fallback prompt.
    out = Outcome(turn_id, memory_type=got.memory_type or keyword_memory_type(text, default=None))
    low = got.low_info
    if low or low_information(text, persons):
        out.skipped = "low information"
        return out
    if not earlier_mask(store.turn_mirror(), turn_id).any():
        out.skipped = "no earlier turns"
        return out

    out.queries = _queries(gen, out, text, speaker, persons, params)
    if out.error or not out.queries:
        return out  # H is empty, so C is: no search needed
    flt = Filter(before=turn_id)
    out.direct = [t for t, _p in retrieve(store, text, flt, params.kb)]
    for q in out.queries:
        for t, p in retrieve(store, q, flt, params.kh):
            out.retrieved[t] = max(p, out.retrieved.get(t, 0.0))
    blocked = set(out.direct) if params.subtraction else set()
    out.candidates = sorted((t for t in out.retrieved if t not in blocked), key=lambda t: (-out.retrieved[t], t))
    if not out.candidates:
        return out
    if not params.verification:
        out.links = [Link(t, round(out.retrieved[t], 4), "unverified") for t in out.candidates]
        return out
    rows = turn_rows(store.conn, out.candidates)
    earlier = [line(rows[t].speaker, rows[t].text, rows[t].ts) for t in out.candidates]
    out.links = verify(gen, out, line(speaker, text, ts), earlier, out.candidates, params.verify_batch)
    return out


def verify(gen: Generator, out: Outcome, current: str, earlier: list[str], ids: list[int], batch: int) -> list[Link]:
    """Step 5: the accepted links among ``ids`` (rendered as ``earlier``), ``batch`` per
    call at temperature 0; calls and tokens are counted on ``out``. A refused reply
    sets ``out.error`` and ends the verification."""
    links: list[Link] = []
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        msgs = verify_messages(current, earlier[start : start + batch])
        data = _ask(gen, out, "antecedent-verify", msgs, verify_schema(len(chunk)), VERDICT_TOKENS * len(chunk), 0.0)
        if data is None:
            return []
        links += parse_verdicts(data, chunk)
    return links


def _ask(
    gen: Generator,
    out: Outcome,
    purpose: str,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    max_tokens: int,
    temp: float,
) -> dict[str, Any] | None:
    """One model call, parsed; counted and recorded on ``out``. None (and ``out.error``)
    when the reply is refused."""
    g = gen.generate_json(messages, schema, max_tokens=max_tokens, temperature=temp)
    out.calls += 1
    out.prompt_tokens += g.prompt_tokens
    out.generated_tokens += g.generated_tokens
    try:
        data, status = parse_reply(g.text, schema), "ok"
    except ReplyError as exc:
        data, status = None, exc.reason
        out.error = f"{purpose}: {exc}"
    out.records.append(record(purpose, gen.model_id, messages, g.text, status, (g.prompt_tokens, g.generated_tokens)))
    return data


def _queries(gen: Generator, out: Outcome, text: str, speaker: str, persons: list[str], p: CableParams) -> list[str]:
    msgs = query_messages(text, speaker, persons, out.memory_type, p.nq, p.generic_queries)
    data = _ask(gen, out, "antecedent-queries", msgs, query_schema(p.nq), QUERY_TOKENS, 0.2)
    items = data.get("queries") if data is not None else None
    return clean_queries(items if isinstance(items, list) else [], text, p.nq)


# Small models echo the prompt's own words back as "queries".
_ECHO = re.compile(r"search quer|memory:|people in the conversation|prior memor|write at most|^queries?$", re.I)
_WORD = re.compile(r"[a-z0-9']+")


def clean_queries(items: list[Any], text: str, nq: int) -> list[str]:
    """At most ``nq`` distinct queries, without echoes of the prompt and without
    near-copies of the memory itself (the direct search B already asks that)."""
    own = set(_WORD.findall(text.lower()))
    seen: set[str] = set()
    queries: list[str] = []
    for item in items:
        q = " ".join(str(item).split()).strip(" \"'")[:200]
        words = set(_WORD.findall(q.lower()))
        if not words or _ECHO.search(q) or q.lower() in seen:
            continue
        if len(words) >= 4 and len(words & own) / len(words | own) >= 0.6:
            continue
        seen.add(q.lower())
        queries.append(q)
    return queries[:nq]


def parse_verdicts(data: dict[str, Any], batch: list[int]) -> list[Link]:
    """Accepted links of one parsed verification reply; a verdict that is not an
    object with ``valid: true`` is a rejection."""
    links = []
    for i, tid in enumerate(batch, start=1):
        v = data.get(f"h{i}")
        if not isinstance(v, dict) or v.get("valid") is not True:
            continue
        try:
            conf = float(v.get("confidence", 0.5))
        except (TypeError, ValueError):
            conf = 0.5
        conf = 0.5 if math.isnan(conf) else min(max(conf, 0.0), 1.0)
        links.append(Link(tid, round(conf, 4), " ".join(str(v.get("reason", "")).split())[:300]))
    return links


def run_jobs(
    store: Store, gen: Generator, jobs: list[Job], stats: WorkerStats | None = None, max_attempts: int | None = None
) -> int:
    """Construct and store antecedent links for the turns of ``jobs``; returns turns
    done. A refused reply fails the job's attempt (``max_attempts``: default the
    settings' ``job_attempts``), counted in ``stats``."""
    stats = stats if stats is not None else WorkerStats()
    params = store.settings.cable
    max_attempts = max_attempts or store.settings.job_attempts
    done = 0
    for job in jobs:
        out = construct(store, gen, job.turn_id, params)
        stats.antecedent_calls += out.calls
        stats.unparsed_calls += sum(r.status != "ok" for r in out.records)
        stats.prompt_tokens += out.prompt_tokens
        stats.generated_tokens += out.generated_tokens
        if out.error:
            state = fail(store.conn, job, out.error, max_attempts, records=out.records)
            stats.failed += 1
            stats.parked += state == "parked"
            continue
        if write(store, job, out, gen.model_id, params.variant):
            done += 1
            stats.antecedent_turns += 1
            stats.antecedent_candidates += len(out.candidates)
            stats.antecedent_edges += len(out.links)
    return done


def write(store: Store, job: Job, out: Outcome, model_id: str, variant: str) -> bool:
    """Step 6: one transaction (``storage/layers/edges.py``). False when the job is no longer
    ours or the turn was processed before (then nothing is written)."""
    run = AntecedentRun(
        out.turn_id,
        out.memory_type,
        out.skipped,
        out.queries,
        len(out.direct),
        len(out.retrieved),
        len(out.candidates),
        out.calls,
        out.prompt_tokens,
        out.generated_tokens,
        variant,
        model_id,
    )
    links = [LinkWrite(link.src, out.turn_id, link.confidence, link.reason) for link in out.links]
    return edges.commit_antecedents(store.conn, job, run, links, out.records)


def cable_totals(store: Store) -> dict[str, int]:
    """Sums over ``antecedent_runs`` (several stores' totals add up)."""
    return edges.antecedent_totals(store.conn)


def per_turn(t: dict[str, int]) -> dict[str, float]:
    """Cost and yield per processed turn, from ``cable_totals``."""

    def per(x: int) -> float:
        return round(x / t["runs"], 3) if t["runs"] else 0.0

    return {
        "edges_per_turn": per(t["accepted"]),
        "candidates_per_turn": per(t["candidates"]),
        "calls_per_turn": per(t["calls"]),
        "prompt_tokens_per_turn": per(t["prompt_tokens"]),
        "generated_tokens_per_turn": per(t["generated_tokens"]),
        "acceptance_rate": round(t["accepted"] / t["candidates"], 3) if t["candidates"] else 0.0,
    }


def cable_stats(store: Store) -> dict[str, Any]:
    """Coverage and cost of the antecedent layer (``localmem stats``, the benchmarks)."""
    t = cable_totals(store)
    pending = unfinished(store.conn, KIND)
    return {
        "turns_processed": t["runs"],
        "turns_skipped": t["skipped"],
        "jobs_waiting": pending,
        "edges": edges.antecedent_edges(store.conn),
        **per_turn(t),
    }
