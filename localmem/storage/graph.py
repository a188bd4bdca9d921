"""Model-free turn-graph edges (CueMem 4.2).

- temporal: written with each turn by the store (window w within a session);
- semantic: each new cue's k nearest cues of *other* turns (cosine) become an edge
  between the two source turns; one edge per turn pair, stored as (lower id, higher
  id) with the best similarity seen as weight.

Runs inside the write transaction that added the turns, so a turn never exists
without its edges. Nearest neighbours come from the in-memory cue mirror
(``localmem/vectors.py``): one vec0 KNN query per new cue made ingest ~30x slower.
CABLE's verified antecedent edges come from the enrichment worker.
"""

from __future__ import annotations

import numpy as np

from localmem.storage.db import Conn
from localmem.storage.vectors import VectorMirror

_CHUNK = 256


def link_semantic(conn: Conn, cm: VectorMirror, turn_ids: list[int], k: int) -> int:
    """Add semantic edges for the cues of ``turn_ids`` (their ``k`` nearest cues in the
    synced cue mirror ``cm``); returns edges written."""
    if k <= 0 or not turn_ids:
        return 0
    if len(cm.ids) < 2:
        return 0
    rows = np.nonzero(np.isin(cm.turns, np.array(turn_ids, dtype=np.int64)))[0]
    best: dict[tuple[int, int], float] = {}
    for start in range(0, len(rows), _CHUNK):
        part = rows[start : start + _CHUNK]
        sims = cm.mat[part] @ cm.mat.T
        sims[cm.turns[part][:, None] == cm.turns[None, :]] = -np.inf  # never link a turn to itself
        kk = min(k, sims.shape[1] - 1)
        if kk <= 0:
            continue
        top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        for i, (r, cols) in enumerate(zip(part, top, strict=True)):
            a = int(cm.turns[r])
            for c in cols:
                s = float(sims[i, c])
                if s == -np.inf:
                    continue
                pair = (min(a, int(cm.turns[c])), max(a, int(cm.turns[c])))
                if s > best.get(pair, -2.0):
                    best[pair] = s
    conn.executemany(
        "INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, 'semantic', ?) "
        "ON CONFLICT(src, dst, kind) DO UPDATE SET weight = max(weight, excluded.weight)",
        [(a, b, w) for (a, b), w in best.items()],
    )
    return len(best)
