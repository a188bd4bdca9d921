"""The candidate pool of a query and its features. No LLM, no writes.

1. embed the query (in the words of the one or two speakers it names, if any:
   ``speaker_query``); four ranked lists of turns, top-m each: turn bm25 (FTS5), turn
   cosine, statement-cue cosine and cue bm25 (a cue votes for its source turn once);
2. anchors = the union of the lists, with their reciprocal-rank-fusion score;
3. one-hop neighbourhood: same-session neighbours within the temporal window and
   semantic-edge neighbours of the best anchors join the pool;
4. every pool turn gets the features of ``localmem/retrieval/scorer.py``.

Dense lists come from the in-memory code mirrors (``localmem/storage/vectors/table_mirror.py``: a
Hamming shortlist rescored with exact vectors), lexical ones from FTS5; per query, only
shortlists, matches and the pool touch exact vectors or float arrays, never one of the
store's size. Everything a query reads comes from one snapshot of the store
(``Store.snapshot``): FTS rows, session ids and both mirrors agree even while other
processes write or forget, and a cue whose turn is missing from the turn mirror is
ignored (position -1), never used as an index.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from localmem.retrieval import scope as scopes
from localmem.retrieval.features import Signals, Sparse, asks_assistant, features
from localmem.retrieval.packing import rrf
from localmem.retrieval.scorer import FEATURES, Weights
from localmem.retrieval.scorer_file import weights_for
from localmem.retrieval.speaker_query import first_person
from localmem.storage.reads import queries
from localmem.storage.reads.queries import Filter
from localmem.storage.vectors.mirrors import MirrorView
from localmem.storage.vectors.stored import UNDATED, epoch_seconds, quantize
from localmem.storage.vectors.table_mirror import TurnMirror, VectorMirror
from localmem.storage.write.store import Store


@dataclass
class Lexical:
    """The lexical lists of a query: bm25 of the matching visible turns and cues (and of
    model-extracted cues, when they are read)."""

    bm: Sparse
    cbs: Sparse  # statement cues; with extracted_cues == "all", extracted ones too
    xbm: Sparse | None  # extracted cues, when extracted_cues is "fill" and the store has some


def _cue_masks(store: Store, view: MirrorView, visible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cues the ranked lists may hold, and the visible model-extracted ones.
    Model-extracted cues (``RetrievalParams.extracted_cues``): "all" treats them like
    statement cues; "fill" keeps every list and feature model-free (what the scorer was
    fitted on) and lets them only propose extra candidates, packed last; "off" ignores them."""
    cm = view.cue
    cue_ok = _at(visible, view.cue_pos)
    extracted = cue_ok & ~cm.statement
    if store.params.extracted_cues != "all":
        cue_ok = cue_ok & cm.statement
    return cue_ok, extracted


def lexical_lists(store: Store, view: MirrorView, query: str, visible: np.ndarray) -> Lexical:
    """The FTS5 side of the ranked lists (SQL only, no model: it can run while the
    query is embedded, ``candidate_pool``)."""
    cue_ok, extracted = _cue_masks(store, view, visible)
    mode = store.params.extracted_cues
    bm = _lexical(store, "turns_fts", query, view.turn, visible)
    cbs = _lexical(store, "cues_fts", query, view.cue, cue_ok)
    xbm = None
    if mode != "off" and extracted.any():
        xbm = _lexical(store, "extracted_cues_fts", query, view.cue, extracted)
        if mode == "all":
            cbs, xbm = cbs.plus(xbm), None  # disjoint rows
    return Lexical(bm, cbs, xbm)


def _signals(
    store: Store,
    view: MirrorView,
    query: str,
    qvec: np.ndarray,
    visible: np.ndarray,
    m: int,
    lex: Lexical | None = None,
) -> Signals:
    """The four ranked lists. Dense ones: a Hamming shortlist of the visible rows, rescored
    with their exact vectors (``VectorMirror.nearest``), so ranks and cosines are exact.
    ``lex``: the lexical lists when already read (else read here)."""
    tm, cm, cue_pos = view.turn, view.cue, view.cue_pos
    conn = store.conn
    qcode = quantize(qvec, tm.words)[0]
    tdist, cdist = tm.hamming(qcode), cm.hamming(qcode)
    tpos, tsims = tm.nearest(conn, qvec, m, visible, tdist)
    cue_ok, extracted = _cue_masks(store, view, visible)
    cpos, csims = cm.nearest(conn, qvec, m, cue_ok, cdist)
    lex = lex or lexical_lists(store, view, query, visible)
    bm, cbs = lex.bm, lex.cbs
    extra: list[int] = []
    if lex.xbm is not None:  # "fill": extracted cues only propose candidates
        xpos, _ = cm.nearest(conn, qvec, m, extracted, cdist)
        extra = _first_turns(cue_pos[xpos], m) + _first_turns(cue_pos[lex.xbm.top(m)], m)
    lists = [
        [int(i) for i in bm.top(m)],
        [int(i) for i in tpos],
        _first_turns(cue_pos[cpos], m),
        _first_turns(cue_pos[cbs.top(m)], m),
    ]
    return Signals(
        tsim=dict(zip(tpos.tolist(), tsims.tolist(), strict=True)),
        tdist=tdist,
        best_turn_sim=float(tsims[0]) if len(tsims) else 0.0,
        csim=dict(zip(cpos.tolist(), csims.tolist(), strict=True)),
        best_cue_sim=float(csims[0]) if len(csims) else 0.0,
        bm=bm,
        cbs=cbs,
        lists=lists,
        extra=extra,
        qvec=qvec,
    )


