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
    from localmem.vectors import TurnMirror


@dataclass
class Candidate:
    turn_id: int
    score: float
    reason: str  # anchor / temporal / semantic
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


def pack(cands: Sequence[Candidate], rows: dict[int, TurnRow], budget_tokens: int) -> list[Candidate]:
    """Fill the word budget in the given order; a turn that does not fit is skipped and
    smaller ones are still tried. A session header is paid once, with its first turn."""
    cap = words_for_tokens(budget_tokens)
    used = 0
    sessions: set[int] = set()
    chosen: list[Candidate] = []
    for c in cands:
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
    if budget_tokens <= 0:
        raise InputError(f"budget_tokens must be positive, got {budget_tokens}")
    if budget_tokens > store.settings.max_budget_tokens:
        raise InputError(f"budget_tokens {budget_tokens} exceeds the cap of {store.settings.max_budget_tokens}")
    try:
        flt = Filter(as_of=parse_time(as_of) if as_of else None, scope=scope)
    except ValueError as exc:
        raise InputError(f"as_of: {exc}") from exc
    pool, why = _pool(store, query, flt, weights)
    if not pool:
        return Context(query, "", 0, budget_tokens, (), {"candidates": 0})
    rows = search.turn_rows(store.conn, [c.turn_id for c in pool])
    chosen = pack(pool, rows, budget_tokens)
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
    return Context(query, text, tokens_for_words(count_words(text)), budget_tokens, evidence, why)


