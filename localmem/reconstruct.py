"""Query -> anchors -> expansion -> budgeted, chronologically ordered context. No LLM.

Pipeline (CueMem 4.3-4.4, with selective expansion):
1. embed the query; four ranked lists: turn vectors, statement-cue vectors, turn FTS5
   bm25, cue FTS5 bm25 (cues vote once per source turn);
2. reciprocal-rank fusion -> anchor scores;
3. one-hop expansion over temporal and semantic edges of the best anchors; a neighbour
   is scored by its own similarity to the query plus a share of its anchor's score, so
   it enters only where it is likely evidence (blind expansion wastes budget);
4. greedy packing by score under the hard token cap (headers included);
5. chronological order, grouped by session with its date.

The scoring, packing and rendering functions are pure and take plain data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from localmem import search
from localmem.errors import InputError
from localmem.records import Context, EvidenceTurn
from localmem.search import Filter, TurnRow
from localmem.text import count_words, display_time, parse_time, tokens_for_words, words_for_tokens

if TYPE_CHECKING:
    from localmem.store import Store


@dataclass
class Candidate:
    turn_id: int
    score: float
    reason: str  # anchor / temporal / semantic
    why: str = ""


def rrf(
    lists: Sequence[Sequence[tuple[int, float]]], k: float, weights: Sequence[float] | None = None
) -> dict[int, float]:
    """Reciprocal-rank fusion: sum over lists of w / (k + rank), rank from 1."""
    out: dict[int, float] = {}
    for li, ranked in enumerate(lists):
        w = 1.0 if weights is None else weights[li]
        for rank, (tid, _score) in enumerate(ranked, start=1):
            out[tid] = out.get(tid, 0.0) + w / (k + rank)
    return out


def header_line(row: TurnRow) -> str:
    return f"# {display_time(row.session_started or row.ts)} (session {row.session_key})"


def turn_line(row: TurnRow) -> str:
    return f"{row.speaker}: {row.text}" if row.speaker else row.text


def pack(cands: Sequence[Candidate], rows: dict[int, TurnRow], budget_tokens: int) -> list[Candidate]:
    """Best-first greedy fill of the word budget; a turn that does not fit is skipped
    and smaller ones are still tried. A session header is paid once, with its first turn."""
    cap = words_for_tokens(budget_tokens)
    used = 0
    sessions: set[int] = set()
    chosen: list[Candidate] = []
    for c in sorted(cands, key=lambda c: (-c.score, c.turn_id)):
        row = rows[c.turn_id]
        cost = count_words(turn_line(row))
        if row.session_id not in sessions:
            cost += count_words(header_line(row))
        if used + cost > cap:
            continue
        used += cost
        sessions.add(row.session_id)
        chosen.append(c)
    return chosen


def render(chosen: Sequence[Candidate], rows: dict[int, TurnRow]) -> tuple[str, list[Candidate]]:
    """Chronological text grouped by session; returns the text and candidates in that order."""
    ordered = sorted(
        chosen,
        key=lambda c: (
            rows[c.turn_id].session_started or rows[c.turn_id].ts or "",
            rows[c.turn_id].session_id,
            rows[c.turn_id].ord,
        ),
    )
    lines: list[str] = []
    current: int | None = None
    for c in ordered:
        row = rows[c.turn_id]
        if row.session_id != current:
            if lines:
                lines.append("")
            lines.append(header_line(row))
            current = row.session_id
        lines.append(turn_line(row))
    return "\n".join(lines), ordered


def reconstruct(
    store: Store, query: str, *, budget_tokens: int, as_of: str | None = None, scope: str | None = None
) -> Context:
    if not query or not query.strip():
        raise InputError("query is empty")
    if budget_tokens <= 0:
        raise InputError(f"budget_tokens must be positive, got {budget_tokens}")
    if budget_tokens > store.settings.max_budget_tokens:
        raise InputError(f"budget_tokens {budget_tokens} exceeds the cap of {store.settings.max_budget_tokens}")
    try:
        flt = Filter(as_of=parse_time(as_of) if as_of else None, scope=scope)
    except ValueError as exc:
        raise InputError(f"as_of: {exc}") from exc
    p = store.params
    conn = store.conn
    qvec = store.embedder.embed([query])[0]
    lists = [
        search.dense(conn, store.mirror("turn"), qvec, p.candidates, flt),
        search.dense(conn, store.mirror("cue"), qvec, p.candidates, flt),
        search.lexical_turns(conn, query, p.candidates, flt),
        search.lexical_cues(conn, query, p.candidates, flt),
    ]
    fused = rrf(lists, p.rrf_k)
    cands = {t: Candidate(t, s, "anchor") for t, s in fused.items()}
    if p.expand_neighbours and cands:
        _expand(store, qvec, cands, flt)
    rows = search.turn_rows(conn, cands)
    cands = {t: c for t, c in cands.items() if t in rows}
    chosen = pack(list(cands.values()), rows, budget_tokens)
    text, ordered = render(chosen, rows)
    evidence = tuple(
        EvidenceTurn(
            turn_id=c.turn_id,
            source_id=rows[c.turn_id].source_id,
            session=rows[c.turn_id].session_key,
            session_id=rows[c.turn_id].session_id,
            timestamp=rows[c.turn_id].ts,
            speaker=rows[c.turn_id].speaker,
            text=rows[c.turn_id].text,
            reason=c.reason,
            score=round(c.score, 6),
            tokens=tokens_for_words(count_words(turn_line(rows[c.turn_id]))),
            why=c.why,
        )
        for c in ordered
    )
    tokens = tokens_for_words(count_words(text))
    return Context(
        query=query,
        text=text,
        tokens=tokens,
        budget_tokens=budget_tokens,
        turns=evidence,
        stats={"candidates": len(cands), "anchors": len(fused)},
    )


def _expand(store: Store, qvec: np.ndarray, cands: dict[int, Candidate], flt: Filter) -> None:
    """Score one-hop neighbours of the best anchors against the query; add those whose
    combined score beats the anchors they would displace."""
    p = store.params
    top = sorted(cands.values(), key=lambda c: -c.score)[:20]
    seeds = {c.turn_id: c.score for c in top}
    pairs = [(a, b, "temporal") for a, b in search.session_neighbours(store.conn, seeds, p.temporal_window)]
    pairs += [(a, b, k) for a, b, k, _w, _r in search.edges_of(store.conn, seeds, ("semantic",))]
    new = sorted({b for _a, b, _k in pairs if b not in cands})
    new = sorted(search._visible(store.conn, new, flt)) if flt.active else new
    if not new:
        return
    sims = search.turn_vectors(store.conn, new, store.embedder.dim) @ qvec
    sim_of = dict(zip(new, sims.tolist(), strict=True))
    top_score = max(seeds.values())
    for a, b, kind in pairs:
        if b not in sim_of:
            continue
        score = 0.5 * seeds[a] + top_score * max(0.0, sim_of[b])
        prev = cands.get(b)
        if prev is None or score > prev.score:
            cands[b] = Candidate(b, score, kind, f"linked to turn {a}")