LIST_NAMES = ("turn bm25", "turn cosine", "cue cosine", "cue bm25")


def ranked_lists(
    store: Store, query: str, flt: Filter, depth: int, allowed: np.ndarray | None = None
) -> list[list[int]]:
    """The pool's four ranked lists (``LIST_NAMES``) as turn ids, ``depth`` deep instead
    of ``candidates``: where a turn the pool missed stands in each (loss analysis), what
    the web view's search finds. ``allowed``: only these turn ids may be listed."""
    with store.snapshot():
        view = store.mirrors()
        if len(view.turn.ids) == 0:
            return [[] for _ in LIST_NAMES]
        visible = visible_mask(store, view.turn, flt)
        if allowed is not None:
            visible &= np.isin(view.turn.ids, allowed)
        listed = listable(store, view.turn, query, visible)
        sig = _signals(store, view, query, _embed(store, dense_text(store, query, view.turn.names)), listed, depth)
        return [[int(view.turn.ids[p]) for p in lst] for lst in sig.lists]


def _lexical(store: Store, table: str, query: str, mirror: VectorMirror, ok: np.ndarray) -> Sparse:
    # Under a filter the best matches may all be invisible: then rank every match.
    share = store.params.common_term_share
    common = (share, len(mirror.ids)) if share < 1.0 else None
    limit = 1000 if ok.all() else -1  # -1 ranks every match, at most lexical_max_rows of them
    ids, scores = queries.lexical(
        store.conn, table, query, limit, common=common, max_rows=store.params.lexical_max_rows
    )
    pos = mirror.index_of(ids)
    keep = _at(ok, pos) & (scores > 0)
    pos, val = pos[keep], scores[keep]
    order = np.argsort(pos, kind="stable")
    return Sparse(pos[order], val[order])


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
    # The best exact cosine of a visible turn / statement cue to the query: an absolute
    # measure of how relevant the memory is (the scorer's features are relative to them).
    best_sim: float = 0.0

    def subset(self, idx: np.ndarray) -> Pool:
        """The pool of the turns at positions ``idx`` (their features and reasons with them)."""
        return replace(
            self,
            turn_ids=self.turn_ids[idx],
            feats=self.feats[idx],
            words=self.words[idx],
            reasons=[self.reasons[int(i)] for i in idx],
        )


def candidate_pool(store: Store, query: str, flt: Filter, weights: Weights | None = None) -> Pool | None:
    """Anchors + expansion + features for a query; None when nothing is visible/matches.
    Reads one snapshot of the store (the caller's, when it holds one). With ``weights``,
    a costly feature they give no weight (``scent``) is left 0; without, every one is
    computed (fitting, explaining).

    The query is embedded while a worker thread reads the lexical lists (FTS5) on the
    store's connection: both release the GIL (onnxruntime, SQLite), so on two cores the
    lexical lists cost little more than nothing; this thread runs no SQL meanwhile, and
    the worker is done before anything else reads."""
    # The model is loaded before the mirrors: a process's first embedding loads it, and
    # that load's transient memory then does not stack on the mirrors' (bench scale, 1M
    # turns: peak 477 MB otherwise, 398 MB this way).
    load = getattr(store.embedder, "load", None)
    if load is not None:
        load()
    with store.snapshot():
        view = store.mirrors()
        tm = view.turn
        if len(tm.ids) == 0:
            return None
        visible = visible_mask(store, tm, flt)
        listed = listable(store, tm, query, visible)
        lex = _worker().submit(lexical_lists, store, view, query, listed)
        try:
            qvec = _embed(store, dense_text(store, query, tm.names))
        finally:
            lexical = lex.result()  # the connection is this thread's again
        return _candidate_pool(store, view, query, qvec, visible, listed, lexical, weights, flt)


_pool_thread: tuple[int, ThreadPoolExecutor] | None = None


def _worker() -> ThreadPoolExecutor:
    """This process's thread for the lexical lists (a forked child makes its own: the
    parent's thread does not exist there)."""
    global _pool_thread
    if _pool_thread is None or _pool_thread[0] != os.getpid():
        _pool_thread = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="localmem-lexical"))
    return _pool_thread[1]


