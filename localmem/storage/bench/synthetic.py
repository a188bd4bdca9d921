"""Bench-only bulk writes: synthetic stores for ``localmem bench scale``, and the few edits
other benchmarks make to a store they built.

A synthetic store holds the rows ``Store.write`` would make for the same sessions (each
turn goes through ``prepare``: same hash, time, words and statement cues), written with
``executemany`` in one transaction per chunk instead of turn by turn: sessions, turns,
statement cues, both FTS indexes, ``turn_vec`` / ``cue_vec`` (whose triggers fill the
mirrors' code tables, as on the write path), one extraction job per turn, temporal edges
(the store's window and weights) and the semantic edges the caller computed. The
caller (``localmem/bench/synthetic.py``) generates the sessions, the vectors and the
semantic edges; this module lays the rows out and writes them.

Invariants:
- bench-only: none of these writes goes through the change journal (``changes``). A
  synthetic store is a measuring fixture rebuilt from its recipe, never synced, and its
  writer's connection runs with ``synchronous = OFF`` and ``foreign_keys = OFF`` (a torn
  build is rebuilt; ids are made consistent here, not looked up per row);
- ids are assigned here, carried from chunk to chunk by one ``SyntheticWriter``, so a
  store is built by one writer into a store that has no turns yet;
- the WAL is checkpointed after every chunk, so it stays the size of one chunk.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from localmem.records import SessionIn
from localmem.storage.engine import db
from localmem.storage.engine.inlist import marks
from localmem.storage.write.jobs import EXTRACT, enqueue
from localmem.storage.write.prepare import prepare
from localmem.storage.write.vectorize import turn_doc
from localmem.util.text import count_words

# The writer's connection only: see the module docstring; the big page cache keeps the
# indexes' hot pages in memory.
_PRAGMAS = ("synchronous = OFF", "foreign_keys = OFF", "cache_size = -262144")

SemanticEdge = tuple[int, int, float]  # lower turn id, higher turn id, cosine


@dataclass
class Layout:
    """A chunk of sessions laid out as rows, ids assigned. ``cue_pos`` (per statement cue:
    the index in the chunk of its turn) and ``cue_turns`` (its turn's id) are what the
    caller needs to make the cue vectors and the semantic edges; the rows are for
    ``SyntheticWriter.write``."""

    cue_pos: np.ndarray
    cue_turns: np.ndarray
    _turn_ids: list[int] = field(repr=False)
    _sessions: list[tuple[object, ...]] = field(repr=False)
    _turns: list[tuple[object, ...]] = field(repr=False)
    _fts: list[tuple[int, str]] = field(repr=False)
    _cues: list[tuple[int, int, str, int, int]] = field(repr=False)
    _cfts: list[tuple[int, str]] = field(repr=False)
    _temporal: list[tuple[int, int, float]] = field(repr=False)


class SyntheticWriter:
    """Bulk writer of one synthetic store at ``path`` (already made and bound to its
    embedder by ``Store``). Use as a context manager; ``finish`` records the recipe."""

    def __init__(self, path: Path, temporal_window: int) -> None:
        self.window = temporal_window
        self.sessions = self.turns = self.cues = 0  # the last ids written
        self.conn = db.connect(path)
        for pragma in _PRAGMAS:
            self.conn.execute(f"PRAGMA {pragma}")

    def __enter__(self) -> SyntheticWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def lay_out(self, sessions: Sequence[SessionIn]) -> Layout:
        """The rows of ``sessions``, with the next ids (kept: the next chunk follows on)."""
        srows: list[tuple[object, ...]] = []
        trows: list[tuple[object, ...]] = []
        fts: list[tuple[int, str]] = []
        cues: list[tuple[int, int, str, int, int]] = []
        cfts: list[tuple[int, str]] = []
        temporal: list[tuple[int, int, float]] = []
        cue_turn: list[int] = []
        cue_pos: list[int] = []
        tids: list[int] = []
        w = self.window
        at = 0
        for sess in sessions:
            self.sessions += 1
            srows.append((self.sessions, sess.source, sess.key, sess.title, sess.started_at))
            for ord_, t in enumerate(sess.turns):
                p = prepare(sess, t, ord_)
                if p is None:  # nothing but memory a hook injected
                    continue
                self.turns += 1
                tid = self.turns
                tids.append(tid)
                trows.append(
                    (
                        tid,
                        self.sessions,
                        ord_,
                        t.speaker,
                        t.role,
                        t.text,
                        p.ts,
                        t.source_id,
                        p.hash,
                        count_words(t.text),
                    )
                )
                fts.append((tid, turn_doc(t.speaker, t.text, p.ts)))
                for back in range(1, min(w, ord_) + 1):
                    temporal.append((tid - back, tid, 1.0 / back))
                for s, e in p.spans:
                    self.cues += 1
                    cues.append((self.cues, tid, t.text[s:e], s, e))
                    cfts.append((self.cues, turn_doc(t.speaker, t.text[s:e], p.ts)))
                    cue_turn.append(tid)
                    cue_pos.append(at)
                at += 1
        return Layout(
            cue_pos=np.array(cue_pos, dtype=np.int64),
            cue_turns=np.array(cue_turn),
            _turn_ids=tids,
            _sessions=srows,
            _turns=trows,
            _fts=fts,
            _cues=cues,
            _cfts=cfts,
            _temporal=temporal,
        )

    def write(
        self, layout: Layout, turn_vecs: np.ndarray, cue_vecs: np.ndarray, semantic: Sequence[SemanticEdge]
    ) -> None:
        """Write a laid-out chunk in one transaction: its rows, one vector per turn and per
        cue (in layout order), its extraction jobs and ``semantic`` edges (a pair already
        linked keeps the higher weight); then checkpoint the WAL."""
        tids = layout._turn_ids
        tvec = [(tid, turn_vecs[i].tobytes()) for i, tid in enumerate(tids)]
        cvec = [(cid, v.tobytes()) for (cid, *_rest), v in zip(layout._cues, cue_vecs, strict=True)]
        conn = self.conn
        with db.transaction(conn):
            conn.executemany(
                "INSERT INTO sessions(id, source, key, title, started_at) VALUES (?, ?, ?, ?, ?)", layout._sessions
            )
            conn.executemany(
                "INSERT INTO turns(id, session_id, ord, speaker, role, text, ts, source_id, hash, words) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                layout._turns,
            )
            conn.executemany("INSERT INTO turns_fts(rowid, doc) VALUES (?, ?)", layout._fts)
            enqueue(conn, EXTRACT, tids)
            conn.executemany("INSERT INTO turn_vec(turn_id, embedding) VALUES (?, ?)", tvec)
            conn.executemany(
                "INSERT INTO cues(id, turn_id, kind, text, span_start, span_end) VALUES (?, ?, 'statement', ?, ?, ?)",
                layout._cues,
            )
            conn.executemany("INSERT INTO cues_fts(rowid, doc) VALUES (?, ?)", layout._cfts)
            conn.executemany("INSERT INTO cue_vec(cue_id, embedding) VALUES (?, ?)", cvec)
            conn.executemany("INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, 'temporal', ?)", layout._temporal)
            conn.executemany(
                "INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, 'semantic', ?) "
                "ON CONFLICT(src, dst, kind) DO UPDATE SET weight = max(weight, excluded.weight)",
                semantic,
            )
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # keep the WAL to one chunk

    def finish(self, recipe: str) -> None:
        """Record what the store was built from (``meta.bench_synthetic``): a later build
        with the same recipe keeps it."""
        with db.transaction(self.conn):
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('bench_synthetic', ?)", (recipe,))
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def add_antecedent_edges(conn: db.Conn, per_turn: int, seed: int = 0) -> None:
    """``per_turn`` antecedent edges (weight 0.8, reason ``synthetic``) into every turn
    from random earlier turns, once per store (none added when it has any already): the
    read cost of CABLE's expansion on a dense graph, no model needed. Not journaled."""
    if conn.execute("SELECT 1 FROM edges WHERE kind = 'antecedent' LIMIT 1").fetchone():
        return
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM turns ORDER BY id")]
    rng = random.Random(seed)
    edges = [(rng.choice(ids[:i]), ids[i]) for i in range(1, len(ids)) for _ in range(per_turn)]
    with db.transaction(conn):
        conn.executemany(
            "INSERT OR IGNORE INTO edges(src, dst, kind, weight, reason) VALUES (?, ?, 'antecedent', 0.8, 'synthetic')",
            edges,
        )


def drop_jobs_outside_sessions(conn: db.Conn, keys: Sequence[str]) -> None:
    """Remove the queued jobs of turns whose session's key is not in ``keys`` (a bench
    that enriches only some sessions of a store)."""
    with db.transaction(conn):
        conn.execute(
            f"DELETE FROM jobs WHERE turn_id IN (SELECT t.id FROM turns t JOIN sessions s "
            f"ON s.id = t.session_id WHERE s.key NOT IN ({marks(len(keys))}))",
            list(keys),
        )


def keep_jobs_of_first_turns(conn: db.Conn, limit: int) -> None:
    """Remove the queued jobs of every turn but the first ``limit`` (by session, then
    order in it): a bench that enriches a store's first turns only."""
    with db.transaction(conn):
        conn.execute(
            "DELETE FROM jobs WHERE turn_id NOT IN (SELECT id FROM turns ORDER BY session_id, ord LIMIT ?)", (limit,)
        )


def spread_projects(conn: db.Conn, folders: Sequence[str], client: str = "claude-code") -> None:
    """Give every session a project, the ``folders`` in turn (session id modulo their
    number), as a coding agent's sessions would have: what a project-scoped read (the
    hooks bench) selects on. Not journaled."""
    with db.transaction(conn):
        conn.executemany(
            "UPDATE sessions SET client = ?, cwd = ? WHERE id % ? = ?",
            [(client, folder, len(folders), i) for i, folder in enumerate(folders)],
        )
