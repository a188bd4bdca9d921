"""A new turn's rows: the turn itself (through the door, journaled), its FTS row, its
statement cues with their FTS rows and vectors, its vector, its temporal edges and its
extraction job. The write path (``Store``) and the redaction (``redact``) both insert a
turn here, so a turn is stored one way.

Invariant: runs inside the caller's write transaction; every row of the turn is written
or none is. Semantic edges are the caller's (``graph.link_semantic``, once per batch).
"""

from __future__ import annotations

import numpy as np

from localmem.storage.engine.db import Conn
from localmem.storage.write import changes
from localmem.storage.write.jobs import EXTRACT, enqueue
from localmem.storage.write.prepare import Prepared
from localmem.storage.write.vectorize import turn_doc
from localmem.util.text import count_words


def insert_turn(
    conn: Conn,
    sid: int,
    ord_: int,
    p: Prepared,
    tvec: np.ndarray,
    cvecs: np.ndarray,
    window: int,
    origin: str | None,
) -> int:
    """Insert the prepared turn ``p`` at place ``ord_`` of session ``sid`` with its derived
    rows; temporal edges reach it from the turns up to ``window`` places before it."""
    t = p.turn
    write = changes.TurnWrite(sid, ord_, t.speaker, t.role, t.text, p.ts, t.source_id, p.hash, count_words(t.text))
    tid = changes.add_turn(conn, write, origin=origin)
    conn.execute("INSERT INTO turns_fts(rowid, doc) VALUES (?, ?)", (tid, turn_doc(t.speaker, t.text, p.ts)))
    enqueue(conn, EXTRACT, (tid,))
    conn.execute("INSERT INTO turn_vec(turn_id, embedding) VALUES (?, ?)", (tid, tvec.tobytes()))
    for (s, e), vec in zip(p.spans, cvecs, strict=True):
        cue_text = t.text[s:e]
        row = conn.execute(
            "INSERT INTO cues(turn_id, kind, text, span_start, span_end) VALUES (?, 'statement', ?, ?, ?) "
            "ON CONFLICT DO NOTHING RETURNING id",
            (tid, cue_text, s, e),
        ).fetchone()
        if row is None:  # the same sentence twice in one turn
            continue
        cid = int(row[0])
        conn.execute("INSERT INTO cues_fts(rowid, doc) VALUES (?, ?)", (cid, turn_doc(t.speaker, cue_text, p.ts)))
        conn.execute("INSERT INTO cue_vec(cue_id, embedding) VALUES (?, ?)", (cid, vec.tobytes()))
    conn.execute(
        "INSERT OR IGNORE INTO edges(src, dst, kind, weight) "
        "SELECT id, ?, 'temporal', 1.0 / (? - ord) FROM turns WHERE session_id = ? AND ord BETWEEN ? AND ?",
        (tid, ord_, sid, ord_ - window, ord_ - 1),
    )
    return tid