def _pool(store: Store, query: str, flt: Filter, weights: Weights) -> tuple[list[Candidate], dict[str, int]]:
    """The scored candidate pool in packing order, and counts for ``Context.stats``."""
    p = store.params
    tm = store.turn_mirror()
    cm = store.mirror("cue")
    if len(tm.ids) == 0:
        return [], {"candidates": 0}
    m = p.candidates
    qvec = store.embedder.embed([query])[0].astype(np.float32)
    visible = visible_mask(store, tm, flt)

    tsims = tm.mat @ qvec
    tsims_v = np.where(visible, tsims, -np.inf)
    dense_turns = _top(tsims_v, m)

    csims = cm.mat @ qvec
    cue_pos = tm.index_of(cm.turns)
    cue_ok = (cue_pos >= 0) & visible[np.maximum(cue_pos, 0)]
    csims_v = np.where(cue_ok, csims, -np.inf)
    dense_cues = _first_turns(cue_pos[_top(csims_v, m)], m)

    def turn_ok(ids: np.ndarray) -> np.ndarray:
        pos = tm.index_of(ids)
        return (pos >= 0) & visible[np.maximum(pos, 0)]

    def cue_kept(ids: np.ndarray) -> np.ndarray:
        pos = cm.index_of(ids)
        return (pos >= 0) & cue_ok[np.maximum(pos, 0)]

    lex_turns = search.lexical(store.conn, "turns_fts", query, m, turn_ok)
    lex_turn_pos = tm.index_of(np.array([t for t, _ in lex_turns], dtype=np.int64))
    lex_cues = search.lexical(store.conn, "cues_fts", query, m, cue_kept)
    lex_cue_turns = _first_turns(cue_pos[cm.index_of(np.array([c for c, _ in lex_cues], dtype=np.int64))], m)

    lists = [
        [(int(i), 0.0) for i in lex_turn_pos],
        [(int(i), 0.0) for i in dense_turns],
        [(i, 0.0) for i in dense_cues],
        [(i, 0.0) for i in lex_cue_turns],
    ]
    fused = rrf(lists, p.rrf_k)
    best = max(fused.values())
    anchors = {pos: v / best for pos, v in fused.items()}

    # Expansion: temporal neighbours of every anchor, semantic neighbours of the best.
    reason: dict[int, tuple[str, str]] = {pos: ("anchor", "") for pos in anchors}
    apos = np.array(sorted(anchors), dtype=np.int64)
    for d in range(1, p.temporal_window + 1):
        for off in (-d, d):
            nb = tm.neighbour(apos, off)
            for a, n in zip(apos, nb, strict=True):
                if n >= 0 and visible[n] and int(n) not in reason:
                    reason[int(n)] = ("temporal", f"within {d} of turn {int(tm.ids[a])}")
    if p.semantic_seeds > 0:
        seeds = sorted(anchors, key=lambda x: -anchors[x])[: p.semantic_seeds]
        for a, b, _kind, _w, _r in search.edges_of(store.conn, [int(tm.ids[s]) for s in seeds], ("semantic",)):
            n = int(tm.index_of(np.array([b]))[0])
            if n >= 0 and visible[n] and n not in reason:
                reason[n] = ("semantic", f"semantic edge from turn {a}")

    pool = np.array(sorted(reason), dtype=np.int64)  # mirror order = chronological tie-break
    pool_ids = tm.ids[pool]

    # Features.
    lex_t = dict(lex_turns)
    missing = [int(t) for t in pool_ids if int(t) not in lex_t]
    lex_t.update(search.lexical_scores_for(store.conn, "turns_fts", query, missing))
    bmax = max([s for _, s in lex_turns], default=0.0)
    f_bm = np.array([lex_t.get(int(t), 0.0) for t in pool_ids]) / max(bmax, 1e-9)

    f_de = tsims[pool] - (tsims_v[dense_turns[0]] if len(dense_turns) else 0.0)

    in_pool = np.isin(cm.turns, pool_ids)
    cue_rows = np.nonzero(in_pool)[0]
    slot = {int(t): i for i, t in enumerate(pool_ids)}
    owner = np.array([slot[int(t)] for t in cm.turns[cue_rows]], dtype=np.int64)
    cd = np.full(len(pool), -1.0)
    np.maximum.at(cd, owner, csims[cue_rows])
    top_cue = float(csims_v.max()) if len(csims_v) and np.isfinite(csims_v.max()) else 0.0
    f_cd = np.where(cd > -1.0, cd - top_cue, -1.0)

    cue_lex = search.lexical_scores_for(store.conn, "cues_fts", query, [int(c) for c in cm.ids[cue_rows]])
    cb = np.zeros(len(pool))
    if cue_lex:
        vals = np.array([max(cue_lex.get(int(c), 0.0), 0.0) for c in cm.ids[cue_rows]])
        np.maximum.at(cb, owner, vals)
    cbmax = max([s for _, s in lex_cues], default=0.0)
    f_cb = cb / max(cbmax, 1e-9)

    names = sorted({tm.speaker[i] for i in pool})
    who = mentioned_speaker(query, names)
    f_spk = np.array([1.0 if who is not None and tm.speaker[i] == who else 0.0 for i in pool])

    r4 = np.array([anchors.get(int(i), 0.0) for i in pool])
    f_nb = []
    for d in (1, 2):
        best_nb = np.zeros(len(pool))
        for off in (-d, d):
            nb = tm.neighbour(pool, off)
            best_nb = np.maximum(best_nb, np.array([anchors.get(int(n), 0.0) if n >= 0 else 0.0 for n in nb]))
        f_nb.append(best_nb)
    sess_best: dict[int, float] = {}
    for i, v in zip(pool, r4, strict=True):
        s = int(tm.session[i])
        sess_best[s] = max(sess_best.get(s, 0.0), float(v))
    f_sess = np.array([sess_best[int(tm.session[i])] for i in pool])
    words = tm.line_words[pool]
    feats = np.stack([f_bm, f_de, f_cd, f_cb, f_spk, f_nb[0], f_nb[1], f_sess, log_words(words)], axis=1)
    prob = weights.probability(feats)

    order = value_order(prob, words)
    cands = [Candidate(int(pool_ids[j]), float(prob[j]), *reason[int(pool[j])]) for j in order]
    return cands, {"candidates": len(pool), "anchors": len(anchors)}


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
    if flt.as_of is not None:
        ok &= (tm.ts == "") | (tm.ts <= flt.as_of)
    if flt.scope is not None:
        ok &= np.isin(tm.session, np.array(search.scope_sessions(store.conn, flt.scope), dtype=np.int64))
    return ok
