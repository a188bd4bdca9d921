"""A stored turn's text rewritten in place: the one way both redactions change a turn
(``redaction``: ``localmem redact --scan``; ``redact``: a span redacted in the web view).

A turn's text is part of its content hash, and the hash is its identity on every device
(journal, sync, the forget set). So a rewrite is, through the door, exactly two changes in
ONE transaction: the new text written as a turn (``turn``: a new hash and row, its
statement cues, FTS rows, vectors, temporal links to the turns on both sides and semantic
links derived afresh, an extraction job queued) at the old turn's session and place, and
the old turn forgotten (``forget``: its hash joins the forget set; everything derived from
it goes by cascade, extracted cues, facts, antecedent links and topic memberships
included, since they may quote what was taken out). Sync carries both with its existing
rules: every device deletes the old turn, adds the new one (a folding device appends it at
the end of its session) and keeps the old hash, so the old text never comes back, not from
a late segment, an old export or a re-ingest of the source file.

Invariants:
- one transaction for a batch; embedding happens before it opens;
- the new turn is inserted before the old one is forgotten (the old one steps aside from its
  place first), so a session whose only turn is rewritten is never left empty, hence never
  deleted;
- a turn that changed since it was read (another hash now, or gone), or whose new text is
  its text, is left as it is and reported (``skipped``); a rewrite to no text, or to a text
  stored already or forgotten before, only forgets the old turn (``forgotten``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from localmem.records import SessionIn, TurnIn
from localmem.storage.engine import db
from localmem.storage.engine.inlist import rows_in
from localmem.storage.write import changes, forgets, rows
from localmem.storage.write.graph import link_semantic
from localmem.storage.write.prepare import Prepared, prepare
from localmem.storage.write.store import Store
from localmem.storage.write.vectorize import turn_vectors


@dataclass(frozen=True)
class Rewrite:
    """Turn ``turn_id``, read as ``old_hash``, to read ``text`` ("" forgets it)."""

    turn_id: int
    old_hash: str
    text: str


@dataclass
class Rewritten:
    new_ids: dict[int, int] = field(default_factory=dict)  # old turn id -> the new turn's
    forgotten: list[int] = field(default_factory=list)  # old ids forgotten with no new turn
    skipped: list[int] = field(default_factory=list)  # changed or gone since read: untouched
    texts: dict[int, str] = field(default_factory=dict)  # old turn id -> the new text as stored


@dataclass(frozen=True)
class _Plan:
    old: int
    old_hash: str
    session_id: int
    new: Prepared | None


def rewrite_turns(store: Store, items: Sequence[Rewrite], *, redact: bool) -> Rewritten:
    """Rewrite each turn of ``items`` (module docstring); ``redact``: the new texts pass the
    secrets guard too (``prepare``)."""
    out = Rewritten()
    conn = store.conn
    found = {
        int(r[0]): r
        for r in rows_in(
            conn,
            "SELECT t.id, t.session_id, s.source, s.key, t.speaker, t.role, t.ts, t.source_id "
            "FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.id IN ({marks})",
            [i.turn_id for i in items],
        )
    }
    plans: list[_Plan] = []
    for item in items:
        row = found.get(item.turn_id)
        if row is None:
            out.skipped.append(item.turn_id)
            continue
        _tid, sid, source, key, speaker, role, ts, source_id = row
        new = None
        if item.text.strip():
            turn = TurnIn(text=item.text, speaker=str(speaker), role=str(role), timestamp=ts, source_id=source_id)
            new = prepare(SessionIn(key=str(key), turns=(), source=str(source)), turn, 0, redact=redact)
        plans.append(_Plan(item.turn_id, item.old_hash, int(sid), new))
    fresh = [p.new for p in plans if p.new is not None]
    tvecs, cvecs = turn_vectors(
        store.embedder, store.params.cue_vectors, [(p.turn.speaker, p.turn.text, p.ts, p.spans) for p in fresh]
    )
    vectors = {p.hash: (tvecs[i], cvecs[i]) for i, p in enumerate(fresh)}
    window = store.params.temporal_window

    def commit() -> Rewritten:
        done = Rewritten()
        with db.transaction(conn):
            for plan in plans:
                now = conn.execute("SELECT ord, hash FROM turns WHERE id = ?", (plan.old,)).fetchone()
                if now is None or now[1] != plan.old_hash:
                    done.skipped.append(plan.old)
                    continue
                new, ord_ = plan.new, int(now[0])
                if new is not None and new.hash == plan.old_hash:  # nothing to change
                    done.skipped.append(plan.old)
                    continue
                kept = new is not None
                if kept and new is not None:
                    kept = not forgets.forgotten_among(conn, [new.hash]) and (
                        conn.execute("SELECT 1 FROM turns WHERE hash = ?", (new.hash,)).fetchone() is None
                    )
                if not kept or new is None:
                    changes.forget(conn, [plan.old_hash])
                    done.forgotten.append(plan.old)
                    continue
                # the old turn steps aside (the door deletes it below, in this transaction)
                conn.execute("UPDATE turns SET ord = -1 - ord WHERE id = ?", (plan.old,))
                nid = rows.insert_turn(conn, plan.session_id, ord_, new, *vectors[new.hash], window, None)
                conn.execute(  # temporal links to the turns after it (the old turn's go with it)
                    "INSERT OR IGNORE INTO edges(src, dst, kind, weight) SELECT ?, id, 'temporal', 1.0 / (ord - ?) "
                    "FROM turns WHERE session_id = ? AND ord BETWEEN ? AND ?",
                    (nid, ord_, plan.session_id, ord_ + 1, ord_ + window),
                )
                changes.forget(conn, [plan.old_hash])
                done.new_ids[plan.old] = nid
                done.texts[plan.old] = new.turn.text
            if done.new_ids:
                link_semantic(conn, store.mirrors(), list(done.new_ids.values()), store.params.semantic_k)
        return done

    done = store.retrying(commit)
    done.skipped = out.skipped + done.skipped
    return done
