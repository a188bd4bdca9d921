"""In-memory mirrors of the vec0 tables, for nearest-neighbour search in numpy.

vec0 holds the vectors durably; a mirror holds (row id, turn id, unit vector) for every
row in one float32 matrix, so a query is one matrix-vector product. Measured on the
2-core dev machine at 10k turns / 20k cues, vec0's brute-force KNN took 26 ms (turns)
and 52 ms (cues) per query against a few ms for the mirror, and one KNN query per new
cue made linking dominate ingest.

Invariants:
- a mirror object never changes once built: a refresh makes a new one (sharing the
  unchanged arrays), so whoever holds a mirror holds one fixed state of its table;
- :class:`Mirrors` refreshes the turn and cue mirrors together, inside one read
  transaction, so a :class:`MirrorView` shows both tables as of one commit: every cue
  row's turn is in the turn mirror unless that turn has no vector (then its position
  is -1, never an index past the end);
- a refresh loads only rows newer than the newest held, which is exact while rows are
  only added (SQLite gives a new row max(id) + 1). Deletes and updates of mirrored
  columns, after which ids may be given out again, bump a counter in ``mirror_epochs``
  (migration 0009, triggers) in the same transaction; a table whose counter moved is
  reloaded whole. Rows loaded inside another caller's write transaction that then
  rolls back are dropped too (a rollback hook), since their ids will be reused.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from localmem.errors import EmbedderMismatch
from localmem.storage.db import Conn
from localmem.util.text import line_word_cost

_EPOCHS = "SELECT turns, cues FROM mirror_epochs WHERE id = 1"
_versions = itertools.count(1)  # every mirror state gets its own number, across objects
M = TypeVar("M", bound="VectorMirror")


class VectorMirror:
    """Row ids, turn ids and unit vectors of one vec0 table, in ascending id order."""

    # Load query: rows (row id, turn id, vector blob, extra columns...) with id > ?.
    load_sql = ""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.ids = np.zeros(0, dtype=np.int64)
        self.turns = np.zeros(0, dtype=np.int64)
        self.mat = np.zeros((0, dim), dtype=np.float32)
        self.version = next(_versions)

    @property
    def newest(self) -> int:
        return int(self.ids[-1]) if len(self.ids) else 0

    def synced(self: M, conn: Conn) -> M:
        """This mirror plus the table's rows newer than its newest (itself if none)."""
        rows = conn.execute(self.load_sql, (self.newest,)).fetchall()
        if not rows:
            return self
        blob = b"".join(bytes(r[2]) for r in rows)
        if len(blob) != 4 * self.dim * len(rows):
            raise EmbedderMismatch(
                f"the stored vectors are not {self.dim}-d: another process re-embedded the store with "
                "another embedder (reindex); open it again with that embedder"
            )
        new = copy.copy(self)
        new.ids = np.concatenate([self.ids, np.array([r[0] for r in rows], dtype=np.int64)])
        new.turns = np.concatenate([self.turns, np.array([r[1] for r in rows], dtype=np.int64)])
        vecs = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), self.dim)
        new.mat = np.concatenate([self.mat, vecs])
        new._extend(rows)
        new.version = next(_versions)
        return new

    def _extend(self, rows: list[tuple[Any, ...]]) -> None:
        """Append the extra columns of ``rows`` (on a fresh copy: build new arrays)."""

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
        ids = np.asarray(ids, dtype=np.int64)
        if len(self.ids) == 0:
            return np.full(len(ids), -1, dtype=np.int64)
        pos = np.clip(np.searchsorted(self.ids, ids), 0, len(self.ids) - 1)
        return np.where(self.ids[pos] == ids, pos, -1)


class CueMirror(VectorMirror):
    """The cue mirror also says which rows are statement cues (the model-free ones)."""

    load_sql = (
        "SELECT c.id, c.turn_id, v.embedding, c.kind = 'statement' FROM cues c JOIN cue_vec v ON v.cue_id = c.id "
        "WHERE c.id > ? ORDER BY c.id"
    )

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.statement = np.zeros(0, dtype=bool)

    def _extend(self, rows: list[tuple[Any, ...]]) -> None:
        self.statement = np.concatenate([self.statement, np.array([bool(r[3]) for r in rows], dtype=bool)])


