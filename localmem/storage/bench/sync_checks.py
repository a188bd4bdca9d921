"""What two synced stores must agree on, for ``bench sync`` and the sync tests: a
fingerprint of the facts and the model-derived layers, and a bench-only derived write.
"""

from __future__ import annotations

import hashlib
from typing import Any

from localmem.storage.engine import db
from localmem.storage.engine.db import Conn
from localmem.storage.write import changes as door


def fingerprint(conn: Conn) -> dict[str, Any]:
    """Counts and digests of the turn hashes, the forget set and the model-derived layers."""

    def digest(sql: str) -> str:
        h = hashlib.sha256()
        for row in conn.execute(sql):
            h.update(repr(tuple(row)).encode())
        return h.hexdigest()[:16]

    return {
        "turns": int(conn.one("SELECT count(*) FROM turns")[0]),
        "distinct": int(conn.one("SELECT count(*) FROM (SELECT DISTINCT t.session_id, t.text FROM turns t)")[0]),
        "turn_hashes": digest("SELECT hash FROM turns ORDER BY hash"),
        "forgotten": int(conn.one("SELECT count(*) FROM forgotten")[0]),
        "forget_set": digest("SELECT hash FROM forgotten ORDER BY hash"),
        "cues": int(conn.one("SELECT count(*) FROM cues WHERE kind != 'statement'")[0]),
        "derived": digest(
            "SELECT t.hash, c.kind, c.text, c.extractor, c.span_start, c.span_end, "
            "(SELECT group_concat(name, ',') FROM (SELECT g.name FROM cue_tags ct JOIN tags g ON g.id = ct.tag_id "
            "WHERE ct.cue_id = c.id ORDER BY g.name)) FROM cues c JOIN turns t ON t.id = c.turn_id "
            "WHERE c.kind != 'statement' ORDER BY 1, 2, 3"
        ),
    }


def bench_derive(conn: Conn, model: str, n: int = 3) -> int:
    """For ``bench sync``: a keyword cue (the turn's first word) on this device's first
    ``n`` turns, written through the door as enrichment would, tagged with ``model``."""
    rows = conn.execute("SELECT id, hash, text FROM turns ORDER BY id LIMIT ?", (n,)).fetchall()
    added = 0
    with db.transaction(conn):
        for tid, h, text in rows:
            word = str(text).split()[0]
            cue = door.CueWrite("keyword", word, 0, len(word), tags=("bench",))
            added += door.add_cue(conn, int(tid), str(h), cue, model) is not None
    return added
