"""Query -> anchors -> selective expansion -> budgeted, chronological context. No LLM.

Pipeline ("CuePack"; CueMem 4.3-4.4 with learned, selective expansion):
1. embed the query; four ranked lists of turns, top-m each: turn bm25 (FTS5), turn
   cosine, statement-cue cosine and cue bm25 (a cue votes for its source turn once);
2. anchors = the union of the lists, with their reciprocal-rank-fusion score;
3. one-hop expansion: same-session neighbours within the temporal window and
   semantic-edge neighbours of the best anchors join the pool;
4. every pool turn gets the features of ``localmem/scorer.py`` and a probability of
   being evidence; neighbours are never added blindly, they compete on that score;
5. greedy packing by probability per word under the hard token cap (session headers
   included); chronological rendering grouped by session with its date.

Dense lists and features come from the in-memory mirrors (``localmem/vectors.py``),
lexical ones from FTS5. ``pack`` and ``render`` are pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from localmem import search
from localmem.errors import InputError
from localmem.records import Context, EvidenceTurn
from localmem.scorer import DEFAULT_WEIGHTS, Weights, log_words, mentioned_speaker, value_order
from localmem.search import Filter, TurnRow
from localmem.text import count_words, display_time, parse_time, tokens_for_words, words_for_tokens

if TYPE_CHECKING:
    from localmem.store import Store
    from localmem.vectors import TurnMirror, VectorMirror


@dataclass
class Candidate:
    turn_id: int
    score: float
    reason: str  # anchor / temporal / semantic / extracted
    why: str = ""


def rrf(lists: Sequence[Sequence[tuple[int, float]]], k: float) -> dict[int, float]:
    """Reciprocal-rank fusion: sum over lists of 1 / (k + rank), rank from 1."""
    out: dict[int, float] = {}
    for ranked in lists:
        for rank, (tid, _score) in enumerate(ranked, start=1):
            out[tid] = out.get(tid, 0.0) + 1.0 / (k + rank)
    return out


def header_line(row: TurnRow) -> str:
    return f"# {display_time(row.session_started or row.ts)} (session {row.session_key})"


def turn_line(row: TurnRow) -> str:
    return f"{row.speaker}: {row.text}" if row.speaker else row.text


def line_words(row: TurnRow) -> int:
    """Words of ``turn_line(row)``: the turn's own and its speaker's."""
    return row.words + len(row.speaker.split())


def pack(cands: Sequence[Candidate], rows: dict[int, TurnRow], budget_tokens: int) -> list[Candidate]:
    """Fill the word budget in the given order; a turn that does not fit is skipped and
    smaller ones are still tried. A session header is paid once, with its first turn."""
    cap = words_for_tokens(budget_tokens)
    used = 0
    sessions: set[int] = set()
    chosen: list[Candidate] = []
    for c in cands:
        row = rows[c.turn_id]
        cost = line_words(row)
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

    def key(c: Candidate) -> tuple[str, int, int]:
        r = rows[c.turn_id]
        return (r.session_started or r.ts or "", r.session_id, r.ord)

    ordered = sorted(chosen, key=key)
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
    store: Store,
    query: str,
    *,
    budget_tokens: int,
    as_of: str | None = None,
    scope: str | None = None,
    weights: Weights = DEFAULT_WEIGHTS,
) -> Context:
    if not query or not query.strip():
        raise InputError("query is empty")
    check_budget(store, budget_tokens)
    try:
        flt = Filter(as_of=parse_time(as_of) if as_of else None, scope=scope)
    except ValueError as exc:
        raise InputError(f"as_of: {exc}") from exc
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
    rows = search.turn_rows(store.conn, [c.turn_id for c in cands])
    chosen = pack(cands, rows, budget_tokens)
    added = 0
    if store.params.cable:
        from localmem.expansion import expand

        chosen, added = expand(store, pool.qvec, pool.visible, chosen, rows, budget_tokens)
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


@dataclass
class _Signals:
    """Per-query scores over every mirror row (invisible rows: -inf or 0)."""

    tsims: np.ndarray  # cosine to each turn
    best_turn_sim: float
    csims: np.ndarray  # cosine to each cue
    best_cue_sim: float
    bm: np.ndarray  # bm25 of each turn, 0 if no match
    cbs: np.ndarray  # bm25 of each cue, 0 if no match
    lists: list[list[int]]  # the four ranked lists, as turn mirror positions
    extra: list[int]  # turns proposed by model-extracted cues (RetrievalParams.extracted_cues == "fill")
    qvec: np.ndarray


def _signals(store: Store, tm: TurnMirror, query: str, visible: np.ndarray, m: int) -> _Signals:
    cm = store.mirror("cue")
    qvec = store.embedder.embed([query])[0].astype(np.float32)
    tsims = tm.mat @ qvec
    tsims_v = np.where(visible, tsims, -np.inf)
    csims = cm.mat @ qvec
    cue_pos = store.cue_turn_positions()
    cue_ok = (cue_pos >= 0) & visible[np.maximum(cue_pos, 0)]
    # Model-extracted cues (``RetrievalParams.extracted_cues``): "all" treats them like
    # statement cues; "fill" keeps every list and feature model-free (what the scorer
    # was fitted on) and lets them only propose extra candidates, packed last; "off"
    # ignores them.
    mode = store.params.extracted_cues
    extracted = cue_ok & ~cm.statement
    if mode != "all":
        cue_ok = cue_ok & cm.statement
        csims = np.where(cm.statement, csims, -np.inf)
    csims_v = np.where(cue_ok, csims, -np.inf)
    bm = _lexical_array(store, "turns_fts", query, tm, visible)
    cbs = _lexical_array(store, "cues_fts", query, cm, cue_ok)
    extra: list[int] = []
    if mode != "off" and extracted.any():
        xbm = _lexical_array(store, "extracted_cues_fts", query, cm, extracted)
        if mode == "all":
            cbs = cbs + xbm  # disjoint rows
        else:
            xdense = np.where(extracted, cm.mat @ qvec, -np.inf)
            extra = _first_turns(cue_pos[_top(xdense, m)], m) + _first_turns(
                cue_pos[_top(np.where(xbm > 0, xbm, -np.inf), m)], m
            )
    lists = [
        [int(i) for i in _top(np.where(bm > 0, bm, -np.inf), m)],
        [int(i) for i in _top(tsims_v, m)],
        _first_turns(cue_pos[_top(csims_v, m)], m),
        _first_turns(cue_pos[_top(np.where(cbs > 0, cbs, -np.inf), m)], m),
    ]
    return _Signals(
        tsims=tsims,
        best_turn_sim=float(tsims_v.max()) if visible.any() else 0.0,
        csims=csims,
        best_cue_sim=float(csims_v.max()) if cue_ok.any() else 0.0,
        bm=bm,
        cbs=cbs,
        lists=lists,
        extra=extra,
        qvec=qvec,
    )


def _lexical_array(store: Store, table: str, query: str, mirror: VectorMirror, ok: np.ndarray) -> np.ndarray:
    # Under a filter the best matches may all be invisible: then rank every match.
    share = store.params.common_term_share
    common = (share, len(mirror.ids)) if share < 1.0 else None
    ids, scores = search.lexical(store.conn, table, query, limit=1000 if ok.all() else -1, common=common)
    out = np.zeros(len(mirror.ids))
    pos = mirror.index_of(ids)
    keep = (pos >= 0) & ok[np.maximum(pos, 0)] & (scores > 0)
    out[pos[keep]] = scores[keep]
    return out


def _expand(store: Store, tm: TurnMirror, anchors: dict[int, float], visible: np.ndarray) -> dict[int, tuple[str, str]]:
    """Pool membership with the reason each turn is in it: anchors, their same-session
    neighbours within the temporal window, semantic-edge neighbours of the best anchors."""
    p = store.params
    reason: dict[int, tuple[str, str]] = {pos: ("anchor", "") for pos in anchors}
    apos = np.array(sorted(anchors), dtype=np.int64)
    for d in range(1, p.temporal_window + 1):
        for off in (-d, d):
            for a, n in zip(apos, tm.neighbour(apos, off), strict=True):
                if n >= 0 and visible[n] and int(n) not in reason:
                    reason[int(n)] = ("temporal", f"{d} turn(s) from turn {int(tm.ids[a])}")
    if p.semantic_seeds > 0:
        seeds = sorted(anchors, key=lambda x: -anchors[x])[: p.semantic_seeds]
        edges = search.edges_of(store.conn, [int(tm.ids[s]) for s in seeds], ("semantic",))
        targets = tm.index_of(np.array([b for _a, b, *_ in edges], dtype=np.int64))
        for (a, *_rest), n in zip(edges, targets, strict=True):
            if n >= 0 and visible[n] and int(n) not in reason:
                reason[int(n)] = ("semantic", f"semantic edge from turn {a}")
    return reason


def _features(
    query: str, tm: TurnMirror, cues: VectorMirror, sig: _Signals, anchors: dict[int, float], pool: np.ndarray
) -> np.ndarray:
    """The scorer's feature matrix for the pool (see localmem/scorer.py)."""
    pool_ids = tm.ids[pool]
    f_bm = sig.bm[pool] / max(float(sig.bm.max()), 1e-9)
    f_de = sig.tsims[pool] - sig.best_turn_sim

    cue_rows = np.nonzero(np.isin(cues.turns, pool_ids))[0]
    owner = np.searchsorted(pool_ids, cues.turns[cue_rows])  # pool is sorted, so are its ids
    cd = np.full(len(pool), -np.inf)
    np.maximum.at(cd, owner, sig.csims[cue_rows])
    f_cd = np.where(np.isfinite(cd), cd - sig.best_cue_sim, -1.0)
    cb = np.zeros(len(pool))
    np.maximum.at(cb, owner, sig.cbs[cue_rows])
    f_cb = cb / max(float(sig.cbs.max()) if len(sig.cbs) else 0.0, 1e-9)

    who = mentioned_speaker(query, sorted({tm.speaker[i] for i in pool}))
    f_spk = np.array([1.0 if who is not None and tm.speaker[i] == who else 0.0 for i in pool])

    r4 = np.zeros(len(tm.ids) + 1)  # last slot stands for "no neighbour"
    for pos, v in anchors.items():
        r4[pos] = v
    f_nb = []
    for d in (1, 2):
        best = np.zeros(len(pool))
        for off in (-d, d):
            best = np.maximum(best, r4[tm.neighbour(pool, off)])  # -1 indexes the zero slot
        f_nb.append(best)
    sess = tm.session[pool]
    uniq, inv = np.unique(sess, return_inverse=True)
    sbest = np.zeros(len(uniq))
    np.maximum.at(sbest, inv, r4[pool])
    words = tm.line_words[pool]
    return np.stack([f_bm, f_de, f_cd, f_cb, f_spk, f_nb[0], f_nb[1], sbest[inv], log_words(words)], axis=1)


