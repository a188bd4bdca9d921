"""A second set of vector tables built beside the live one, and the switch to it
(``localmem reembed``; migration 0016 says what the tables are).

The next set is the template ``migrations/vectors.sql`` under the names ``turn_vec_next``,
``cue_vec_next``, ``turn_codes_next`` and ``cue_codes_next`` (its code triggers included),
plus triggers that drop a next row when its turn or cue is deleted or rewritten. The
driver (``storage/write/reembed``) embeds outside any transaction and hands each batch
to :func:`put_batch`; readers keep reading the live tables meanwhile.

Invariants:
- at most one build (the ``reembed`` row), and the next tables exist exactly while it does;
- a row is written to a next table only if its turn or cue still reads as it did when it
  was embedded (checked inside the write), so a vector never belongs to other text;
- progress is the next tables themselves: what they lack is what is left (:func:`todo`);
- :func:`switch` runs inside the caller's write transaction and changes nothing unless
  the next set covers every turn and cue: then the live tables are dropped, the next ones
  take their names, meta records the new embedder and ``mirror_epochs`` moves, all in
  that one transaction, so a reader sees one set or the other, never both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from localmem.storage.engine import db
from localmem.storage.engine.db import Conn
from localmem.storage.engine.inlist import rows_in
from localmem.util.lazyre import Lazy

LIVE = ("turn_vec", "cue_vec", "turn_codes", "cue_codes")
_NAMES = Lazy(r"\b(turn_vec|cue_vec|turn_codes|cue_codes)(\w*)")
_TRIGGER = Lazy(r"CREATE TRIGGER .*?\bEND;", re.S)

# Twins of migrations 0007 and 0010 for the next set, stricter: any change to what a
# vector was made from drops the row, and the build embeds it again.
_KEEP_IN_STEP = """
CREATE TRIGGER turn_vec_next_delete AFTER DELETE ON turns BEGIN
    DELETE FROM turn_vec_next WHERE turn_id = old.id;
END;
CREATE TRIGGER cue_vec_next_delete AFTER DELETE ON cues BEGIN
    DELETE FROM cue_vec_next WHERE cue_id = old.id;
END;
CREATE TRIGGER turn_vec_next_stale AFTER UPDATE OF id, session_id, ord, speaker, ts, words, text ON turns BEGIN
    DELETE FROM turn_vec_next WHERE turn_id IN (old.id, new.id);
    DELETE FROM cue_vec_next WHERE cue_id IN (SELECT id FROM cues WHERE turn_id IN (old.id, new.id));
END;
CREATE TRIGGER cue_vec_next_stale AFTER UPDATE OF id, turn_id, kind, text, span_start, span_end ON cues BEGIN
    DELETE FROM cue_vec_next WHERE cue_id IN (old.id, new.id);
END;
"""

_TODO_TURNS = (
    "SELECT id FROM turns t WHERE id > ?1 AND NOT EXISTS (SELECT 1 FROM turn_vec_next n WHERE n.turn_id = t.id) "
    "ORDER BY id LIMIT ?2"
)
# Turns whose vector is there but a statement cue's is not (a cue changed on its own):
# rare, so looked for only once the pass by id has found nothing left.
_STALE_TURNS = (
    "SELECT DISTINCT c.turn_id FROM cues c WHERE c.kind = 'statement' "
    "AND NOT EXISTS (SELECT 1 FROM cue_vec_next n WHERE n.cue_id = c.id) ORDER BY 1 LIMIT ?2"
)
_TODO_CUES = (
    "SELECT id FROM cues c WHERE kind != 'statement' AND id > ?1 "
    "AND NOT EXISTS (SELECT 1 FROM cue_vec_next n WHERE n.cue_id = c.id) ORDER BY id LIMIT ?2"
)


@dataclass(frozen=True)
class Build:
    """The build in progress: the embedder writing the next tables."""

    embedder_id: str
    dim: int
    spec: str | None
    started_at: str


@dataclass(frozen=True)
class TurnWork:
    """A turn to embed: its row as read, and its statement cues (id, span)."""

    id: int
    speaker: str
    text: str
    ts: str | None
    cues: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class CueWork:
    """A model-extracted cue to embed on its own (as enrichment does)."""

    id: int
    speaker: str
    text: str
    ts: str | None


def next_tables_sql(dim: int) -> str:
    """The template's DDL with every table and trigger name given the ``_next`` mark."""
    return _NAMES.sub(r"\1_next\2", db.vector_tables_sql(dim))


