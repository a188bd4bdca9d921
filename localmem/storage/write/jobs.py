"""Putting work on the job queue: the one INSERT into the ``jobs`` table.

The queue itself (claim, lease, back-off, finish, counts) is ``storage.layers.queue``;
only the insert lives here, in the write room, because the write path queues a turn's
``extract`` job in the very transaction that stores the turn (``Store._insert_turn``),
and the storage-rooms contract in pyproject.toml forbids ``write`` to import ``layers``
(the write path never sees the model layers' tables). ``layers`` (the antecedent jobs
extraction queues, the topic jobs, jobs for stores older than the queue) and ``bench``
(synthetic stores) sit above ``write`` and call this same function.

Invariants:
- a turn has at most one job of a kind (``UNIQUE (kind, turn_id)``): queueing it again
  writes nothing, so a re-ingested or re-enriched turn is never worked twice;
- it runs in the caller's transaction and commits or rolls back with it; jobs are
  derived rows, not journaled (``write.changes``).
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw

EXTRACT = "extract"  # one per new turn, queued with the turn
ANTECEDENT = "antecedent"  # one per enriched turn, queued with its extraction


def enqueue(conn: apsw.Connection, kind: str, turn_ids: Iterable[int]) -> int:
    """Queue a ``kind`` job for each of ``turn_ids`` that has none, in ``turn_ids``'
    order, inside the caller's transaction; returns how many were queued."""
    before = conn.total_changes()  # no trigger writes on jobs: the difference is the rows queued
    conn.executemany("INSERT OR IGNORE INTO jobs(kind, turn_id) VALUES (?, ?)", ((kind, int(t)) for t in turn_ids))
    return conn.total_changes() - before
