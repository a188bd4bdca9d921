"""The candidate pool of a query and its features. No LLM, no writes.

1. embed the query; four ranked lists of turns, top-m each: turn bm25 (FTS5), turn
   cosine, statement-cue cosine and cue bm25 (a cue votes for its source turn once);
2. anchors = the union of the lists, with their reciprocal-rank-fusion score;
3. one-hop neighbourhood: same-session neighbours within the temporal window and
   semantic-edge neighbours of the best anchors join the pool;
4. every pool turn gets the features of ``localmem/retrieval/scorer.py``.

Dense lists and features come from the in-memory mirrors (``localmem/storage/vectors.py``),
lexical ones from FTS5. Everything a query reads comes from one snapshot of the store
(``Store.snapshot``): FTS rows, session ids and both mirrors agree even while other
processes write or forget, and a cue whose turn is missing from the turn mirror is
ignored (position -1), never used as an index.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np

from localmem.retrieval.packing import rrf
from localmem.retrieval.scorer import DEFAULT_WEIGHTS, Weights, log_words, mentioned_speaker
from localmem.storage import queries
from localmem.storage.queries import Filter
from localmem.storage.store import Store
from localmem.storage.vectors import CueMirror, MirrorView, TurnMirror, VectorMirror
from localmem.util.dates import window


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


def _signals(store: Store, view: MirrorView, query: str, visible: np.ndarray, m: int) -> _Signals:
    tm, cm, cue_pos = view.turn, view.cue, view.cue_pos
    qvec = store.embedder.embed([query])[0].astype(np.float32)
    tsims = tm.mat @ qvec
    tsims_v = np.where(visible, tsims, -np.inf)
    csims = cm.mat @ qvec
    cue_ok = _at(visible, cue_pos)
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
    limit = 1000 if ok.all() else -1  # -1 ranks every match, at most lexical_max_rows of them
    ids, scores = queries.lexical(
        store.conn, table, query, limit, common=common, max_rows=store.params.lexical_max_rows
    )
    out = np.zeros(len(mirror.ids))
    pos = mirror.index_of(ids)
    keep = _at(ok, pos) & (scores > 0)
    out[pos[keep]] = scores[keep]
    return out


def _neighbourhood(
    store: Store, tm: TurnMirror, anchors: dict[int, float], visible: np.ndarray
) -> dict[int, tuple[str, str]]:
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
        edges = queries.edges_of(store.conn, [int(tm.ids[s]) for s in seeds], ("semantic",))
        targets = tm.index_of(np.array([b for _a, b, *_ in edges], dtype=np.int64))
        for (a, *_rest), n in zip(edges, targets, strict=True):
            if n >= 0 and visible[n] and int(n) not in reason:
                reason[int(n)] = ("semantic", f"semantic edge from turn {a}")
    return reason


def _features(
    query: str,
    tm: TurnMirror,
    cues: CueMirror,
    sig: _Signals,
    anchors: dict[int, float],
    pool: np.ndarray,
    as_of: str | None,
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

    speakers = [tm.speaker[i] for i in pool]
    who = mentioned_speaker(query, sorted(set(speakers)))
    f_spk = np.array([1.0 if who is not None and sp == who else 0.0 for sp in speakers])

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
    asst = np.array([1.0 if sp.lower() == "assistant" else 0.0 for sp in speakers])
    q_asst = 1.0 if asks_assistant(query) else 0.0
    f_aq = asst * q_asst
    f_uq = np.array([q_asst if sp.lower() == "user" else 0.0 for sp in speakers])
    ssum = np.zeros(len(uniq))
    np.add.at(ssum, inv, r4[pool])
    cent = _session_mean_sims(tm, uniq, sig.tsims)
    f_sc = cent[inv] - float(cent.max()) if len(cent) else np.zeros(len(pool))
    f_age = relative_age(tm.ts[pool], as_of)
    f_win = in_window(tm.ts[pool], window(query, as_of))
    return np.stack(
        [
            f_bm, f_de, f_cd, f_cb, f_spk, f_nb[0], f_nb[1], sbest[inv], log_words(words),
            asst, f_aq, f_uq, np.log1p(ssum[inv]), f_sc, f_age, f_win,
        ],
        axis=1,
    )  # fmt: skip


def _session_mean_sims(tm: TurnMirror, sessions: np.ndarray, tsims: np.ndarray) -> np.ndarray:
    """Mean cosine of the query to the turns of each of ``sessions`` (sorted ids)."""
    rows = np.nonzero(np.isin(tm.session, sessions))[0]
    which = np.searchsorted(sessions, tm.session[rows])
    sums = np.bincount(which, weights=tsims[rows], minlength=len(sessions))
    counts = np.bincount(which, minlength=len(sessions))
    out: np.ndarray = sums / np.maximum(counts, 1)
    return out


def relative_age(ts: np.ndarray, as_of: str | None) -> np.ndarray:
    """How far back each of the pool's turns (times ``ts``) lies: 0 at the question's
    time (``as_of``, else the newest pool turn), 1 at the oldest pool turn; 0.5 when
    undated or all at one time."""
    out = np.full(len(ts), 0.5)
    have = ts != ""
    if not have.any():
        return out
    stamps = ts[have].astype("datetime64[s]")
    newest = np.datetime64(as_of, "s") if as_of else stamps.max()
    ages = ((newest - stamps) / np.timedelta64(1, "D")).astype(np.float64)
    span = float(ages.max())
    if span > 0:
        out[have] = np.clip(ages / span, 0.0, 1.0)
    return out


WINDOW_SLACK_DAYS = 7  # a session tells of its days' events up to a week later


def in_window(ts: np.ndarray, span: tuple[date, date] | None) -> np.ndarray:
    """1 where a turn's time lies in the question's span (or up to a week after it)."""
    if span is None:
        return np.zeros(len(ts))
    lo = span[0].isoformat()
    hi = (span[1] + timedelta(days=WINDOW_SLACK_DAYS + 1)).isoformat()
    out: np.ndarray = ((ts != "") & (ts >= lo) & (ts < hi)).astype(np.float64)
    return out


_ASKS_ASSISTANT = re.compile(
    r"\b(?:our (?:previous|earlier|last|past) (?:conversation|chat|discussion|exchange)"
    r"|you (?:said|told|mentioned|recommended|suggested|gave|provided|listed|shared|explained)"
    r"|(?:did|were) you|remind me (?:what|of|which|about|the)|in your (?:previous |earlier )?(?:answer|response|reply))",
    re.IGNORECASE,
)


def asks_assistant(query: str) -> bool:
    """True when the query asks about what the assistant said, not the user."""
    return _ASKS_ASSISTANT.search(query) is not None


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
    """Anchors + expansion + features for a query; None when nothing is visible/matches.
    Reads one snapshot of the store (the caller's, when it holds one)."""
    with store.snapshot():
        return _candidate_pool(store, store.mirrors(), query, flt)


def _candidate_pool(store: Store, view: MirrorView, query: str, flt: Filter) -> Pool | None:
    tm = view.turn
    if len(tm.ids) == 0:
        return None
    visible = visible_mask(store, tm, flt)
    sig = _signals(store, view, query, visible, store.params.candidates)
    fused = rrf([[(t, 0.0) for t in lst] for lst in sig.lists], store.params.rrf_k)
    if not fused:
        return None
    best = max(fused.values())
    anchors = {pos: v / best for pos, v in fused.items()}
    reason = _neighbourhood(store, tm, anchors, visible)
    for pos in sig.extra:  # candidates only: no anchor score, so no other turn's features change
        reason.setdefault(pos, ("extracted", "matched a model-extracted cue"))
    pool = np.array(sorted(reason), dtype=np.int64)  # mirror order = chronological tie-break
    feats = _features(query, tm, view.cue, sig, anchors, pool, flt.as_of)
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


def _at(mask: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``mask`` at positions ``pos``; False where a position is -1 (or past the end)."""
    inside = (pos >= 0) & (pos < len(mask))
    out: np.ndarray = inside & mask[np.where(inside, pos, 0)] if len(mask) else np.zeros(len(pos), dtype=bool)
    return out


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
        ok &= np.isin(tm.session, np.array(queries.scope_sessions(store.conn, flt.scope), dtype=np.int64))
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