def current(conn: Conn) -> Build | None:
    row = conn.execute("SELECT embedder_id, dim, spec, started_at FROM reembed WHERE id = 1").fetchone()
    return None if row is None else Build(str(row[0]), int(row[1]), row[2], str(row[3]))


def start(conn: Conn, embedder_id: str, dim: int, spec: str | None) -> None:
    """Record a new build and make its tables (inside the caller's transaction); a build
    for another embedder is discarded first."""
    discard(conn)
    conn.execute(next_tables_sql(dim))
    conn.execute(_KEEP_IN_STEP)
    conn.execute("INSERT INTO reembed(id, embedder_id, dim, spec) VALUES (1, ?, ?, ?)", (embedder_id, dim, spec))


def discard(conn: Conn) -> None:
    """Drop the build and its tables and triggers (inside the caller's transaction)."""
    for name in _next_triggers(conn):
        conn.execute(f'DROP TRIGGER IF EXISTS "{name}"')
    for table in LIVE:
        conn.execute(f"DROP TABLE IF EXISTS {table}_next")
    conn.execute("DELETE FROM reembed")


def _next_triggers(conn: Conn) -> list[str]:
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND (name LIKE 'turn\\_%\\_next%' ESCAPE '\\' "
            "OR name LIKE 'cue\\_%\\_next%' ESCAPE '\\')"
        )
    ]


def units(conn: Conn) -> int:
    """Turns + extracted cues in the store: the units of a build's progress, one model
    pass each (a turn's statement cues come with its pass)."""
    row = conn.one("SELECT (SELECT count(*) FROM turns) + (SELECT count(*) FROM cues WHERE kind != 'statement')")
    return int(row[0])


def sizes(conn: Conn) -> tuple[int, int]:
    """(``units``, of those already in the next tables)."""
    total = units(conn)
    done = conn.one(
        "SELECT (SELECT count(*) FROM turn_vec_next) + "
        "(SELECT count(*) FROM cue_vec_next n JOIN cues c ON c.id = n.cue_id WHERE c.kind != 'statement')"
    )
    return total, int(done[0])


def todo(
    conn: Conn, limit: int, after_turn: int = 0, after_cue: int = 0, *, stale: bool = False
) -> tuple[list[TurnWork], list[CueWork]]:
    """Up to ``limit`` turns (with their statement cues) and ``limit`` extracted cues the
    next tables lack, by id above the given ones, read in one snapshot. ``stale``: the
    turns whose own vector is there but one of whose statement cues' is not."""
    with conn:  # a savepoint: one read view for the lists and the rows
        tids = [int(r[0]) for r in conn.execute(_STALE_TURNS if stale else _TODO_TURNS, (after_turn, limit))]
        cids = [int(r[0]) for r in conn.execute(_TODO_CUES, (after_cue, limit))]
        turns = _turn_rows(conn, tids)
        cues = [
            CueWork(int(r[0]), str(r[1]), str(r[2]), r[3])
            for r in rows_in(
                conn,
                "SELECT c.id, t.speaker, c.text, t.ts FROM cues c JOIN turns t ON t.id = c.turn_id "
                "WHERE c.id IN ({marks}) ORDER BY c.id",
                cids,
            )
        ]
    return turns, cues


def _turn_rows(conn: Conn, tids: list[int]) -> list[TurnWork]:
    spans: dict[int, list[tuple[int, int, int]]] = {}
    for cid, tid, a, b in rows_in(
        conn,
        "SELECT id, turn_id, span_start, span_end FROM cues WHERE kind = 'statement' AND turn_id IN ({marks}) "
        "ORDER BY id",
        tids,
    ):
        spans.setdefault(int(tid), []).append((int(cid), int(a), int(b)))
    rows = rows_in(conn, "SELECT id, speaker, text, ts FROM turns WHERE id IN ({marks}) ORDER BY id", tids)
    return [TurnWork(int(i), str(s), str(x), ts, tuple(spans.get(int(i), ()))) for i, s, x, ts in rows]


