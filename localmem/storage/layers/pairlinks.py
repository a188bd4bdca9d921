"""Reads and the one write of the model-free antecedent verifier (``enrichment/pairverify.py``).

``commit_pair_links`` is ONE transaction: the turn's ``antecedent_runs`` record (a turn is
processed once: its primary key, shared with the model-based construction, so a turn a
model already linked is left alone) and the accepted links as ``antecedent`` edges through
the door (``changes.add_antecedents``, journaled with the verifier's id as ``model``, so
they sync like model links). No job is involved: the verifier needs no model, so it runs
over every turn that has no run yet.
"""

from __future__ import annotations

from collections.abc import Sequence

from localmem.storage.engine import db
from localmem.storage.layers import edges
from localmem.storage.layers.edges import AntecedentRun
from localmem.storage.write.changes import LinkWrite


def unlinked_turns(conn: db.Conn) -> list[int]:
    """Turns without an ``antecedent_runs`` record, oldest id first."""
    rows = conn.execute(
        "SELECT t.id FROM turns t LEFT JOIN antecedent_runs r ON r.turn_id = t.id WHERE r.turn_id IS NULL ORDER BY t.id"
    ).fetchall()
    return [int(r[0]) for r in rows]


def turn_words(conn: db.Conn) -> list[tuple[int, str, str, str | None, int]]:
    """(id, speaker, text, ts, session id) of every turn, for the verifier's word statistics."""
    rows = conn.execute("SELECT id, speaker, text, ts, session_id FROM turns ORDER BY id").fetchall()
    return [(int(r[0]), str(r[1]), str(r[2]), r[3], int(r[4])) for r in rows]


def commit_pair_links(conn: db.Conn, run: AntecedentRun, links: Sequence[LinkWrite]) -> bool:
    """Record one turn's run and its links; False (nothing written) when the turn was
    processed before or is gone."""
    with db.transaction(conn):
        if conn.execute("SELECT 1 FROM turns WHERE id = ?", (run.turn_id,)).fetchone() is None:
            return False
        return edges.record_run(conn, run, links)
