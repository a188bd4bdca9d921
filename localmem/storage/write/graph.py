"""Model-free turn-graph edges (CueMem 4.2).

- temporal: written with each turn by the store (window w within a session);
- semantic: each new cue's k nearest cues of *other* turns (cosine) become an edge
  between the two source turns; one edge per turn pair, stored as (lower id, higher
  id) with the best similarity seen as weight.

Runs inside the write transaction that added the turns, so a turn never exists
without its edges. Nearest neighbours come from the in-memory cue mirror's codes
(``localmem/storage/vectors/table_mirror.py``) rescored with exact vectors: one vec0 KNN query per
new cue made ingest ~30x slower, and a float32 product with every stored cue grows
with the store. On a store of more than ``LINK_SCAN_ALL`` cues, a turn with several
new cues compares them only with the cues of its ``LINK_TURNS`` nearest turns, so the
work per new turn is one pass over the turn codes, not one over every cue per new cue.
CABLE's verified antecedent edges come from the enrichment worker.
"""

from __future__ import annotations

import numpy as np

from localmem.storage.engine.db import Conn
from localmem.storage.vectors import hamming
from localmem.storage.vectors.hamming import FAR
from localmem.storage.vectors.mirrors import MirrorView
from localmem.storage.vectors.stored import cue_ids_of

LINK_SHORTLIST = 24  # rescored exactly per new cue, of its Hamming-nearest cues
# A cue mirror of at most LINK_SCAN_ALL rows is searched whole for each new cue. Past it
# each new turn first takes its LINK_TURNS nearest turns (one Hamming pass over the turn
# codes) and its cues are compared with those turns' cues only: the work per new cue no
# longer grows with the store (at 25k turns of a chat export, linking was ~40% of ingest).
# On the dev stores' real vectors (32.6k turns, 287k cues) the turns of 89% of a cue's
# exact 3 nearest cues are among its turn's 2,000 nearest turns.
# A turn with fewer than LINK_NEAR_CUES new cues is searched in full all the same: the
# turn pass costs more than it saves (100k turns / 180k cues: 12 cues a turn link in
# 7.5-9 ms instead of 22-28; 1 cue a turn in 2.6 ms instead of 2.0).
LINK_SCAN_ALL = 100_000
LINK_TURNS = 2_000
LINK_NEAR_CUES = 3


def link_semantic(conn: Conn, view: MirrorView, turn_ids: list[int], k: int) -> int:
    """Add semantic edges for the cues of ``turn_ids`` (their ``k`` nearest cues of other
    turns in the synced mirrors ``view``); returns edges written. Per new cue: a Hamming
    pass over the candidate cues' codes, then exact cosines of its ``LINK_SHORTLIST``
    nearest (a turn's cues take their Hamming pass together, ``hamming.distances_many``)."""
    cm = view.cue
    if k <= 0 or not turn_ids or len(cm.ids) < 2:
        return 0
    rows = cm.index_of(np.array(cue_ids_of(conn, turn_ids), dtype=np.int64))
    rows = np.sort(rows[rows >= 0])
    if len(rows) == 0:
        return 0
    vecs = cm.vectors(conn, rows)
    size = max(LINK_SHORTLIST, k)
    best: dict[tuple[int, int], float] = {}
    owners = cm.turns[rows]
    for a in np.unique(owners):
        a = int(a)
        mine = owners == a
        few = len(cm.ids) <= LINK_SCAN_ALL or int(np.count_nonzero(mine)) < LINK_NEAR_CUES
        cand = None if few else _cues_of_near_turns(view, a)
        codes = cm.codes if cand is None else cm.codes[:, cand]
        own = cm.turns == a if cand is None else cm.turns[cand] == a  # never link a turn to itself
        mine_rows = rows[mine]
        many = hamming.distances_many(codes, np.ascontiguousarray(cm.codes[:, mine_rows].T))
        for vec, dist in zip(vecs[mine], many, strict=True):
            dist[own] = FAR
            short = hamming.shortlist(dist, None, size)
            pos = short if cand is None else cand[short]
            sims = cm.vectors(conn, pos) @ vec
            for i in np.argsort(-sims, kind="stable")[:k]:
                b = int(cm.turns[pos[i]])
                pair = (min(a, b), max(a, b))
                if sims[i] > best.get(pair, -2.0):
                    best[pair] = float(sims[i])
    conn.executemany(
        "INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, 'semantic', ?) "
        "ON CONFLICT(src, dst, kind) DO UPDATE SET weight = max(weight, excluded.weight)",
        [(a, b, w) for (a, b), w in best.items()],
    )
    return len(best)


def _cues_of_near_turns(view: MirrorView, turn_id: int) -> np.ndarray | None:
    """Cue mirror positions (ascending) of the ``LINK_TURNS`` turns nearest to
    ``turn_id`` by code; None (search every cue) when the turn has no vector."""
    tm = view.turn
    at = int(tm.index_of(np.array([turn_id]))[0])
    if at < 0:
        return None
    near = tm.shortlist(tm.hamming(tm.codes[:, at]), None, LINK_TURNS)
    chosen = np.zeros(len(tm.ids), dtype=bool)
    chosen[near] = True
    cp = view.cue_pos
    out: np.ndarray = np.flatnonzero((cp >= 0) & chosen[np.maximum(cp, 0)])
    return out
