"""Query -> candidate pool -> scored -> packed -> CABLE expansion -> context. No LLM.

Orchestration only ("CuePack"; CueMem 4.3-4.4 with learned, selective expansion): the
pool and its features come from ``pool``, the probability of being evidence from
``scorer``, budgeted packing and rendering from ``packing``, antecedent expansion from
``cable``; under ``retrieval.second_hop`` (off by default) the pool is joined with a
widened query's (``second_hop``) before packing. Neighbours are never added blindly:
they compete on the scorer's probability per word under the hard token cap.

One read path: ``trace`` explains a read by giving ``reconstruct`` a :class:`Recorder`,
never by running the steps itself. Without one the path does no extra work (one
``is None`` test); with one, the pool computes every feature (also those the weights
leave 0, which cannot change a probability) and the rows of every ranked candidate are
read in the read's own snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from localmem.errors import InputError
from localmem.records import Context, EvidenceTurn, ProjectScope
from localmem.retrieval import cable
from localmem.retrieval import scope as scopes
from localmem.retrieval.packing import Candidate, pack, render, turn_line
from localmem.retrieval.pool import Pool, candidate_pool
from localmem.retrieval.scorer import Weights, value_order
from localmem.retrieval.scorer_file import weights_for
from localmem.retrieval.second_hop import second_pool
from localmem.storage.reads import queries
from localmem.storage.reads.queries import Filter, TurnRow
from localmem.storage.write.store import Store
from localmem.util.text import count_words, parse_time, tokens_for_words


def reconstruct(
    store: Store,
    query: str,
    budget_tokens: int | None = None,
    as_of: str | None = None,
    scope: str | ProjectScope | None = None,
    *,
    weights: Weights | None = None,
    recorder: Recorder | None = None,
    exclude_session: str | None = None,
) -> Context:
    """The context of at most ``budget_tokens`` (default: the configured budget) that
    best answers ``query``, seen as of ``as_of`` and within ``scope`` when given (a
    source or session key, or a project: ``project:PATH`` or a ``ProjectScope``; see
    ``retrieval.scope``). ``recorder``, when given, keeps what the read decided (``trace``).
    ``exclude_session``: a session key whose turns are left out (an agent's current session,
    which its context holds already). ``weights``: the scorer's (default: those of the
    embedder that reads, ``scorer_file.weights_for``)."""
    budget_tokens, flt = read_args(store, query, budget_tokens, as_of, scope)
    if exclude_session:
        flt = replace(flt, exclude=exclude_session)
    with store.snapshot():  # pool, rows and CABLE read one commit, whoever writes meanwhile
        # inside the snapshot: a store that follows a reembed reads with the new embedder
        weights = weights_for(store.embedder) if weights is None else weights
        pool = candidate_pool(store, query, flt, weights if recorder is None else None)
        if pool is None:
            return Context(query, "", 0, budget_tokens, (), {"candidates": 0})
        prob = weights.probability(pool.feats)
        if store.params.second_hop > 0:
            pool, prob, _widened = second_pool(
                store,
                query,
                pool,
                prob,
                flt,
                weights=weights,
                discount=store.params.second_hop,
                every_feature=recorder is not None,
            )
        keep, prob = scopes.narrow(store, pool.turn_ids, prob, flt)
        if keep is not None:
            pool = pool.subset(keep)
        return assemble(store, query, pool, prob, budget_tokens, recorder)


def read_args(
    store: Store, query: str, budget_tokens: int | None, as_of: str | None, scope: str | ProjectScope | None
) -> tuple[int, Filter]:
    """The checked budget (default: the configured one) and the filter of a read."""
    budget_tokens = store.settings.budget_tokens if budget_tokens is None else budget_tokens
    if not query or not query.strip():
        raise InputError("query is empty")
    check_budget(store, budget_tokens)
    try:
        named, project = scopes.split(scope)
        return budget_tokens, Filter(as_of=parse_time(as_of) if as_of else None, scope=named, project=project)
    except ValueError as exc:
        raise InputError(f"as_of: {exc}") from exc


def check_budget(store: Store, budget_tokens: int) -> None:
    if budget_tokens <= 0:
        raise InputError(f"budget_tokens must be positive, got {budget_tokens}")
    if budget_tokens > store.settings.max_budget_tokens:
        raise InputError(f"budget_tokens {budget_tokens} exceeds the cap of {store.settings.max_budget_tokens}")


@dataclass
class Selection:
    """What packing made of a scored pool: every candidate in packing order, what the
    packer chose, and the final choice after CABLE's expansion (``added`` turns).
    ``rows`` holds the rows read: every chosen turn's, not every candidate's (packing
    skips unread the turns too long for what is left)."""

    ranked: list[Candidate]
    rows: dict[int, TurnRow]
    packed: list[Candidate]
    chosen: list[Candidate]
    added: int


def select(store: Store, pool: Pool, prob: np.ndarray, budget_tokens: int) -> Selection:
    """Pack a scored pool into the budget (best evidence per word first), then let CABLE
    expand it."""
    order = value_order(prob, pool.words)
    # Turns only a model-extracted cue proposed pack after every model-free candidate:
    # they can use budget left over, never take a place the model-free ranking chose.
    late = np.array([pool.reasons[j][0] == "extracted" for j in order], dtype=bool)
    order = np.concatenate([order[~late], order[late]]) if late.any() else order
    cands = [Candidate(int(pool.turn_ids[j]), float(prob[j]), *pool.reasons[j]) for j in order]
    rows: dict[int, TurnRow] = {}  # read as packing reaches them: most of a pool never fits

    def fetch(ids: list[int]) -> dict[int, TurnRow]:
        return queries.turn_rows(store.conn, ids)

    packed = pack(cands, rows, budget_tokens, words=[int(pool.words[j]) for j in order], fetch=fetch)
    chosen, added = packed, 0
    if store.params.cable:
        chosen, added = cable.expand(store, pool.qvec, pool.visible, packed, rows, budget_tokens)
    return Selection(cands, rows, packed, chosen, added)


@dataclass
class Recorder:
    """What one read decided, kept for explaining it: the scored pool (every feature
    computed), the selection, and the row of every ranked candidate. Empty (``pool``
    None) when nothing was visible or matched."""

    pool: Pool | None = None
    prob: np.ndarray | None = None
    selection: Selection | None = None

    def keep(self, store: Store, pool: Pool, prob: np.ndarray, sel: Selection) -> None:
        self.pool, self.prob, self.selection = pool, prob, sel
        # Packing reads only the rows that could fit; an explanation shows every candidate.
        missing = [c.turn_id for c in sel.ranked if c.turn_id not in sel.rows]
        sel.rows.update(queries.turn_rows(store.conn, missing))


def assemble(
    store: Store, query: str, pool: Pool, prob: np.ndarray, budget_tokens: int, recorder: Recorder | None = None
) -> Context:
    """Pack a scored pool into the budget and render it."""
    sel = select(store, pool, prob, budget_tokens)
    if recorder is not None:
        recorder.keep(store, pool, prob, sel)
    return context_of(query, pool, sel, budget_tokens)


def context_of(query: str, pool: Pool, sel: Selection, budget_tokens: int) -> Context:
    """The rendered context of a selection, with each placed turn and why it is there."""
    rows = sel.rows
    text, ordered = render(sel.chosen, rows)
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
    stats = {
        "candidates": len(pool.turn_ids),
        "anchors": pool.anchors,
        "antecedent": sel.added,
        "best_cosine": round(pool.best_sim, 4),
    }
    return Context(query, text, tokens_for_words(count_words(text)), budget_tokens, evidence, stats)
