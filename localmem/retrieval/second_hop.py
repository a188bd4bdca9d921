"""A second hop at read time, model-free: the first pass's best turns widen the query.

Evidence the question does not resemble is often reachable from evidence it does (a
person, a place, an event named in the first pass's best turns). From the ``seeds`` most
probable turns of the first pool, the named entities and rarest content words that the
question lacks are appended to it; the widened query gets its own pool from the same
read path, scored by the same learned weights. Its turns that the first pool lacks join
the first pool with ``discount`` times their probability (reason ``second_hop``); turns
in both keep the first pool's row. Packing then decides on probability per word as for
every candidate. No model call, no write. Off by default; ``retrieval.second_hop`` is
the discount (docs/cable.md, "A second hop").
"""

from __future__ import annotations

import numpy as np

from localmem.retrieval.pool import Pool, candidate_pool
from localmem.retrieval.scorer import DEFAULT_WEIGHTS, Weights
from localmem.storage.reads import queries
from localmem.storage.reads.queries import STOPWORDS, Filter
from localmem.storage.write.store import Store

_MAX_TERMS = 6


def stem(word: str) -> str:
    """A crude stem (plural and possessive endings off, 7 letters), enough to skip words the query has."""
    w = word.removesuffix("'s").rstrip("s")
    return w[:7]


def widened_query(query: str, texts: list[str], df: dict[str, int] | None = None) -> str:
    """``query`` plus up to six words of ``texts`` it lacks: capitalised ones first, then
    the longest (a stand-in for rare when no document frequencies are given)."""
    have = {stem(w.lower()) for w in query.split()}
    cands: dict[str, tuple[int, int]] = {}
    for text in texts:
        for w in text.replace("’", "'").split():
            w = w.strip(".,!?;:\"'()[]")
            low = w.lower()
            if len(w) < 3 or low in STOPWORDS or stem(low) in have or not w.isalpha():
                continue
            key = (0 if w[0].isupper() else 1, -(df or {}).get(low, -len(w)))
            cands[w] = min(cands.get(w, key), key)
    extra = sorted(cands, key=lambda w: cands[w])[:_MAX_TERMS]
    return " ".join([query, *extra]) if extra else query


def second_pool(
    store: Store,
    query: str,
    pool: Pool,
    prob: np.ndarray,
    flt: Filter,
    seeds: int = 3,
    weights: Weights = DEFAULT_WEIGHTS,
    discount: float = 1.0,
    every_feature: bool = False,
) -> tuple[Pool, np.ndarray, str]:
    """The first pool joined with the widened query's new candidates, their probabilities
    (the new ones times ``discount``), and the widened query. ``every_feature`` computes
    the widened pool's zero-weight features too, as a traced first pool has them, so the
    joined rows explain alike."""
    top = [int(pool.turn_ids[j]) for j in np.argsort(-prob, kind="stable")[:seeds]]
    rows = queries.turn_rows(store.conn, top)
    q2 = widened_query(query, [rows[t].text for t in top if t in rows])
    if q2 == query:
        return pool, prob, q2
    pool2 = candidate_pool(store, q2, flt, None if every_feature else weights)
    if pool2 is None:
        return pool, prob, q2
    new = ~np.isin(pool2.turn_ids, pool.turn_ids)
    if not new.any():
        return pool, prob, q2
    prob2 = discount * weights.probability(pool2.feats)[new]
    idx = np.flatnonzero(new)
    merged = Pool(
        np.concatenate([pool.turn_ids, pool2.turn_ids[new]]),
        np.vstack([pool.feats, pool2.feats[new]]),
        np.concatenate([pool.words, pool2.words[new]]),
        [*pool.reasons, *(("second_hop", f"found by the widened query: {pool2.reasons[j][1]}") for j in idx)],
        pool.anchors,
        pool.qvec,
        pool.visible,
        pool.best_sim,
    )
    return merged, np.concatenate([prob, prob2]), q2