def _embed(store: Store, text: str) -> np.ndarray:
    out: np.ndarray = store.embedder.embed([text])[0].astype(np.float32)
    return out


def dense_text(store: Store, query: str, speakers: list[str]) -> str:
    """``query``, or under ``retrieval.speaker_query`` the query in the words of the
    speakers it names (``speaker_query.first_person``)."""
    spoken = first_person(query, speakers) if store.params.speaker_query else None
    return query if spoken is None else spoken


def _candidate_pool(
    store: Store,
    view: MirrorView,
    query: str,
    qvec: np.ndarray,
    visible: np.ndarray,
    listed: np.ndarray,
    lex: Lexical | None,
    weights: Weights | None,
    flt: Filter,
) -> Pool | None:
    tm = view.turn
    m = depth(store.params.candidates, store.params.candidates_ref_turns, int(listed.sum()))
    sig = _signals(store, view, query, qvec, listed, m, lex)
    fused = rrf([[(t, 0.0) for t in lst] for lst in sig.lists], store.params.rrf_k)
    if not fused:
        return None
    best = max(fused.values())
    anchors = {pos: v / best for pos, v in fused.items()}
    reason = _neighbourhood(store, tm, anchors, visible)
    for pos in sig.extra:  # candidates only: no anchor score, so no other turn's features change
        reason.setdefault(pos, ("extracted", "matched a model-extracted cue"))
    pool = np.array(sorted(reason), dtype=np.int64)  # mirror order = chronological tie-break
    scent = weights is None or weights.coef[FEATURES.index("scent")] != 0.0
    feats = features(store, query, view, sig, anchors, pool, flt.as_of, scent=scent)
    best = max(sig.best_turn_sim, sig.best_cue_sim)
    return Pool(
        tm.ids[pool], feats, tm.line_words[pool], [reason[int(i)] for i in pool], len(anchors), sig.qvec, visible, best
    )


def depth(m: int, ref_turns: int, visible: int) -> int:
    """Candidates per ranked list for a query that sees ``visible`` turns: ``m``, or past
    ``ref_turns`` (when set) m * sqrt(visible / ref_turns), at most 4m."""
    if ref_turns <= 0 or visible <= ref_turns:
        return m
    return min(4 * m, int(np.ceil(m * np.sqrt(visible / ref_turns))))


def _at(mask: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``mask`` at positions ``pos``; False where a position is -1 (or past the end)."""
    inside = (pos >= 0) & (pos < len(mask))
    if len(mask) and mask.all():  # no filter: skip the gather over every row
        return inside
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


def listable(store: Store, tm: TurnMirror, query: str, visible: np.ndarray) -> np.ndarray:
    """The visible turns the ranked lists may hold: under ``assistant_lists = "asked"``
    an assistant's turns only when the query asks what the assistant said."""
    if store.params.assistant_lists == "all" or asks_assistant(query):
        return visible
    codes = [i for i, n in enumerate(tm.names) if n.lower() == "assistant"]
    if not codes:
        return visible
    out: np.ndarray = visible & ~np.isin(tm.speaker, np.array(codes, dtype=tm.speaker.dtype))
    return out


def visible_mask(store: Store, tm: TurnMirror, flt: Filter) -> np.ndarray:
    ok = np.ones(len(tm.ids), dtype=bool)
    if flt.before is not None:
        ok &= earlier_mask(tm, flt.before)
    if flt.as_of is not None:
        ok &= (tm.ts == UNDATED) | (tm.ts <= epoch_seconds(flt.as_of))
    if flt.scope is not None:
        ok &= np.isin(tm.session, np.array(queries.scope_sessions(store.conn, flt.scope), dtype=np.int64))
    if flt.project is not None:
        ok &= scopes.visible(store, tm, flt.project)
    if flt.exclude is not None:
        ok &= ~np.isin(tm.session, np.array(queries.sessions_with_key(store.conn, flt.exclude), dtype=np.int64))
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


def retrieve(store: Store, query: str, flt: Filter, k: int, weights: Weights | None = None) -> list[tuple[int, float]]:
    """The read path's ranking without the budget: the ``k`` pool turns most likely to
    be evidence for ``query``, as (turn id, probability), best first. CABLE's
    construction searches with this, so its links complement what reconstruct finds.
    ``weights``: default those of the store's embedder (``scorer_file.weights_for``)."""
    weights = weights_for(store.embedder) if weights is None else weights
    pool = candidate_pool(store, query, flt, weights)
    if pool is None:
        return []
    prob = weights.probability(pool.feats)
    top = np.argsort(-prob, kind="stable")[:k]
    return [(int(pool.turn_ids[j]), float(prob[j])) for j in top]
