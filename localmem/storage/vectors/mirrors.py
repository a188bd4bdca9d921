"""Both vector mirrors of one connection, refreshed together inside read snapshots.

Invariants:
- :class:`Mirrors` refreshes the turn and cue mirrors together, inside one read
  transaction, so a :class:`MirrorView` shows both tables as of one commit: every cue
  row's turn is in the turn mirror unless that turn has no vector (then its position
  is -1, never an index past the end); exact vectors read inside the same snapshot
  belong to the same commit;
- a mirror refresh loads only new rows (:mod:`localmem.storage.vectors.table_mirror`). Deletes and
  updates of mirrored columns, after which ids may be given out again, bump a counter
  in ``mirror_epochs`` (migration 0009, triggers) in the same transaction; a table whose
  counter moved is reloaded whole. Rows loaded inside another caller's write
  transaction that then rolls back are dropped too (a rollback hook), since their ids
  will be reused;
- a table reloaded whole starts from its snapshot in the store when one was written at
  its current counter (:mod:`localmem.storage.vectors.snapshots`), which gives the same
  arrays. A connection that loaded more than ``SNAPSHOT_ROWS`` rows (or a tenth of the
  table, when more) beyond the stored snapshot, or with none, saves a new one after its
  own read snapshot ends, in a short write transaction of its own that waits at most
  50 ms for the lock; never inside a caller's transaction, so only committed rows are
  saved, and never failing the read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import numpy as np

from localmem.storage.engine.db import Conn
from localmem.storage.vectors import snapshots
from localmem.storage.vectors.table_mirror import CHUNK, CueMirror, TurnMirror, VectorMirror

_EPOCHS = "SELECT turns, cues FROM mirror_epochs WHERE id = 1"
# Rows a connection loads one by one beyond the stored snapshot before it saves a new one:
# SNAPSHOT_ROWS (~17 ms of loading, against ~100 ms to write a 100k-turn store's 18 MB
# snapshot once), or a tenth of the table when that is more, so a big store (1M turns:
# ~180 MB) is not rewritten every 10,000 rows.
SNAPSHOT_ROWS = 10_000
SNAPSHOT_SHARE = 10
DENSE_SLACK = 65_536  # ids up to 2 x rows + this are looked up through a table by id (<= 4 bytes per id)
M = TypeVar("M", bound=VectorMirror)


class MirrorView:
    """Both mirrors as of one commit, and for each cue row its turn's position in the
    turn mirror (-1 when that turn has no row there)."""

    def __init__(self, turn: TurnMirror, cue: CueMirror) -> None:
        self.turn = turn
        self.cue = cue
        self.cue_pos = _positions(turn, cue.turns)

    def nbytes(self, *, held: bool = True) -> int:
        return self.turn.nbytes(held=held) + self.cue.nbytes(held=held) + int(self.cue_pos.nbytes)


def _positions(turn: TurnMirror, ids: np.ndarray) -> np.ndarray:
    """Each of turn ids ``ids``'s position in ``turn`` (-1 where absent), as int32."""
    out = np.empty(len(ids), dtype=np.int32)
    held = turn.ids
    if len(held) and int(held[0]) >= 0 and int(held[-1]) < 2 * len(held) + DENSE_SLACK:
        # ids nearly 1..n (the usual store): a table by id answers in one pass (~1 ms for
        # 180k cues, against ~6 ms of binary searches)
        table = np.full(int(held[-1]) + 1, -1, dtype=np.int32)
        table[held] = np.arange(len(held), dtype=np.int32)
        for start in range(0, len(ids), CHUNK * 32):  # bounded temporaries on a big store
            part = ids[start : start + CHUNK * 32]
            inside = (part >= 0) & (part <= held[-1])
            out[start : start + len(part)] = np.where(inside, table[np.where(inside, part, 0)], -1)
        return out
    for start in range(0, len(ids), CHUNK * 32):
        rows = slice(start, start + CHUNK * 32)
        out[rows] = turn.index_of(ids[rows])
    return out


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
        self._saved: dict[str, int] = {}  # per table: rows the stored snapshot known here holds
        self.restored: dict[str, int] = {}  # per table: rows its last reload took from a stored snapshot
        self._due = False  # a snapshot is to be saved when the current read snapshot ends
        conn.set_rollback_hook(self._rolled_back, id="localmem.mirrors")

    def _rolled_back(self) -> None:
        if self._tentative:
            self._stale, self._tentative = True, False

    @property
    def depth(self) -> int:
        """How many ``snapshot()`` blocks are open (1: the outermost)."""
        return self._depth

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
        if self._due:  # the read went through; its transaction has ended
            self._save()

    def last(self) -> MirrorView | None:
        """The view loaded last, as it was (possibly stale; None before the first load)."""
        return self._view

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
        turn = view.turn if have is not None and have[0] == turns_epoch else self._start(TurnMirror(dim), turns_epoch)
        cue = view.cue if have is not None and have[1] == cues_epoch else self._start(CueMirror(dim), cues_epoch)
        turn, cue = turn.synced(self.conn), cue.synced(self.conn)
        self._epochs = (int(turns_epoch), int(cues_epoch))
        if self._own and self._unsaved(turn, cue):
            self._due = True
        if turn is view.turn and cue is view.cue:
            return view
        if not self._own:
            self._tentative = True
        return MirrorView(turn, cue)

    def _start(self, empty: M, epoch: int) -> M:
        """A table's mirror to load from: its stored snapshot at ``epoch``, else ``empty``."""
        got = snapshots.load(self.conn, empty, int(epoch))
        self._saved[empty.kind] = self.restored[empty.kind] = 0 if got is None else len(got.ids)
        return empty if got is None else got

    def _unsaved(self, *mirrors: VectorMirror) -> list[VectorMirror]:
        due = []
        for m in mirrors:
            saved = self._saved.get(m.kind, 0)
            if len(m.ids) - saved > max(SNAPSHOT_ROWS, saved // SNAPSHOT_SHARE):
                due.append(m)
        return due

    def _save(self) -> None:
        """Save the snapshot of each table loaded far beyond the stored one (best-effort).
        Busy or not, the connection tries again only ``SNAPSHOT_ROWS`` rows later."""
        self._due = False
        view, epochs = self._view, self._epochs
        if view is None or epochs is None or self._stale or self._tentative:
            return
        at = {"turns": epochs[0], "cues": epochs[1]}
        due = self._unsaved(view.turn, view.cue)
        snapshots.save(self.conn, [(m, at[m.kind]) for m in due])
        for m in due:
            self._saved[m.kind] = len(m.ids)
