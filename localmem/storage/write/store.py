"""The store: one SQLite file holding sessions, turns, cues, edges and their indexes.

This module owns the write side (write, link, forget, reindex) and the embedder binding;
read-side SQL lives in ``storage/reads/``, scoring in ``localmem/retrieval/``. Sessions and
turns written and turns forgotten pass the door for changes (``write/changes.py``), which
journals them in the same transaction; their statement cues, vectors, FTS rows, edges and
jobs are derived.

Invariants:
- a turn, its statement cues, their FTS rows, their vectors and its temporal edges
  are written in one transaction; ``write`` returns only after it commits;
- content is identified by a hash, so writing the same turns again writes nothing
  (no journal row either);
- model calls (embedding) happen before the transaction opens, never inside it;
- vectors of two embedding models are never mixed: model id, dimension and spec are
  recorded on first use; another embedder raises ``EmbedderMismatch`` (``follow``: loads
  the recorded one); each read snapshot and vector write checks again (``write/binding``);
- a store replaced under this process is never checkpointed into (``engine.identity``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from localmem.config import RetrievalParams, Settings
from localmem.errors import InputError
from localmem.models.embedding import Embedder, OnnxMiniLM
from localmem.records import SessionIn, TurnIn, WriteResult
from localmem.storage.engine import db, identity
from localmem.storage.engine.inlist import rows_in
from localmem.storage.engine.retry import Patience
from localmem.storage.vectors import rebuild
from localmem.storage.vectors.mirrors import Mirrors, MirrorView
from localmem.storage.vectors.table_mirror import TurnMirror, VectorMirror
from localmem.storage.write import binding, changes, forgets, injections, rows
from localmem.storage.write.graph import link_semantic
from localmem.storage.write.pipeline import pipelined
from localmem.storage.write.prepare import Prepared, Staged, injected_candidates, prepare_all, session_fields, title
from localmem.storage.write.vectorize import TurnSpec, turn_doc, turn_vectors
from localmem.util.text import parse_time

Progress = Callable[[int], None]
R = TypeVar("R")
T = TypeVar("T")
Vectors = dict[str, tuple[np.ndarray, np.ndarray]]  # turn hash -> (turn vector, its cue vectors)


class Store:
    """A memory store on one SQLite file. Use ``localmem.open(path)`` to get one."""

    patience: Patience | None = None  # None: busy errors reach the caller; else waited out (CLI, watcher)

    def __init__(
        self,
        path: str | Path,
        embedder: Embedder | None = None,
        settings: Settings | None = None,
        *,
        rebind: bool = False,
        follow: binding.Loader | None = None,
    ) -> None:
        """``rebind=True`` opens a store built with another embedder, for ``reindex`` and
        ``reembed``. ``follow``: load the embedder the store records (by its spec) instead
        of refusing when it is not ``embedder`` (``write/binding``)."""
        self.path = Path(path) if str(path) != ":memory:" else Path(":memory:")
        self.settings = settings or Settings(db=self.path)
        self.conn = db.connect(path)
        db.migrate(self.conn)
        identity.stamp(self.conn)
        self._file = identity.capture(self.conn, self.path)
        if embedder is None:
            embedder = OnnxMiniLM()
        self.embedder = embedder
        self._follow = follow
        self._rebind = rebind
        self._mirrors = Mirrors(self.conn, lambda: self.embedder.dim)
        if not rebind:
            self._bind_embedder()

    def snapshot(self) -> AbstractContextManager[None]:
        """A consistent read: every query on ``conn`` inside, and the vector mirrors,
        see one commit, whatever other processes write or forget meanwhile. Re-entrant;
        inside a write transaction it reads that transaction's view. The outermost one
        first checks, in that view, that the store's vectors are still this embedder's
        (a ``reembed`` may have switched them): a following store loads the new one."""
        return self._checked_snapshot()

    @contextmanager
    def _checked_snapshot(self) -> Iterator[None]:
        with self._mirrors.snapshot():
            if self._mirrors.depth == 1 and not self._rebind:
                self._recheck()
            yield

    def _recheck(self) -> None:
        # One indexed row per read; its first read also fixes the snapshot's view.
        if not binding.matches(rebuild.recorded(self.conn), self.embedder):
            self.embedder = binding.resolve(self.conn, self.path, self.embedder, self._follow)

    def mirrors(self) -> MirrorView:
        """Both vector mirrors as of one commit: the current snapshot's, or the newest."""
        with self.snapshot():  # outside one: a one-off snapshot, checked like any read
            return self._mirrors.view()

    def forget_mirrors(self) -> None:
        """Drop this process's mirrors (the next read loads them again)."""
        self._mirrors.clear()

    def mirror(self, table: str) -> VectorMirror:
        """The in-memory mirror of the ``cue`` or ``turn`` vectors (see :meth:`mirrors`)."""
        view = self.mirrors()
        return view.turn if table == "turn" else view.cue

    def turn_mirror(self) -> TurnMirror:
        return self.mirrors().turn

    @property
    def params(self) -> RetrievalParams:
        return self.settings.retrieval

    def close(self) -> None:
        identity.close(self.conn, self._file)

    def replaced(self) -> str | None:  # why the file at the path is no longer the one opened
        return identity.replaced(self._file)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- embedder binding -------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _bind_embedder(self) -> None:
        if self.meta("embedder_id") is None:
            with db.transaction(self.conn):
                if self.meta("embedder_id") is None:
                    db.create_vector_tables(self.conn, self.embedder.dim)
                    self._set_embedder_meta()
                    return
        self.embedder = binding.resolve(self.conn, self.path, self.embedder, self._follow)

    def _set_embedder_meta(self) -> None:
        rebuild.record_embedder(self.conn, self.embedder.model_id, self.embedder.dim, binding.spec_of(self.embedder))

    def reindex(self, progress: Progress | None = None) -> int:
        """Re-embed every turn and cue with this store's embedder (after a model change)."""
        turns = self.conn.execute("SELECT t.id, t.speaker, t.text, t.ts FROM turns t ORDER BY t.id").fetchall()
        statement: dict[int, list[tuple[int, int, int]]] = {}
        for cid, tid, a, b in self.conn.execute(
            "SELECT id, turn_id, span_start, span_end FROM cues WHERE kind = 'statement' ORDER BY id"
        ):
            statement.setdefault(int(tid), []).append((int(cid), int(a), int(b)))
        tv, per_turn = self._turn_vectors(
            [(sp, text, ts, [(a, b) for _c, a, b in statement.get(int(tid), [])]) for tid, sp, text, ts in turns]
        )
        cue_ids = [c for tid, *_ in turns for c, _a, _b in statement.get(int(tid), [])]
        cue_vecs = [v for vs in per_turn for v in vs]
        if progress:
            progress(len(turns))
        # Model-extracted cues are embedded on their own, as enrichment does.
        extracted = self.conn.execute(
            "SELECT c.id, t.speaker, c.text, t.ts FROM cues c JOIN turns t ON t.id = c.turn_id "
            "WHERE c.kind != 'statement' ORDER BY c.id"
        ).fetchall()
        cue_ids += [int(r[0]) for r in extracted]
        if extracted:
            cue_vecs += list(self.embedder.embed([turn_doc(s, x, ts) for _, s, x, ts in extracted]))
        cv = np.array(cue_vecs, dtype=np.float32).reshape(len(cue_ids), self.embedder.dim)

        def swap() -> None:
            with db.transaction(self.conn):
                db.drop_vector_tables(self.conn)
                db.create_vector_tables(self.conn, self.embedder.dim)
                self._set_embedder_meta()
                self._insert_vectors("turn_vec", "turn_id", [r[0] for r in turns], tv)
                self._insert_vectors("cue_vec", "cue_id", cue_ids, cv)

        self.retrying(swap)
        self.forget_mirrors()  # same ids, new vectors: mirrors must be rebuilt
        return len(turns)

    def _insert_vectors(self, table: str, col: str, ids: Sequence[int], vecs: np.ndarray) -> None:
        self.conn.executemany(
            f"INSERT INTO {table}({col}, embedding) VALUES (?, ?)",
            [(i, v.astype(np.float32).tobytes()) for i, v in zip(ids, vecs, strict=True)],
        )

    # -- write path -------------------------------------------------------------------

    def retrying(self, fn: Callable[[], R]) -> R:
        """Run the write ``fn`` as ``patience`` says when another process holds the lock."""
        return fn() if self.patience is None else self.patience(fn)

    def write(
        self,
        turns: Sequence[TurnIn] | SessionIn,
        session: str | None = None,
        *,
        source: str = "api",
        started_at: str | None = None,
        origin: str | None = None,
    ) -> WriteResult:
        """Store turns (and their statement cues, vectors, temporal and semantic edges)
        in one transaction. Returns the id of every turn given, new or already stored.
        ``origin``: the device the turns were folded from (None: made here), journaled."""
        if not isinstance(turns, SessionIn):
            turns = SessionIn(session or "default", tuple(turns), started_at, source)
        return self.write_sessions([turns], origin=origin)[0]

    def write_sessions(
        self, sessions: Iterable[SessionIn], progress: Progress | None = None, *, origin: str | None = None
    ) -> list[WriteResult]:
        """Write several sessions in ONE transaction (ingest batches use this)."""
        staged = self.stage(sessions)
        # Embed outside the transaction: model time must not hold the write lock.
        results = self._commit(staged, self.embed(staged.fresh), origin)
        if progress:
            progress(staged.turns)
        return results

    def write_stream(
        self, batches: Iterable[tuple[Sequence[SessionIn], T]], *, origin: str | None = None
    ) -> Iterator[tuple[list[WriteResult], T]]:
        """Write ``(sessions, tag)`` batches, each in its own transaction as
        ``write_sessions`` would, embedding batch k+1 on a worker thread while batch k
        commits. Yields ``(results, tag)`` after each commit, in order; a failure in
        batch k leaves the batches before it committed (and yielded), nothing of k."""
        for results, (_sessions, tag) in pipelined(
            batches, lambda b: self.stage(b[0]), lambda st: self.embed(st.fresh), partial(self._commit, origin=origin)
        ):
            yield results, tag

    def stage(self, sessions: Iterable[SessionIn]) -> Staged:
        # forget wins: a hash in the forget set is not written again (docs/sync.md)
        sessions = list(sessions)
        known = injections.known(self.conn, injected_candidates(sessions))  # memory a hook injected
        staged = [(s, prepare_all(s, self.settings.ingest.redact, known)) for s in sessions]
        prepared = forgets.drop_forgotten(self.conn, staged)
        stored = self._known_hashes([p.hash for _, ps in prepared for p in ps])
        fresh = {p.hash: p for _, ps in prepared for p in ps if p.hash not in stored}
        return Staged(prepared, list(fresh.values()), sum(len(ps) for _, ps in prepared))

    def _commit(self, staged: Staged, vectors: Vectors, origin: str | None = None) -> list[WriteResult]:
        def commit() -> list[WriteResult]:
            with db.transaction(self.conn):
                return self.write_staged(staged, vectors, origin)

        if not staged.sessions:
            return []
        for _ in range(3):
            try:
                return self.retrying(commit)
            except binding.EmbedderSwitched:  # a reembed switched the store: embed with its new embedder
                self.embedder = binding.resolve(self.conn, self.path, self.embedder, self._follow)
                self._mirrors.clear()
                vectors = self.embed(staged.fresh)
        return self.retrying(commit)

    def write_staged(self, staged: Staged, vectors: Vectors, origin: str | None = None) -> list[WriteResult]:
        """Write staged sessions (``stage``, ``embed``) inside the caller's write transaction."""
        if staged.fresh:
            binding.check_write(self.conn, self.embedder)
        results: list[WriteResult] = []
        new_ids: list[int] = []
        for sess, ps in staged.sessions:
            if not ps:  # no turn to store (none given, or all forgotten): no session, so a forgotten one stays gone
                results.append(WriteResult(0, (), 0, 0))
                continue
            sid, first = self._session_id(sess, ps, origin), len(new_ids)
            ids: list[int] = []
            next_ord = self._next_ord(sid)
            for p in ps:
                existing = self.conn.execute("SELECT id FROM turns WHERE hash = ?", (p.hash,)).fetchone()
                if existing is not None:
                    ids.append(int(existing[0]))
                    continue
                if p.hash not in vectors:  # deleted by another process since we looked: rare, embedded here
                    vectors.update(self.embed([p]))
                tid = self._insert_turn(sid, next_ord, p, *vectors[p.hash], origin)
                next_ord += 1
                ids.append(tid)
                new_ids.append(tid)
            new = len(new_ids) - first
            results.append(WriteResult(sid, tuple(ids), new, len(ids) - new))
        if new_ids:
            link_semantic(self.conn, self.mirrors(), new_ids, self.params.semantic_k)
        return results

    def _known_hashes(self, hashes: list[str]) -> set[str]:
        return {str(r[0]) for r in rows_in(self.conn, "SELECT hash FROM turns WHERE hash IN ({marks})", hashes)}

    def embed(self, fresh: list[Prepared]) -> Vectors:
        tvecs, cvecs = self._turn_vectors([(p.turn.speaker, p.turn.text, p.ts, p.spans) for p in fresh])
        return {p.hash: (tvecs[i], cvecs[i]) for i, p in enumerate(fresh)}

    def _turn_vectors(self, turns: Sequence[TurnSpec]) -> tuple[np.ndarray, list[np.ndarray]]:
        """Vectors of turns and of their statement cues (``vectorize.turn_vectors``)."""
        return turn_vectors(self.embedder, self.params.cue_vectors, turns)

    def _session_id(self, sess: SessionIn, ps: list[Prepared], origin: str | None) -> int:
        started = sess.started_at
        if started:
            try:
                started = parse_time(started)
            except ValueError as exc:
                raise InputError(f"session {sess.key!r}: {exc}") from exc
        else:
            started = next((p.ts for p in ps if p.ts), None)
        redact = self.settings.ingest.redact
        write = changes.SessionWrite(sess.source, sess.key, title(sess, redact), started, *session_fields(sess, redact))
        return changes.add_session(self.conn, write, origin=origin)

    def _next_ord(self, session_id: int) -> int:
        row = self.conn.one("SELECT coalesce(max(ord), -1) + 1 FROM turns WHERE session_id = ?", (session_id,))
        return int(row[0])

    def _insert_turn(
        self, sid: int, ord_: int, p: Prepared, tvec: np.ndarray, cvecs: np.ndarray, origin: str | None
    ) -> int:
        return rows.insert_turn(self.conn, sid, ord_, p, tvec, cvecs, self.params.temporal_window, origin)

    # -- forget and stats -------------------------------------------------------------

    def forget(
        self,
        turn_ids: Sequence[int] = (),
        session: str | None = None,
        before: str | None = None,
        source: str | None = None,
        *,
        origin: str | None = None,
    ) -> int:
        """Delete turns (and, by cascade, their cues, edges, vectors, index rows), each
        journaled as forgotten (``origin``: the device the forget was folded from)."""
        clauses: list[str] = []
        args: list[Any] = []
        if turn_ids:
            if out := [i for i in turn_ids if not -(2**63) <= int(i) < 2**63]:
                raise InputError(f"turn id {out[0]} is out of range (no turn has it)")
            clauses.append("id IN (SELECT value FROM json_each(?))")  # any number of ids, one parameter
            args.append(json.dumps([int(i) for i in turn_ids]))
        if session is not None:
            clauses.append("session_id IN (SELECT id FROM sessions WHERE key = ? AND (? IS NULL OR source = ?))")
            args.extend([session, source, source])
        if before is not None:
            try:
                args.append(parse_time(before))
            except (ValueError, OverflowError, OSError) as exc:
                raise InputError(f"the time to forget before ({before!r}) is not a date or time: {exc}") from exc
            clauses.append("ts < ?")
        if not clauses:
            raise InputError("forget needs turn ids, a session, or a time to forget before")

        def delete() -> int:
            with db.transaction(self.conn):
                found = self.conn.execute(f"SELECT hash FROM turns WHERE {' OR '.join(clauses)}", args).fetchall()
                return changes.forget(self.conn, [str(r[0]) for r in found], origin=origin)

        return self.retrying(delete)

    def stats(self) -> dict[str, Any]:
        def one(sql: str) -> int:
            row = self.conn.execute(sql).fetchone()
            return int(row[0]) if row and row[0] is not None else 0

        cue_kinds: dict[str, int] = dict(self.conn.execute("SELECT kind, count(*) FROM cues GROUP BY kind").fetchall())
        edge_kinds: dict[str, int] = dict(
            self.conn.execute("SELECT kind, count(*) FROM edges GROUP BY kind").fetchall()
        )
        size = self.path.stat().st_size if self.path.is_file() else 0
        wal = Path(str(self.path) + "-wal")
        return {
            "db": str(self.path),
            "schema_version": db.user_version(self.conn),
            "embedder": self.meta("embedder_id"),
            "embedder_dim": int(self.meta("embedder_dim") or 0),
            "sessions": one("SELECT count(*) FROM sessions"),
            "turns": one("SELECT count(*) FROM turns"),
            "cues": {k: cue_kinds.get(k, 0) for k in ("statement", "triple", "keyword", "fact")},
            "edges": {k: edge_kinds.get(k, 0) for k in ("temporal", "semantic", "antecedent")},
            "tags": one("SELECT count(*) FROM tags"),
            "topics": one("SELECT count(*) FROM topics WHERE kind = 'session'"),
            "themes": one("SELECT count(*) FROM topics WHERE kind = 'theme'"),
            "jobs_pending": one("SELECT count(*) FROM jobs WHERE state = 'pending'"),
            **dict(zip(("first_turn", "last_turn"), self.conn.one("SELECT min(ts), max(ts) FROM turns"), strict=True)),
            "bytes": size + (wal.stat().st_size if wal.is_file() else 0),
        }
