"""What a forget of a set of turns would take with it: the counts its preview shows.

A selection is a list of turn ids (a turn, a session, the turns a search or a filter found,
resolved by the caller); ``preview`` counts what deleting them removes by cascade (cues by
kind, edges by kind, topic memberships, recall-log rows, pending jobs), the sessions they
touch and those they empty (a session left without turns is deleted), and their content
hashes, which the forget journals and sync carries.

Invariants: read-only, inside the caller's snapshot; ids travel as one JSON parameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from localmem.storage.engine.db import Conn
from localmem.storage.reads.browse import json_ids

_IN = "IN (SELECT value FROM json_each(:ids))"


class Preview(NamedTuple):
    turns: int
    hashes: list[str]  # of the turns that exist, ascending
    sessions: int  # touched
    sessions_emptied: int  # all of whose turns are in the set: deleted with them
    cues: dict[str, int]  # by kind
    edges: dict[str, int]  # by kind, each edge once (also those to turns outside the set)
    topics: int  # topics and themes that lose a member turn
    recalls: int  # recall-log rows that name one of the turns
    jobs: int  # pending or parked jobs about them
    first: str | None  # the earliest turn time
    last: str | None


def preview(conn: Conn, ids: Sequence[int]) -> Preview:
    """What forgetting the turns ``ids`` removes (ids that name no turn count for nothing)."""
    p = {"ids": json_ids(ids)}
    hashes = sorted(str(r[0]) for r in conn.execute(f"SELECT hash FROM turns WHERE id {_IN}", p))
    touched, emptied = conn.one(
        "SELECT count(*), coalesce(sum(n = m), 0) FROM (SELECT t.session_id, count(*) AS n, "
        "(SELECT count(*) FROM turns x WHERE x.session_id = t.session_id) AS m "
        f"FROM turns t WHERE t.id {_IN} GROUP BY t.session_id)",
        p,
    )
    cues = {
        str(k): int(n) for k, n in conn.execute(f"SELECT kind, count(*) FROM cues WHERE turn_id {_IN} GROUP BY kind", p)
    }
    edges: dict[str, int] = {}
    for kind, n in conn.execute(
        f"SELECT kind, count(*) FROM (SELECT kind FROM edges WHERE src {_IN} UNION ALL "
        f"SELECT kind FROM edges WHERE dst {_IN} AND src NOT {_IN}) GROUP BY kind",
        p,
    ):
        edges[str(kind)] = int(n)
    topics = int(conn.one(f"SELECT count(DISTINCT topic_id) FROM topic_turns WHERE turn_id {_IN}", p)[0])
    recalls = int(conn.one(f"SELECT count(*) FROM recall_turns WHERE turn_id {_IN}", p)[0])
    jobs = int(conn.one(f"SELECT count(*) FROM jobs WHERE state != 'done' AND turn_id {_IN}", p)[0])
    first, last = conn.one(f"SELECT min(ts), max(ts) FROM turns WHERE id {_IN}", p)
    return Preview(len(hashes), hashes, int(touched), int(emptied), cues, edges, topics, recalls, jobs, first, last)


def session_turn_ids(conn: Conn, session_id: int) -> list[int]:
    """Every turn id of a session, in order."""
    return [int(r[0]) for r in conn.execute("SELECT id FROM turns WHERE session_id = ? ORDER BY ord", (session_id,))]


def existing(conn: Conn, ids: Sequence[int]) -> list[int]:
    """The ids of ``ids`` that name a stored turn, ascending."""
    return [int(r[0]) for r in conn.execute(f"SELECT id FROM turns WHERE id {_IN} ORDER BY id", {"ids": json_ids(ids)})]
