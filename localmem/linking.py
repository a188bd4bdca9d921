"""Model-free turn-graph edges (CueMem 4.2).

- temporal: written with each turn by the store (window w within a session);
- semantic: each new cue's k nearest cues of *other* turns (cosine, vec0 KNN) become an
  edge between the two source turns; one edge per turn pair, stored as
  (earlier id, later id) with the best similarity seen as weight.

Runs inside the write transaction that added the turns, so a turn never exists
without its edges. CABLE's verified antecedent edges come from the enrichment worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localmem.store import Store


def link_semantic(store: Store, turn_ids: list[int]) -> int:
    k = store.params.semantic_k
    if k <= 0 or not turn_ids:
        return 0
    conn = store.conn
    made = 0
    marks = ",".join("?" * len(turn_ids))
    cues = conn.execute(
        f"SELECT c.id, c.turn_id, v.embedding FROM cues c JOIN cue_vec v ON v.cue_id = c.id "
        f"WHERE c.turn_id IN ({marks})",
        turn_ids,
    ).fetchall()
    own = {}
    for _cid, tid, _vec in cues:
        own[tid] = own.get(tid, 0) + 1
    for _cid, tid, vec in cues:
        # Ask for enough neighbours that k remain after dropping the turn's own cues.
        rows = conn.execute(
            "SELECT v.cue_id, v.distance, c.turn_id FROM cue_vec v JOIN cues c ON c.id = v.cue_id "
            "WHERE v.embedding MATCH ? AND k = ?",
            (vec, k + own[tid]),
        ).fetchall()
        taken = 0
        for _other, dist, other_tid in rows:
            if other_tid == tid:
                continue
            a, b = sorted((tid, other_tid))
            conn.execute(
                "INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, 'semantic', ?) "
                "ON CONFLICT(src, dst, kind) DO UPDATE SET weight = max(weight, excluded.weight)",
                (a, b, 1.0 - float(dist)),
            )
            made += 1
            taken += 1
            if taken >= k:
                break
    return made