@dataclass
class Pool:
    """The candidate turns of one query with their features (rows follow ``turn_ids``)."""

    turn_ids: np.ndarray
    feats: np.ndarray
    words: np.ndarray
    reasons: list[tuple[str, str]]
    anchors: int
    qvec: np.ndarray  # the query's embedding
    visible: np.ndarray  # over the turn mirror: what the query's filter lets through


def candidate_pool(store: Store, query: str, flt: Filter) -> Pool | None:
    """Anchors + expansion + features for a query; None when nothing is visible/matches."""
    tm = store.turn_mirror()
    if len(tm.ids) == 0:
        return None
    visible = visible_mask(store, tm, flt)
    sig = _signals(store, tm, query, visible, store.params.candidates)
    fused = rrf([[(t, 0.0) for t in lst] for lst in sig.lists], store.params.rrf_k)
    if not fused:
        return None
    best = max(fused.values())
    anchors = {pos: v / best for pos, v in fused.items()}
    reason = _expand(store, tm, anchors, visible)
    for pos in sig.extra:  # candidates only: no anchor score, so no other turn's features change
        reason.setdefault(pos, ("extracted", "matched a model-extracted cue"))
    pool = np.array(sorted(reason), dtype=np.int64)  # mirror order = chronological tie-break
    feats = _features(query, tm, store.mirror("cue"), sig, anchors, pool)
    return Pool(
        tm.ids[pool], feats, tm.line_words[pool], [reason[int(i)] for i in pool], len(anchors), sig.qvec, visible
    )


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    finite = int(np.isfinite(scores).sum())
    k = min(k, finite)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    idx = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    return idx[np.argsort(-scores[idx], kind="stable")]


