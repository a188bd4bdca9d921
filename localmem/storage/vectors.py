"""In-memory mirrors of the vec0 tables, for nearest-neighbour search in numpy.

vec0 holds the vectors durably; a mirror holds (row id, turn id, unit vector) for every
row in one float32 matrix, so a query is one matrix-vector product. Measured on the
2-core dev machine at 10k turns / 20k cues, vec0's brute-force KNN took 26 ms (turns)
and 52 ms (cues) per query against a few ms for the mirror, and one KNN query per new
cue made linking dominate ingest.

Invariant: after ``sync`` the mirror equals its table. It appends rows newer than the
newest it holds and reloads everything when counts disagree (rows deleted, or written
by another process out of order), so several processes on one file stay correct.
"""

from __future__ import annotations

import numpy as np

from localmem.storage.db import Conn
from localmem.util.text import line_word_cost

# (count/max query, load query): each load row is (row id, turn id, vector blob).
_TABLES = {
    "cue": (
        "SELECT count(*), coalesce(max(id), 0) FROM cues",
        "SELECT c.id, c.turn_id, v.embedding, c.kind = 'statement' FROM cues c JOIN cue_vec v ON v.cue_id = c.id "
        "WHERE c.id > ? ORDER BY c.id",
    ),
    "turn": (
        "SELECT count(*), coalesce(max(id), 0) FROM turns",
        "SELECT t.id, t.id, v.embedding, t.session_id, t.ord, t.words, t.speaker, coalesce(t.ts, '') "
        "FROM turns t JOIN turn_vec v ON v.turn_id = t.id WHERE t.id > ? ORDER BY t.id",
    ),
}


class VectorMirror:
    def __init__(self, table: str, dim: int) -> None:
        self.table = table
        self.dim = dim
        self.ids = np.zeros(0, dtype=np.int64)
        self.turns = np.zeros(0, dtype=np.int64)
        self.mat = np.zeros((0, dim), dtype=np.float32)
        self.statement = np.zeros(0, dtype=bool)  # cue mirror: the row is a statement cue (model-free)

    def sync(self, conn: Conn) -> None:
        head, load = _TABLES[self.table]
        count, max_id = conn.execute(head).fetchone()
        have_max = int(self.ids[-1]) if len(self.ids) else 0
        if count == len(self.ids) and max_id == have_max:
            return
        rows = conn.execute(load, (have_max,)).fetchall()
        if len(self.ids) + len(rows) != count:
            self.clear()
            rows = conn.execute(load, (0,)).fetchall()
        if rows:
            self.ids = np.concatenate([self.ids, np.array([r[0] for r in rows], dtype=np.int64)])
            self.turns = np.concatenate([self.turns, np.array([r[1] for r in rows], dtype=np.int64)])
            vecs = np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype=np.float32).reshape(len(rows), self.dim)
            self.mat = np.concatenate([self.mat, vecs])
            self._append_extra(rows)

    def clear(self) -> None:
        self.ids = self.ids[:0]
        self.turns = self.turns[:0]
        self.mat = np.zeros((0, self.dim), dtype=np.float32)
        self.statement = self.statement[:0]

    def _append_extra(self, rows: list[tuple[object, ...]]) -> None:
        """Hook for mirrors that keep more per-row data than vectors."""
        if self.table == "cue":
            self.statement = np.concatenate([self.statement, np.array([bool(r[3]) for r in rows], dtype=bool)])

    def top(self, qvec: np.ndarray, k: int) -> list[tuple[int, int, float]]:
        """The k rows most similar to ``qvec``, best first: (row id, turn id, cosine)."""
        n = len(self.ids)
        if n == 0 or k <= 0:
            return []
        sims = self.mat @ qvec.astype(np.float32)
        if k < n:
            idx = np.argpartition(-sims, k - 1)[:k]
            idx = idx[np.argsort(-sims[idx], kind="stable")]
        else:
            idx = np.argsort(-sims, kind="stable")
        return [(int(self.ids[i]), int(self.turns[i]), float(sims[i])) for i in idx]

    def index_of(self, ids: np.ndarray) -> np.ndarray:
        """Positions of row ids in the mirror (ids are kept in ascending order); -1 where absent."""
        pos = np.searchsorted(self.ids, ids)
        pos = np.clip(pos, 0, max(len(self.ids) - 1, 0))
        ok = (len(self.ids) > 0) & (self.ids[pos] == ids) if len(self.ids) else np.zeros(len(ids), dtype=bool)
        return np.where(ok, pos, -1)


class TurnMirror(VectorMirror):
    """The turn mirror also keeps what reconstruct scores with, per turn: session id,
    order in session, words of its context line ("Speaker: text"), speaker and time."""

    def __init__(self, dim: int) -> None:
        super().__init__("turn", dim)
        self.session = np.zeros(0, dtype=np.int64)
        self.ord = np.zeros(0, dtype=np.int64)
        self.line_words = np.zeros(0, dtype=np.int64)
        self.speaker: list[str] = []
        self.ts = np.zeros(0, dtype="U19")
        self._order = np.zeros(0, dtype=np.int64)
        self._rank: np.ndarray | None = None

    def clear(self) -> None:
        super().clear()
        self.session = self.session[:0]
        self.ord = self.ord[:0]
        self.line_words = self.line_words[:0]
        self.speaker = []
        self.ts = self.ts[:0]
        self._rank = None

    def _append_extra(self, rows: list[tuple[object, ...]]) -> None:
        self.session = np.concatenate([self.session, np.array([r[3] for r in rows], dtype=np.int64)])
        self.ord = np.concatenate([self.ord, np.array([r[4] for r in rows], dtype=np.int64)])
        speakers = [str(r[6]) for r in rows]
        # "Speaker: text" adds the speaker's words to the turn's own.
        self.line_words = np.concatenate(
            [
                self.line_words,
                np.array([line_word_cost(int(str(r[5])), sp) for r, sp in zip(rows, speakers, strict=True)]),
            ]
        )
        self.speaker.extend(speakers)
        self.ts = np.concatenate([self.ts, np.array([str(r[7]) for r in rows], dtype="U19")])
        self._rank = None

    def neighbour(self, pos: np.ndarray, offset: int) -> np.ndarray:
        """Mirror position of the turn ``offset`` places away in the same session
        (places, not ord values, so gaps left by forget do not break adjacency), or -1."""
        if self._rank is None:
            self._order = np.lexsort((self.ord, self.session))
            self._rank = np.empty(len(self._order), dtype=np.int64)
            self._rank[self._order] = np.arange(len(self._order))
        j = self._rank[pos] + offset
        inside = (j >= 0) & (j < len(self._order))
        cand = self._order[np.clip(j, 0, max(len(self._order) - 1, 0))]
        same = inside & (self.session[cand] == self.session[pos])
        return np.where(same, cand, -1)