class TurnMirror(VectorMirror):
    """The turn mirror also keeps what reconstruct scores with, per turn: session id,
    order in session, words of its context line ("Speaker: text"), speaker and time."""

    load_sql = (
        "SELECT t.id, t.id, v.embedding, t.session_id, t.ord, t.words, t.speaker, coalesce(t.ts, '') "
        "FROM turns t JOIN turn_vec v ON v.turn_id = t.id WHERE t.id > ? ORDER BY t.id"
    )

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.session = np.zeros(0, dtype=np.int64)
        self.ord = np.zeros(0, dtype=np.int64)
        self.line_words = np.zeros(0, dtype=np.int64)
        self.speaker: list[str] = []
        self.ts = np.zeros(0, dtype="U19")
        self._order = np.zeros(0, dtype=np.int64)
        self._rank: np.ndarray | None = None

    def _extend(self, rows: list[tuple[Any, ...]]) -> None:
        self.session = np.concatenate([self.session, np.array([r[3] for r in rows], dtype=np.int64)])
        self.ord = np.concatenate([self.ord, np.array([r[4] for r in rows], dtype=np.int64)])
        speakers = [str(r[6]) for r in rows]
        # "Speaker: text" adds the speaker's words to the turn's own.
        words = [line_word_cost(int(r[5]), sp) for r, sp in zip(rows, speakers, strict=True)]
        self.line_words = np.concatenate([self.line_words, np.array(words, dtype=np.int64)])
        self.speaker = [*self.speaker, *speakers]
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


class MirrorView:
    """Both mirrors as of one commit, and for each cue row its turn's position in the
    turn mirror (-1 when that turn has no row there)."""

    def __init__(self, turn: TurnMirror, cue: CueMirror) -> None:
        self.turn = turn
        self.cue = cue
        self.cue_pos = turn.index_of(cue.turns)


class Mirrors:
    """The mirrors of one connection and the read snapshots they are refreshed in."""

    def __init__(self, conn: Conn, dim: Callable[[], int]) -> None:
        self.conn = conn
        self._dim = dim
        self._view: MirrorView | None = None
        self._epochs: tuple[int, int] | None = None  # (turns, cues) counters the view was loaded at
        self._depth = 0  # nesting of snapshot()
        self._own = False  # the current snapshot opened its own read transaction
        self._fresh = False  # the view was refreshed inside the current snapshot
        self._tentative = False  # rows were loaded inside a transaction that may yet roll back
        self._stale = False
        conn.set_rollback_hook(self._rolled_back, id="localmem.mirrors")

    def _rolled_back(self) -> None:
        if self._tentative:
            self._stale, self._tentative = True, False

    def clear(self) -> None:
        """Forget both mirrors (the next view reloads them)."""
        self._view, self._epochs = None, None

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Everything read on the connection inside, mirrors included, is of one commit.
        Opens a read transaction (BEGIN ... COMMIT) unless one is open already (a
        caller's write transaction: then its own uncommitted rows are seen too).
        Re-entrant; the mirrors are refreshed at most once per snapshot."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        own = not self.conn.in_transaction
        if own:
            self.conn.execute("BEGIN")  # deferred: the read view is fixed at the first read
        self._depth, self._own, self._fresh = 1, own, False
        try:
            yield
        finally:
            self._depth, self._fresh = 0, False
            if own and self.conn.in_transaction:
                self.conn.execute("COMMIT")  # nothing written: this only ends the read view

    def view(self) -> MirrorView:
        """Both mirrors as of the current snapshot (a one-off snapshot outside one)."""
        if not self._depth:
            with self.snapshot():
                return self.view()
        if self._view is None or not self._fresh:
            self._view = self._refresh(self._view)
            self._fresh = True
        return self._view

    def _refresh(self, view: MirrorView | None) -> MirrorView:
        dim = self._dim()
        if self._stale or view is None or view.turn.dim != dim:
            view, self._epochs, self._stale = MirrorView(TurnMirror(dim), CueMirror(dim)), None, False
        if self._own:
            self._tentative = False  # no foreign transaction is open: the last one ended
        turns_epoch, cues_epoch = self.conn.one(_EPOCHS)
        have = self._epochs
        turn = view.turn if have is not None and have[0] == turns_epoch else TurnMirror(dim)
        cue = view.cue if have is not None and have[1] == cues_epoch else CueMirror(dim)
        turn, cue = turn.synced(self.conn), cue.synced(self.conn)
        self._epochs = (int(turns_epoch), int(cues_epoch))
        if turn is view.turn and cue is view.cue:
            return view
        if not self._own:
            self._tentative = True
        return MirrorView(turn, cue)