def _first_turns(turn_pos: np.ndarray, m: int) -> list[int]:
    seen: set[int] = set()
    out: list[int] = []
    for t in turn_pos:
        t = int(t)
        if t >= 0 and t not in seen:
            seen.add(t)
            out.append(t)
            if len(out) >= m:
                break
    return out


def visible_mask(store: Store, tm: TurnMirror, flt: Filter) -> np.ndarray:
    ok = np.ones(len(tm.ids), dtype=bool)
    if flt.before is not None:
        ok &= earlier_mask(tm, flt.before)
    if flt.as_of is not None:
        ok &= (tm.ts == "") | (tm.ts <= flt.as_of)
    if flt.scope is not None:
        ok &= np.isin(tm.session, np.array(search.scope_sessions(store.conn, flt.scope), dtype=np.int64))
    return ok


def earlier_mask(tm: TurnMirror, turn_id: int) -> np.ndarray:
    """Turns strictly before ``turn_id`` in conversation order: (time, session, place).
    Undated turns sort before dated ones. A turn missing from the mirror has none."""
    pos = int(tm.index_of(np.array([turn_id], dtype=np.int64))[0])
    if pos < 0:
        return np.zeros(len(tm.ids), dtype=bool)
    ts, sess, o = tm.ts[pos], tm.session[pos], tm.ord[pos]
    same = tm.ts == ts
    mask: np.ndarray = (tm.ts < ts) | (same & (tm.session < sess)) | (same & (tm.session == sess) & (tm.ord < o))
    return mask


def retrieve(
    store: Store, query: str, flt: Filter, k: int, weights: Weights = DEFAULT_WEIGHTS
) -> list[tuple[int, float]]:
    """The read path's ranking without the budget: the ``k`` pool turns most likely to
    be evidence for ``query``, as (turn id, probability), best first. CABLE's
    construction searches with this, so its links complement what reconstruct finds."""
    pool = candidate_pool(store, query, flt)
    if pool is None:
        return []
    prob = weights.probability(pool.feats)
    top = np.argsort(-prob, kind="stable")[:k]
    return [(int(pool.turn_ids[j]), float(prob[j])) for j in top]
