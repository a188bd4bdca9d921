"""Model-free turn-graph edges (CueMem 4.2).

- temporal: written with each turn by the store (window w within a session);
- semantic: each new cue's k nearest cues of *other* turns (cosine) become an edge
  between the two source turns; one edge per turn pair, stored as (lower id, higher
  id) with the best similarity seen as weight.

Runs inside the write transaction that added the turns, so a turn never exists
without its edges. Nearest neighbours come from the in-memory cue mirror's codes
(``localmem/storage/vectors.py``) rescored with exact vectors: one vec0 KNN query per
new cue made ingest ~30x slower, and a float32 product with every stored cue grows
with the store.
CABLE's verified antecedent edges come from the enrichment worker.
"""

from __future__ import annotations

import numpy as np

from localmem.storage.db import Conn
from localmem.storage.hamming import FAR
from localmem.storage.vectable import cue_ids_of
from localmem.storage.vectors import VectorMirror

LINK_SHORTLIST = 24  # rescored exactly per new cue, of its Hamming-nearest cues


def link_semantic(conn: Conn, cm: VectorMirror, turn_ids: list[int], k: int) -> int:
    """Add semantic edges for the cues of ``turn_ids`` (their ``k`` nearest cues of other
    turns in the synced cue mirror ``cm``); returns edges written. Per new cue: a Hamming
    pass over the codes, then exact cosines of its ``LINK_SHORTLIST`` nearest."""
    if k <= 0 or not turn_ids or len(cm.ids) < 2:
        return 0
    rows = cm.index_of(np.array(cue_ids_of(conn, turn_ids), dtype=np.int64))
    rows = np.sort(rows[rows >= 0])
    if len(rows) == 0:
        return 0
    vecs = cm.vectors(conn, rows)
    size = max(LINK_SHORTLIST, k)
    best: dict[tuple[int, int], float] = {}
    for r, vec in zip(rows, vecs, strict=True):
        a = int(cm.turns[r])
        dist = cm.hamming(cm.codes[:, r])
        dist[rows[cm.turns[rows] == a]] = FAR  # never link a turn to itself
        near, sims = cm.nearest(conn, vec, size, dist=dist, size=size)
        other = cm.turns[near] != a
        for c, s in list(zip(near[other], sims[other], strict=True))[:k]:
            b = int(cm.turns[c])
            pair = (min(a, b), max(a, b))
            if s > best.get(pair, -2.0):
                best[pair] = float(s)
    conn.executemany(
        "INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, 'semantic', ?) "
        "ON CONFLICT(src, dst, kind) DO UPDATE SET weight = max(weight, excluded.weight)",
        [(a, b, w) for (a, b), w in best.items()],
    )
    return len(best)
