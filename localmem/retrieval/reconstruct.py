"""Query -> candidate pool -> scored -> packed -> CABLE expansion -> context. No LLM.

Orchestration only ("CuePack"; CueMem 4.3-4.4 with learned, selective expansion): the
pool and its features come from ``pool``, the probability of being evidence from
``scorer``, budgeted packing and rendering from ``packing``, antecedent expansion from
``cable``. Neighbours are never added blindly: they compete on the scorer's probability
per word under the hard token cap.
"""

from __future__ import annotations

import numpy as np

from localmem.errors import InputError
from localmem.records import Context, EvidenceTurn
from localmem.retrieval import cable
from localmem.retrieval.packing import Candidate, pack, render, turn_line
from localmem.retrieval.pool import Pool, candidate_pool
from localmem.retrieval.scorer import DEFAULT_WEIGHTS, Weights, value_order
from localmem.storage import queries
from localmem.storage.queries import Filter
from localmem.storage.store import Store
from localmem.util.text import count_words, parse_time, tokens_for_words


def reconstruct(
    store: Store,
    query: str,
    budget_tokens: int | None = None,
    as_of: str | None = None,
    scope: str | None = None,
    *,
    weights: Weights = DEFAULT_WEIGHTS,
) -> Context:
    """The context of at most ``budget_tokens`` (default: the configured budget) that
    best answers ``query``, seen as of ``as_of`` and within ``scope`` when given."""
    budget_tokens = store.settings.budget_tokens if budget_tokens is None else budget_tokens
    if not query or not query.strip():
        raise InputError("query is empty")
    check_budget(store, budget_tokens)
    try:
        flt = Filter(as_of=parse_time(as_of) if as_of else None, scope=scope)
    except ValueError as exc:
        raise InputError(f"as_of: {exc}") from exc
    with store.snapshot():  # pool, rows and CABLE read one commit, whoever writes meanwhile
        pool = candidate_pool(store, query, flt)
        if pool is None:
            return Context(query, "", 0, budget_tokens, (), {"candidates": 0})
        return assemble(store, query, pool, weights.probability(pool.feats), budget_tokens)


def check_budget(store: Store, budget_tokens: int) -> None:
    if budget_tokens <= 0:
        raise InputError(f"budget_tokens must be positive, got {budget_tokens}")
    if budget_tokens > store.settings.max_budget_tokens:
        raise InputError(f"budget_tokens {budget_tokens} exceeds the cap of {store.settings.max_budget_tokens}")


def assemble(store: Store, query: str, pool: Pool, prob: np.ndarray, budget_tokens: int) -> Context:
    """Pack a scored pool into the budget (best evidence per word first) and render it."""
    order = value_order(prob, pool.words)
    # Turns only a model-extracted cue proposed pack after every model-free candidate:
    # they can use budget left over, never take a place the model-free ranking chose.
    late = np.array([pool.reasons[j][0] == "extracted" for j in order], dtype=bool)
    order = np.concatenate([order[~late], order[late]]) if late.any() else order
    cands = [Candidate(int(pool.turn_ids[j]), float(prob[j]), *pool.reasons[j]) for j in order]
    rows = queries.turn_rows(store.conn, [c.turn_id for c in cands])
    chosen = pack(cands, rows, budget_tokens)
    added = 0
    if store.params.cable:
        chosen, added = cable.expand(store, pool.qvec, pool.visible, chosen, rows, budget_tokens)
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
    stats = {"candidates": len(pool.turn_ids), "anchors": pool.anchors, "antecedent": added}
    return Context(query, text, tokens_for_words(count_words(text)), budget_tokens, evidence, stats)
