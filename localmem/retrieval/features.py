"""The scorer's features of a query's candidate pool (``localmem/retrieval/scorer.py``).

Inputs are sparse: exact cosines of the rows the query already rescored (its dense
shortlists), bm25 of the lexical matches, the anchors' fused scores. Features with a
weight use exact cosines (the pool's turns and their cues, read from the store in the
query's snapshot); the session-centroid feature (``scent``, weight 0) estimates each
turn's cosine from the Hamming distance of the codes, cos(pi * d / dim), since it
averages over every turn of the pool's sessions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np

from localmem.retrieval.scorer import log_words, mentioned_speaker
from localmem.storage.engine.db import Conn
from localmem.storage.vectors.mirrors import MirrorView
from localmem.storage.vectors.stored import UNDATED, cue_ids_of, epoch_seconds, turn_ids_of_sessions
from localmem.storage.vectors.table_mirror import TurnMirror, VectorMirror
from localmem.storage.write.store import Store
from localmem.util.dates import window


@dataclass
class Sparse:
    """Scores of a few mirror rows (positions ascending); every other row scores 0."""

    pos: np.ndarray
    val: np.ndarray

    def at(self, pos: np.ndarray) -> np.ndarray:
        if len(self.pos) == 0:
            return np.zeros(len(pos))
        i = np.clip(np.searchsorted(self.pos, pos), 0, len(self.pos) - 1)
        out: np.ndarray = np.where(self.pos[i] == pos, self.val[i], 0.0)
        return out

    def max(self) -> float:
        return float(self.val.max()) if len(self.val) else 0.0

    def top(self, m: int) -> np.ndarray:
        """Positions of the ``m`` best-scoring rows, best first (ties: lower position)."""
        return self.pos[np.lexsort((self.pos, -self.val))[:m]]

    def plus(self, other: Sparse) -> Sparse:
        """Both, for disjoint rows."""
        pos = np.concatenate([self.pos, other.pos])
        order = np.argsort(pos, kind="stable")
        return Sparse(pos[order], np.concatenate([self.val, other.val])[order])


@dataclass
class Signals:
    """Per-query scores: exact cosines of the rows a query touched, bm25 of the matches."""

    tsim: dict[int, float]  # exact cosine to the turns rescored so far, by mirror position
    tdist: np.ndarray  # Hamming distance of every turn's code to the query's
    best_turn_sim: float
    csim: dict[int, float]  # exact cosine to the cues rescored so far (statement cues, unless "all")
    best_cue_sim: float
    bm: Sparse  # bm25 of the matching visible turns
    cbs: Sparse  # bm25 of the matching cues
    lists: list[list[int]]  # the four ranked lists, as turn mirror positions
    extra: list[int]  # turns proposed by model-extracted cues (RetrievalParams.extracted_cues == "fill")
    qvec: np.ndarray


def exact(conn: Conn, mirror: VectorMirror, known: dict[int, float], pos: np.ndarray, qvec: np.ndarray) -> np.ndarray:
    """Exact cosines of mirror rows ``pos`` to ``qvec``; rows not in ``known`` are read
    from the store (and added to it)."""
    missing = np.array(sorted({int(p) for p in pos} - known.keys()), dtype=np.int64)
    if len(missing):
        sims = mirror.vectors(conn, missing) @ qvec
        known.update(zip(missing.tolist(), sims.tolist(), strict=True))
    return np.array([known[int(p)] for p in pos], dtype=np.float64)


def features(
    store: Store,
    query: str,
    view: MirrorView,
    sig: Signals,
    anchors: dict[int, float],
    pool: np.ndarray,
    as_of: str | None,
    *,
    scent: bool = True,
) -> np.ndarray:
    """The scorer's feature matrix for the pool (see localmem/retrieval/scorer.py). Features with
    weight use exact cosines (the pool's turns and their cues, read from the store);
    the session centroid feature (``scent``, weight 0) estimates cosines from the codes.
    ``scent=False`` leaves that column 0: it reads every turn id of the pool's sessions
    (~4k rows a query), which a scorer that gives it no weight need not pay for."""
    tm, cues, conn = view.turn, view.cue, store.conn
    pool_ids = tm.ids[pool]
    f_bm = sig.bm.at(pool) / max(sig.bm.max(), 1e-9)
    f_de = exact(conn, tm, sig.tsim, pool, sig.qvec) - sig.best_turn_sim

    cue_ids = np.array(cue_ids_of(conn, pool_ids.tolist()), dtype=np.int64)
    cue_rows = cues.index_of(cue_ids)
    cue_rows = np.sort(cue_rows[cue_rows >= 0])
    owner = np.searchsorted(pool_ids, cues.turns[cue_rows])  # pool is sorted, so are its ids
    dense = cue_rows if store.params.extracted_cues == "all" else cue_rows[cues.statement[cue_rows]]
    cd = np.full(len(pool), -np.inf)
    if len(dense):
        np.maximum.at(cd, np.searchsorted(pool_ids, cues.turns[dense]), exact(conn, cues, sig.csim, dense, sig.qvec))
    f_cd = np.where(np.isfinite(cd), cd - sig.best_cue_sim, -1.0)
    cb = np.zeros(len(pool))
    np.maximum.at(cb, owner, sig.cbs.at(cue_rows))
    f_cb = cb / max(sig.cbs.max(), 1e-9)

    speakers = tm.speakers(pool)
    who = mentioned_speaker(query, sorted(set(speakers)))
    f_spk = np.array([1.0 if who is not None and sp == who else 0.0 for sp in speakers])

    apos = np.array(sorted(anchors), dtype=np.int64)
    r4 = Sparse(apos, np.array([anchors[int(a)] for a in apos], dtype=np.float64))
    f_nb = []
    for d in (1, 2):
        best = np.zeros(len(pool))
        for off in (-d, d):
            nb = tm.neighbour(pool, off)
            best = np.maximum(best, np.where(nb >= 0, r4.at(nb), 0.0))
        f_nb.append(best)
    sess = tm.session[pool]
    uniq, inv = np.unique(sess, return_inverse=True)
    own = r4.at(pool)  # each pool turn's own fused score (0 for a neighbour)
    sbest = np.zeros(len(uniq))
    np.maximum.at(sbest, inv, own)
    words = tm.line_words[pool]
    asst = np.array([1.0 if sp.lower() == "assistant" else 0.0 for sp in speakers])
    q_asst = 1.0 if asks_assistant(query) else 0.0
    f_aq = asst * q_asst
    f_uq = np.array([q_asst if sp.lower() == "user" else 0.0 for sp in speakers])
    ssum = np.zeros(len(uniq))
    np.add.at(ssum, inv, own)
    cent = _session_mean_sims(store, tm, uniq, sig.tdist) if scent else np.zeros(len(uniq))
    f_sc = cent[inv] - float(cent.max()) if len(cent) else np.zeros(len(pool))
    f_age = relative_age(tm.ts[pool], as_of)
    f_win = in_window(tm.ts[pool], window(query, as_of))
    hits: dict[int, int] = {}
    for lst in sig.lists:
        for p in set(lst):
            hits[p] = hits.get(p, 0) + 1
    f_nl = np.array([hits.get(int(p), 0) for p in pool], dtype=np.float64)
    return np.stack(
        [
            f_bm, f_de, f_cd, f_cb, f_spk, f_nb[0], f_nb[1], sbest[inv], log_words(words),
            asst, f_aq, f_uq, np.log1p(ssum[inv]), f_sc, f_age, f_win, own, f_nl,
        ],
        axis=1,
    )  # fmt: skip


def _session_mean_sims(store: Store, tm: TurnMirror, sessions: np.ndarray, tdist: np.ndarray) -> np.ndarray:
    """Mean cosine of the query to the turns of each of ``sessions`` (sorted ids), each
    cosine estimated from the Hamming distance of the codes as cos(pi * d / dim)."""
    pos = tm.index_of(np.array(turn_ids_of_sessions(store.conn, sessions.tolist()), dtype=np.int64))
    pos = pos[pos >= 0]
    which = np.searchsorted(sessions, tm.session[pos])
    est = np.cos(np.pi * tdist[pos].astype(np.float64) / tm.dim)
    sums = np.bincount(which, weights=est, minlength=len(sessions))
    counts = np.bincount(which, minlength=len(sessions))
    out: np.ndarray = sums / np.maximum(counts, 1)
    return out


def _epochs(ts: np.ndarray) -> np.ndarray:
    """Times as the turn mirror keeps them (epoch seconds, ``UNDATED``); ISO strings
    ('' for undated) are converted."""
    if ts.dtype.kind in "US":
        return np.array([UNDATED if not t else epoch_seconds(str(t)) for t in ts], dtype=np.int64)
    return ts.astype(np.int64)


def relative_age(ts: np.ndarray, as_of: str | None) -> np.ndarray:
    """How far back each of the pool's turns (times ``ts``) lies: 0 at the question's
    time (``as_of``, else the newest pool turn), 1 at the oldest pool turn; 0.5 when
    undated or all at one time."""
    ts = _epochs(ts)
    out = np.full(len(ts), 0.5)
    have = ts != UNDATED
    if not have.any():
        return out
    stamps = ts[have]
    newest = epoch_seconds(as_of) if as_of else int(stamps.max())
    ages = (newest - stamps).astype(np.float64) / 86400.0
    span = float(ages.max())
    if span > 0:
        out[have] = np.clip(ages / span, 0.0, 1.0)
    return out


WINDOW_SLACK_DAYS = 7  # a session tells of its days' events up to a week later


def in_window(ts: np.ndarray, span: tuple[date, date] | None) -> np.ndarray:
    """1 where a turn's time lies in the question's span (or up to a week after it)."""
    if span is None:
        return np.zeros(len(ts))
    ts = _epochs(ts)
    lo = epoch_seconds(span[0].isoformat())
    hi = epoch_seconds((span[1] + timedelta(days=WINDOW_SLACK_DAYS + 1)).isoformat())
    out: np.ndarray = ((ts != UNDATED) & (ts >= lo) & (ts < hi)).astype(np.float64)
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
