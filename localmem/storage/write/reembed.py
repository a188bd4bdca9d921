"""``localmem reembed``: every turn and cue embedded again with another embedder, into
a second set of vector tables, while reads keep using the live set; then one switch.

The SQL is ``storage/vectors/rebuild``; this module drives it: read a batch of what the
next tables lack, embed it outside any transaction (as the write path would:
``vectorize.turn_vectors`` for a turn and its statement cues, ``turn_doc`` for an
extracted cue), write it in one short transaction, repeat; then sweep again for what
was written or changed meanwhile and switch, in one transaction, once nothing is left.

Invariants:
- resumable: progress is what the next tables hold, so a build killed at any point
  continues from its last committed batch, and ends as an uninterrupted one would (the
  same rows, the same vectors: an embedder's vector of a text does not depend on its batch);
- the switch happens only when the next set covers every turn and cue (checked inside
  the switch's transaction); the old tables are dropped in that same transaction;
- no model call inside a transaction; a lock held by another process is waited out
  (``Store.retrying``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

import numpy as np

from localmem.errors import StoreError
from localmem.models.embedding import Embedder
from localmem.storage.engine import db
from localmem.storage.vectors import rebuild
from localmem.storage.write.binding import spec_of
from localmem.storage.write.store import Store
from localmem.storage.write.vectorize import turn_doc, turn_vectors

BATCH = 128  # turns (and extracted cues) per transaction: a few seconds of model time at most
MAX_PASSES = 50  # sweeps for rows written meanwhile before giving up on a store that never stops growing

OnBatch = Callable[[int, int], None]  # (units done, units in all) after each committed batch


@dataclass(frozen=True)
class Report:
    """What a reembed did (``--json``)."""

    embedder: str
    dim: int
    previous: str | None
    switched: bool
    resumed: bool  # a build left by an earlier run was continued
    units: int  # turns and extracted cues in the store (one model pass each)
    embedded: int  # of those, embedded by this run
    seconds: float
    switch_seconds: float = 0.0  # the switch's transaction (the write lock held), the last attempt

    @property
    def rate(self) -> float:
        return self.embedded / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "units_per_second": round(self.rate, 1)}


def reembed(store: Store, embedder: Embedder, *, batch: int = BATCH, on_batch: OnBatch | None = None) -> Report:
    """Move ``store`` to ``embedder`` (see the module docstring). A store already on it
    is left as it is (a build for it, if any, is discarded)."""
    start = time.monotonic()
    conn = store.conn
    before = rebuild.recorded(conn)
    previous = before.embedder_id if before else None
    if before is not None and before.embedder_id == embedder.model_id and before.dim == embedder.dim:
        store.retrying(lambda: _in_transaction(store, lambda: rebuild.discard(conn)))
        total = rebuild.units(conn)
        return Report(embedder.model_id, embedder.dim, previous, False, False, total, 0, time.monotonic() - start)
    build, resumed = store.retrying(lambda: _in_transaction(store, lambda: _begin(conn, embedder)))
    total, done = rebuild.sizes(conn)
    progress = _Counter(done, total, on_batch)
    switch = 0.0
    for _ in range(MAX_PASSES):
        for stale in (False, True):
            _sweep(store, embedder, build, batch, stale, progress)
        t0 = time.monotonic()
        switched = store.retrying(lambda: _in_transaction(store, lambda: rebuild.switch(conn, build)))
        switch = time.monotonic() - t0
        if switched:
            break
        if rebuild.current(conn) != build:
            raise StoreError(f"{store.path}: the reembed to {build.embedder_id!r} was discarded by another process")
    else:
        raise StoreError(
            f"{store.path}: turns kept arriving faster than they were embedded; run `localmem reembed` again"
        )
    store.embedder = embedder
    store.forget_mirrors()  # this process's mirrors hold the old vectors' codes
    seconds = time.monotonic() - start
    return Report(
        embedder.model_id, embedder.dim, previous, True, resumed, total, progress.embedded, seconds, round(switch, 3)
    )


def discard(store: Store) -> str | None:
    """Drop an unfinished build and its tables; returns the embedder it was for (None: none)."""

    def drop() -> str | None:
        with db.transaction(store.conn):
            build = rebuild.current(store.conn)
            rebuild.discard(store.conn)
            return build.embedder_id if build else None

    return store.retrying(drop)


class _Counter:
    def __init__(self, done: int, total: int, on_batch: OnBatch | None) -> None:
        self.done, self.total, self.embedded, self.on_batch = done, total, 0, on_batch
        self.report()

    def add(self, n: int) -> None:
        self.done, self.embedded = self.done + n, self.embedded + n
        self.total = max(self.total, self.done)  # turns written meanwhile
        self.report()

    def report(self) -> None:
        if self.on_batch:
            self.on_batch(self.done, self.total)


def _sweep(store: Store, embedder: Embedder, build: rebuild.Build, batch: int, stale: bool, progress: _Counter) -> None:
    """Embed and write, batch by batch, what the next tables lack (``stale``: turns whose
    statement cues lack a vector), by ascending id."""
    after_turn = after_cue = 0
    mode = store.params.cue_vectors
    while True:
        turns, cues = rebuild.todo(store.conn, batch, after_turn, after_cue, stale=stale)
        if not turns and not cues:
            return
        tvecs, cvecs = turn_vectors(
            embedder, mode, [(w.speaker, w.text, w.ts, [(a, b) for _c, a, b in w.cues]) for w in turns]
        )
        evecs = embedder.embed([turn_doc(c.speaker, c.text, c.ts) for c in cues]) if cues else np.zeros((0, build.dim))
        rows = list(zip(turns, tvecs, cvecs, strict=True))
        extracted = list(zip(cues, evecs, strict=True))
        written: int = store.retrying(partial(_put, store, build, rows, extracted))
        if written == 0 and rebuild.current(store.conn) != build:
            raise StoreError(f"{store.path}: the reembed to {build.embedder_id!r} was discarded by another process")
        progress.add(written)
        if stale:
            return  # no cursor here: what is still stale is found by the next pass
        after_turn = turns[-1].id if turns else 1 << 62
        after_cue = cues[-1].id if cues else 1 << 62


def _put(
    store: Store,
    build: rebuild.Build,
    turns: list[tuple[rebuild.TurnWork, np.ndarray, np.ndarray]],
    cues: list[tuple[rebuild.CueWork, np.ndarray]],
) -> int:
    with db.transaction(store.conn):
        return rebuild.put_batch(store.conn, build, turns, cues)


def _in_transaction(store: Store, fn: Callable[[], Any]) -> Any:
    with db.transaction(store.conn):
        return fn()


def _begin(conn: db.Conn, embedder: Embedder) -> tuple[rebuild.Build, bool]:
    """The build for ``embedder``: the one left by an earlier run, else a new one."""
    found = rebuild.current(conn)
    resumed = found is not None and found.embedder_id == embedder.model_id and found.dim == embedder.dim
    if not resumed:
        rebuild.start(conn, embedder.model_id, embedder.dim, spec_of(embedder))
    build = rebuild.current(conn)
    assert build is not None
    return build, resumed
