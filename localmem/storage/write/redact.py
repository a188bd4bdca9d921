"""Redact a span of a stored turn in place: the span becomes ``[secret: manual]`` and the
turn keeps its session and its place, but not its identity.

A turn's text is part of its content hash, and the hash is its identity on every device
(journal, sync, the forget set). So a redaction is, through the door, exactly two changes
in ONE transaction: the redacted turn written (``turn``, a new hash, its own new row with
freshly derived statement cues, FTS rows, vectors, temporal and semantic edges and an
extraction job) and the original forgotten (``forget`` of the old hash). Sync carries both
with no new rule: every device deletes the original and everything derived from it, adds
the redacted turn, and keeps the old hash in its forget set, so the unredacted text never
comes back, not from a late segment, an old export or a re-ingest of the source file.
What the original had that a model derived (extracted cues, facts, antecedent links,
topic memberships) goes with it: it may quote the secret; the worker extracts the redacted
turn again.

Invariants:
- one transaction owns the whole change (the original checked unchanged, the new row
  inserted, the original forgotten, semantic edges linked), so no reader ever sees both
  turns or neither; embedding happens before it opens;
- the redacted text passes the write path's own checks (``prepare``: secrets guard, size);
- the turn id changes (a new row): the caller is told the new one.
"""

from __future__ import annotations

from dataclasses import dataclass

from localmem.errors import InputError, NotFound
from localmem.records import SessionIn, TurnIn
from localmem.storage.engine import db
from localmem.storage.write import changes, forgets, rows
from localmem.storage.write.graph import link_semantic
from localmem.storage.write.prepare import prepare
from localmem.storage.write.store import Store
from localmem.storage.write.vectorize import turn_vectors
from localmem.util import secrets

MANUAL = secrets.PLACEHOLDER.format(kind="manual")


class Conflict(InputError):
    """The turn changed (or went) between reading it and redacting it."""


@dataclass(frozen=True)
class Redacted:
    old_id: int
    new_id: int
    old_hash: str
    new_hash: str
    session_id: int
    text: str


def redact_span(
    store: Store,
    turn_id: int,
    start: int,
    end: int,
    *,
    expect_hash: str | None = None,
    expect_text: str | None = None,
    placeholder: str = MANUAL,
) -> Redacted:
    """Replace characters ``start`` .. ``end`` of turn ``turn_id``'s text with
    ``placeholder`` (see the module docstring); ``expect_hash``: refuse (``Conflict``) if
    the turn is no longer that content; ``expect_text``: refuse (``InputError``) unless the
    span is that text."""
    row = store.conn.execute(
        "SELECT t.session_id, s.source, s.key, t.ord, t.speaker, t.role, t.ts, t.source_id, t.text, t.hash "
        "FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.id = ?",
        (turn_id,),
    ).fetchone()
    if row is None:
        raise NotFound(f"no turn with id {turn_id}")
    sid, source, key, _ord, speaker, role, ts, source_id, text, old_hash = row
    if expect_hash is not None and expect_hash != old_hash:
        raise Conflict(f"turn {turn_id} changed since it was shown; reload it and select again")
    if not (0 <= start < end <= len(text)) or not text[start:end].strip():
        raise InputError(f"characters {start}..{end} are not a span of turn {turn_id}'s text ({len(text)} characters)")
    if expect_text is not None and text[start:end] != expect_text:
        raise InputError(f"characters {start}..{end} of turn {turn_id} are not the text selected")
    new_text = text[:start] + placeholder + text[end:]
    sess = SessionIn(key=key, turns=(), source=source)
    p = prepare(
        sess,
        TurnIn(text=new_text, speaker=speaker, role=role, timestamp=ts, source_id=source_id),
        0,
        redact=store.settings.ingest.redact,
    )
    if p.hash == old_hash:
        raise InputError(f"turn {turn_id} already reads that way")
    tvecs, cvecs = turn_vectors(store.embedder, store.params.cue_vectors, [(speaker, p.turn.text, p.ts, p.spans)])

    def commit() -> Redacted:
        with db.transaction(store.conn):
            now = store.conn.execute("SELECT ord, hash FROM turns WHERE id = ?", (turn_id,)).fetchone()
            if now is None or now[1] != old_hash:
                raise Conflict(f"turn {turn_id} changed or was forgotten meanwhile; nothing was redacted")
            if forgets.forgotten_among(store.conn, [p.hash]):
                raise InputError("the redacted text is a turn forgotten before: forget this turn instead")
            ord_ = int(now[0])
            # the original steps aside (it is deleted below, in this transaction): its place is the new row's
            store.conn.execute("UPDATE turns SET ord = -1 - ord WHERE id = ?", (turn_id,))
            there = store.conn.execute("SELECT id FROM turns WHERE hash = ?", (p.hash,)).fetchone()
            if there is not None:  # the redacted text is stored already (a copy redacted before)
                new_id = int(there[0])
            else:
                w = store.params.temporal_window
                new_id = rows.insert_turn(store.conn, sid, ord_, p, tvecs[0], cvecs[0], w, None)
                # temporal edges from the new row to the turns after it (the original's went with it)
                store.conn.execute(
                    "INSERT OR IGNORE INTO edges(src, dst, kind, weight) SELECT ?, id, 'temporal', 1.0 / (ord - ?) "
                    "FROM turns WHERE session_id = ? AND ord BETWEEN ? AND ?",
                    (new_id, ord_, sid, ord_ + 1, ord_ + w),
                )
            changes.forget(store.conn, [old_hash])
            link_semantic(store.conn, store.mirrors(), [new_id], store.params.semantic_k)
            return Redacted(turn_id, new_id, old_hash, p.hash, int(sid), p.turn.text)

    return store.retrying(commit)