def put_batch(
    conn: Conn,
    build: Build,
    turns: list[tuple[TurnWork, np.ndarray, np.ndarray]],
    cues: list[tuple[CueWork, np.ndarray]],
) -> int:
    """Write embedded rows into the next tables (inside the caller's transaction), each
    only if its turn or cue still reads as it was embedded; returns the units written.
    Nothing is written when the build is no longer ``build`` (discarded or replaced)."""
    if current(conn) != build:
        return 0
    fresh = {t.id: t for t in _turn_rows(conn, [w.id for w, _, _ in turns])}
    written = 0
    for work, tvec, cvecs in turns:
        if fresh.get(work.id) != work:
            continue  # deleted or rewritten since it was read: embedded again by a later batch
        conn.execute(
            "INSERT OR REPLACE INTO turn_vec_next(turn_id, embedding) VALUES (?, ?)",
            (work.id, _blob(tvec, build.dim)),
        )
        for (cid, _a, _b), vec in zip(work.cues, cvecs, strict=True):
            conn.execute(
                "INSERT OR REPLACE INTO cue_vec_next(cue_id, embedding) VALUES (?, ?)", (cid, _blob(vec, build.dim))
            )
        written += 1
    now: dict[int, tuple[Any, ...]] = {
        int(r[0]): (str(r[1]), str(r[2]), r[3])
        for r in rows_in(
            conn,
            "SELECT c.id, t.speaker, c.text, t.ts FROM cues c JOIN turns t ON t.id = c.turn_id "
            "WHERE c.kind != 'statement' AND c.id IN ({marks})",
            [w.id for w, _ in cues],
        )
    }
    for cue, vec in cues:
        if now.get(cue.id) != (cue.speaker, cue.text, cue.ts):
            continue
        conn.execute(
            "INSERT OR REPLACE INTO cue_vec_next(cue_id, embedding) VALUES (?, ?)", (cue.id, _blob(vec, build.dim))
        )
        written += 1
    return written


def _blob(vec: np.ndarray, dim: int) -> bytes:
    out = np.asarray(vec, dtype=np.float32).reshape(-1)
    if out.shape[0] != dim:
        raise ValueError(f"a {out.shape[0]}-d vector for a {dim}-d build")
    return out.tobytes()


def missing(conn: Conn) -> int:
    """Turns and cues the next tables still lack (0: the build is complete)."""
    row = conn.one(
        "SELECT (SELECT count(*) FROM turns t WHERE NOT EXISTS (SELECT 1 FROM turn_vec_next n WHERE n.turn_id = t.id))"
        " + (SELECT count(*) FROM cues c WHERE NOT EXISTS (SELECT 1 FROM cue_vec_next n WHERE n.cue_id = c.id))"
    )
    return int(row[0])


def switch(conn: Conn, build: Build) -> bool:
    """Make the complete next set the live one (inside the caller's write transaction);
    False, having changed nothing, while it is incomplete or no longer ``build``."""
    if current(conn) != build or missing(conn):
        return False
    # Renaming a table checks every trigger that names one: the live tables' triggers on
    # turns and cues (0007) name tables dropped a moment before. The legacy rule renames
    # without that check; every trigger that names them is remade here or unchanged.
    conn.execute("PRAGMA legacy_alter_table = ON")
    try:
        for table in LIVE:
            conn.execute(f"DROP TABLE IF EXISTS {table}")  # their own triggers go with them
        for name in _next_triggers(conn):
            conn.execute(f'DROP TRIGGER "{name}"')
        for table in LIVE:
            conn.execute(f"ALTER TABLE {table}_next RENAME TO {table}")
        for trigger in _TRIGGER.findall(db.vector_tables_sql(build.dim)):
            conn.execute(trigger)
    finally:
        conn.execute("PRAGMA legacy_alter_table = OFF")
    record_embedder(conn, build.embedder_id, build.dim, build.spec)
    conn.execute("UPDATE mirror_epochs SET turns = turns + 1, cues = cues + 1 WHERE id = 1")
    conn.execute("DELETE FROM reembed")
    return True


def record_embedder(conn: Conn, embedder_id: str, dim: int, spec: str | None) -> None:
    """Record the embedder the live vector tables hold (inside the caller's transaction)."""
    for key, value in (("embedder_id", embedder_id), ("embedder_dim", str(dim))):
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))
    if spec is None:
        conn.execute("DELETE FROM meta WHERE key = 'embedder_spec'")
    else:
        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('embedder_spec', ?)", (spec,))


@dataclass(frozen=True)
class Recorded:
    """The embedder the live vector tables were written by, as meta records it."""

    embedder_id: str
    dim: int
    spec: str | None


def recorded(conn: Conn) -> Recorded | None:
    rows: dict[str, str] = dict(
        conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder_id', 'embedder_dim', 'embedder_spec')")
    )
    if "embedder_id" not in rows:
        return None
    return Recorded(str(rows["embedder_id"]), int(rows.get("embedder_dim") or 0), rows.get("embedder_spec"))
