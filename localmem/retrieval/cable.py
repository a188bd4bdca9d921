"""CABLE's read-time expansion: packed turns -> antecedent neighbours -> replacements. No LLM.

After ``reconstruct`` has packed its result R0 (in rank order, best first):

1. seeds S = turns of R0 whose cosine to the query is at least ``cable_tau``;
2. candidates U = one-hop neighbours of the seeds over ``antecedent`` edges, incoming
   (earlier context of a seed) and outgoing (a later turn the seed helps explain),
   minus R0, minus what the query's filter hides (as_of, scope);
3. score(c) = sum over the seeds linked to c of cosine(c, seed);
4. greedily by score: c is accepted when its cosine to every turn of the current result
   (R0 and the turns accepted before it) is below ``cable_theta``, at most
   ``cable_budget`` turns;
5. each accepted turn takes budget left unused by the packer first, then REPLACES the
   lowest-ranked turns of R0 (least probable evidence first) until it fits; seeds that brought an accepted turn in are
   never evicted. A turn that cannot fit is skipped. The token cap holds throughout.
   Turns with a probability of being evidence of at least ``cable_keep_p`` are never
   replaced. Added turns together take at most ``cable_share`` of the budget: the paper replaces
   up to half of a 10-entry result, but on a token budget five added turns can be the
   whole context, and with the small local models we measured most links were wrong
   (README, "Antecedent links").

Invariants: the result never exceeds the budget; an accepted turn carries reason
``antecedent`` and the verifier's reason of its strongest link; nothing here calls a
model or writes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from localmem.retrieval.packing import Candidate, context_words, line_words
from localmem.storage.reads import queries
from localmem.storage.reads.queries import TurnRow
from localmem.storage.vectors.stored import turn_vectors
from localmem.storage.write.store import Store
from localmem.util.text import words_for_tokens


@dataclass(frozen=True)
class Link:
    seed: int  # turn id of the seed
    other: int  # turn id of the neighbour
    earlier: bool  # True: the neighbour is the antecedent (edge other -> seed)
    reason: str


def antecedent_links(store: Store, seeds: list[int]) -> list[Link]:
    """Antecedent edges touching ``seeds``, seen from the seed's side."""
    return [Link(*e) for e in queries.antecedent_edges(store.conn, seeds)]


def expand(
    store: Store,
    qvec: np.ndarray,
    visible: np.ndarray,
    chosen: list[Candidate],
    rows: dict[int, TurnRow],
    budget_tokens: int,
) -> tuple[list[Candidate], int]:
    """The packed result with up to ``cable_budget`` antecedent turns in place of its
    lowest-ranked ones; also returns how many were added. ``rows`` gains the rows of
    the added turns (the renderer needs them)."""
    p = store.params
    if not chosen or p.cable_budget <= 0:
        return chosen, 0
    tm = store.turn_mirror()
    ids = np.array([c.turn_id for c in chosen], dtype=np.int64)
    pos = tm.index_of(ids)
    vec = _VectorCache(store)
    qsim = vec.of(ids) @ qvec
    seed_pos = {int(t): int(q) for t, q, s in zip(ids, pos, qsim, strict=True) if q >= 0 and s >= p.cable_tau}
    links = antecedent_links(store, sorted(seed_pos))
    in_result = set(ids.tolist())
    pairs: dict[tuple[int, int], Link] = {}
    for link in links:
        if link.other not in in_result:
            pairs.setdefault((link.seed, link.other), link)
    if not pairs:
        return chosen, 0
    keep = list(pairs.values())
    cpos = tm.index_of(np.array([k.other for k in keep], dtype=np.int64))
    ok = (cpos >= 0) & visible[np.maximum(cpos, 0)]
    keep = [k for k, good in zip(keep, ok, strict=True) if good]
    cpos = cpos[ok]
    if not keep:
        return chosen, 0
    spos = np.array([seed_pos[k.seed] for k in keep], dtype=np.int64)
    others = np.array([k.other for k in keep], dtype=np.int64)
    sims = np.einsum("ij,ij->i", vec.of(others), vec.of(tm.ids[spos]))
    score: dict[int, float] = {}
    best: dict[int, tuple[float, Link, int]] = {}
    for k, sim, cp in zip(keep, sims.tolist(), cpos.tolist(), strict=True):
        score[k.other] = score.get(k.other, 0.0) + sim
        if k.other not in best or sim > best[k.other][0]:
            best[k.other] = (sim, k, cp)

    ranked = sorted(score, key=lambda t: (-score[t], t))
    result = list(chosen)
    rmat = vec.of(ids[pos >= 0])
    protected: set[int] = set()
    cap = words_for_tokens(budget_tokens)
    share_cap = p.cable_share * cap
    share_used = 0
    added = 0
    for i, cand in enumerate(ranked):
        if added >= p.cable_budget:
            break
        if cand not in rows:  # rows of the next few candidates, fetched as they are reached
            rows.update(queries.turn_rows(store.conn, [t for t in ranked[i : i + 32] if t not in rows]))
        cost = line_words(rows[cand])
        if share_used + cost > share_cap:
            continue
        _sim, link, _cp = best[cand]
        cvec = vec.of(np.array([cand], dtype=np.int64))[0]
        if len(rmat) and float(np.max(rmat @ cvec)) >= p.cable_theta:
            continue
        trial = _fit(result, cand, rows, cap, protected | {link.seed}, p.cable_keep_p)
        if trial is None:
            continue
        side = f"earlier context of turn {link.seed}" if link.earlier else f"follows from turn {link.seed}"
        why = f"{side}: {link.reason}" if link.reason else side
        result = [*trial, Candidate(cand, round(score[cand], 6), "antecedent", why)]
        rids = np.array([c.turn_id for c in result], dtype=np.int64)
        rmat = vec.of(rids[tm.index_of(rids) >= 0])
        protected.add(link.seed)
        share_used += cost
        added += 1
    return result, added


class _VectorCache:
    """Exact turn vectors read from the store once each (the mirrors hold only codes)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.held: dict[int, np.ndarray] = {}

    def of(self, ids: np.ndarray) -> np.ndarray:
        missing = sorted({int(i) for i in ids} - self.held.keys())
        if missing:
            got = turn_vectors(self.store.conn, missing, self.store.embedder.dim)
            self.held.update(zip(missing, got, strict=True))
        dim = self.store.embedder.dim
        return np.array([self.held[int(i)] for i in ids], dtype=np.float32).reshape(len(ids), dim)


def _fit(
    result: list[Candidate], cand: int, rows: dict[int, TurnRow], cap: int, protected: set[int], keep_p: float
) -> list[Candidate] | None:
    """``result`` minus as few of its lowest-ranked (least probable evidence),
    unprotected turns as it takes for ``cand`` to fit in ``cap`` words; None if it
    cannot fit. Added turns (reason antecedent) are never evicted for a later one."""
    keep = list(result)
    while context_words([*(c.turn_id for c in keep), cand], rows) > cap:
        movable = [
            i
            for i, c in enumerate(keep)
            if c.turn_id not in protected and c.reason != "antecedent" and c.score < keep_p
        ]
        if not movable:
            return None
        del keep[min(movable, key=lambda i: (keep[i].score, -i))]
    return keep
