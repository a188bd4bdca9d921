"""Model-free turn-graph edges (CueMem 4.2).

- temporal: written with each turn by the store (window w within a session);
- semantic: each new cue's k nearest cues of *other* turns (cosine) become an edge
  between the two source turns; one edge per turn pair, stored as (lower id, higher
  id) with the best similarity seen as weight.

Runs inside the write transaction that added the turns, so a turn never exists
without its edges. Nearest neighbours come from an in-memory copy of the cue vectors
(``CueMatrix``), kept in step with the database incrementally, because one vec0 KNN
query per new cue made ingest ~30x slower. CABLE's verified antecedent edges come
from the enrichment worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import apsw
import numpy as np

if TYPE_CHECKING:
    from localmem.store import Store

_CHUNK = 256


class CueMatrix:
    """Cue ids, their turn ids and unit vectors, mirrored from ``cues``/``cue_vec``.

    ``sync`` appends rows added since the last call; if rows were deleted or another
    process renumbered history (count or max id disagree), it reloads everything."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.ids = np.zeros(0, dtype=np.int64)
        self.turns = np.zeros(0, dtype=np.int64)
        self.mat = np.zeros((0, dim), dtype=np.float32)

    def sync(self, conn: apsw.Connection) -> None:
        count, max_id = conn.execute("SELECT count(*), coalesce(max(id), 0) FROM cues").fetchone()
        have_max = int(self.ids[-1]) if len(self.ids) else 0
        if count == len(self.ids) and max_id == have_max:
            return
        rows = self._load(conn, have_max)
        if len(self.ids) + len(rows) != count:
            self.ids = self.ids[:0]
            self.turns = self.turns[:0]
            self.mat = self.mat[:0]
            rows = self._load(conn, 0)
        if rows:
            self.ids = np.concatenate([self.ids, np.array([r[0] for r in rows], dtype=np.int64)])
            self.turns = np.concatenate([self.turns, np.array([r[1] for r in rows], dtype=np.int64)])
            vecs = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), self.dim)
            self.mat = np.concatenate([self.mat, vecs])

    @staticmethod
    def _load(conn: apsw.Connection, after: int) -> list[tuple[int, int, bytes]]:
        return [
            (int(a), int(b), bytes(c))
            for a, b, c in conn.execute(
                "SELECT c.id, c.turn_id, v.embedding FROM cues c JOIN cue_vec v ON v.cue_id = c.id "
                "WHERE c.id > ? ORDER BY c.id",
                (after,),
            )
        ]


def link_semantic(store: Store, turn_ids: list[int]) -> int:
    """Add semantic edges for the cues of ``turn_ids``; returns edges written."""
    k = store.params.semantic_k
    if k <= 0 or not turn_ids:
        return 0
    cm = store.cue_matrix()
    cm.sync(store.conn)
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
    store.conn.executemany(
        "INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, 'semantic', ?) "
        "ON CONFLICT(src, dst, kind) DO UPDATE SET weight = max(weight, excluded.weight)",
        [(a, b, w) for (a, b), w in best.items()],
    )
    return len(best)
