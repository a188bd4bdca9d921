"""The durable job queue: the ``jobs`` table's primitives (claim, fail, finish, counts).

Every job kind goes through the same protocol: ``extract`` (one per new turn, queued by
the write path in the transaction that stores the turn, ``Store._insert_turn``; the one
insert, ``enqueue``, is ``storage.write.jobs``, where the write path may reach it),
``antecedent`` (queued by enrichment) and ``topics`` (one per session with turns in no
topic, claimed with ``batch=False, exclusive=True``: one at a time, never while another
job of its session runs). A job whose model reply was refused is a failed attempt like
one whose model raised (``record_failure`` inside the step's own transaction).

States: ``pending`` -> ``running`` (claimed) -> ``done``, or back to ``pending`` with a
back-off after a failure, or ``parked`` after ``Settings.job_attempts`` attempts, with
its last error (shown by ``localmem stats``).

Crash safety (kill -9 at any point loses nothing, enriches nothing twice):
- a claim is one short transaction that marks jobs ``running``, counts the attempt and
  records the worker (``host:pid``) and a lease;
- results and ``done`` commit together in one transaction, and only for jobs the worker
  still holds; a turn already enriched is never written again (``turn_enrichment``
  primary key);
- a ``running`` job is claimed again when its lease lapsed or its worker's process is
  gone (same host); such a job, having failed once, is retried alone so that a turn
  that crashes the worker cannot take its neighbours down with it.
Model calls and embedding happen between the two transactions, never inside one.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass

import apsw

from localmem.models.replies import CallRecord
from localmem.storage.engine import db
from localmem.storage.engine.inlist import marks
from localmem.storage.layers import calls
from localmem.storage.write.jobs import EXTRACT, enqueue
from localmem.util.clock import now_iso

KIND = EXTRACT
LEASE_S = 600.0
BACKOFF_S = 5.0  # after attempt n, wait BACKOFF_S * 4**(n-1), at most BACKOFF_CAP_S
BACKOFF_CAP_S = 3600.0


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Job:
    id: int
    turn_id: int
    attempts: int


def enqueue_missing(conn: apsw.Connection) -> int:
    """Queue a job for every turn that has none (stores written before the queue)."""
    with db.transaction(conn):
        missing = conn.execute(
            "SELECT id FROM turns WHERE id NOT IN (SELECT turn_id FROM jobs WHERE kind = ?)", (KIND,)
        )
        return enqueue(conn, KIND, [r[0] for r in missing])


def _alive(owner: str | None) -> bool:
    """False only when ``owner`` is a process of this host that no longer exists."""
    if not owner or ":" not in owner:
        return True
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _release_dead(conn: apsw.Connection) -> None:
    owners = [r[0] for r in conn.execute("SELECT DISTINCT locked_by FROM jobs WHERE state = 'running'")]
    for owner in owners:
        if owner != worker_id() and not _alive(owner):
            conn.execute(
                "UPDATE jobs SET state = 'pending', locked_by = NULL, locked_until = NULL, "
                "last_error = coalesce(last_error, 'worker died'), updated_at = ? WHERE state = 'running' AND locked_by = ?",
                (now_iso(), owner),
            )


def claim(
    conn: apsw.Connection,
    limit: int,
    *,
    owner: str | None = None,
    lease_s: float = LEASE_S,
    kind: str = KIND,
    batch: bool = True,
    exclusive: bool = False,
) -> list[Job]:
    """Claim up to ``limit`` ready jobs of ``kind``: the oldest one and, with ``batch``,
    the turns after it in its session (one extraction call can then cover them). A job
    that failed before is claimed alone. ``exclusive``: never a job whose session has
    another job of ``kind`` running under a live lease (a kind whose job works on the
    whole session, like ``topics``)."""
    owner = owner or worker_id()
    now = now_iso()
    ready = (
        "j.kind = ? AND ((j.state = 'pending' AND (j.not_before IS NULL OR j.not_before <= ?)) "
        "OR (j.state = 'running' AND j.locked_until < ?))"
    )
    alone = (
        " AND NOT EXISTS (SELECT 1 FROM jobs r JOIN turns rt ON rt.id = r.turn_id WHERE r.kind = j.kind "
        "AND r.id != j.id AND r.state = 'running' AND r.locked_until >= ? AND rt.session_id = t.session_id)"
    )
    with db.transaction(conn):
        _release_dead(conn)
        first = conn.execute(
            f"SELECT j.id, j.turn_id, j.attempts, t.session_id, t.ord FROM jobs j JOIN turns t ON t.id = j.turn_id "
            f"WHERE {ready}{alone if exclusive else ''} ORDER BY j.id LIMIT 1",
            (kind, now, now, now) if exclusive else (kind, now, now),
        ).fetchone()
        if first is None:
            return []
        jobs = [Job(int(first[0]), int(first[1]), int(first[2]))]
        if batch and int(str(first[2])) == 0 and limit > 1:
            rows = conn.execute(
                f"SELECT j.id, j.turn_id, j.attempts FROM jobs j JOIN turns t ON t.id = j.turn_id "
                f"WHERE {ready} AND j.attempts = 0 AND t.session_id = ? AND t.ord > ? AND j.id != ? "
                f"ORDER BY t.ord LIMIT ?",
                (kind, now, now, first[3], first[4], first[0], limit - 1),
            ).fetchall()
            jobs += [Job(int(str(a)), int(str(b)), int(str(c))) for a, b, c in rows]
        conn.executemany(
            "UPDATE jobs SET state = 'running', attempts = attempts + 1, locked_by = ?, locked_until = ?, "
            "updated_at = ? WHERE id = ?",
            [(owner, now_iso(lease_s), now, j.id) for j in jobs],
        )
    return [Job(j.id, j.turn_id, j.attempts + 1) for j in jobs]


def fail(
    conn: db.Conn,
    job: Job,
    error: str,
    max_attempts: int,
    *,
    owner: str | None = None,
    records: Sequence[CallRecord] = (),
) -> str:
    """Record a failed attempt: back to ``pending`` after a back-off, or ``parked``;
    with the model calls that made it fail (``records``, for the call log)."""
    with db.transaction(conn):
        calls.write(conn, records)
        return record_failure(conn, job, error, max_attempts, owner=owner)


def record_failure(conn: apsw.Connection, job: Job, error: str, max_attempts: int, *, owner: str | None = None) -> str:
    """``fail`` inside the caller's transaction (a step that writes its results and its
    failures together); only while ``owner`` holds the job. Returns the new state."""
    owner = owner or worker_id()
    state = "parked" if job.attempts >= max_attempts else "pending"
    wait = min(BACKOFF_S * 4 ** max(job.attempts - 1, 0), BACKOFF_CAP_S)
    conn.execute(
        "UPDATE jobs SET state = ?, last_error = ?, not_before = ?, locked_by = NULL, locked_until = NULL, "
        "updated_at = ? WHERE id = ? AND state = 'running' AND locked_by = ?",
        (state, error[:2000], None if state == "parked" else now_iso(wait), now_iso(), job.id, owner),
    )
    return state


def finish(conn: apsw.Connection, job_id: int, owner: str | None = None) -> bool:
    """Mark a job done inside the caller's transaction, only while ``owner`` still holds
    it; False when another worker reclaimed it after our lease lapsed."""
    held = conn.execute(
        "UPDATE jobs SET state = 'done', locked_by = NULL, locked_until = NULL, last_error = NULL, "
        "updated_at = strftime('%Y-%m-%dT%H:%M:%S', 'now') "
        "WHERE id = ? AND state = 'running' AND locked_by = ? RETURNING id",
        (job_id, owner or worker_id()),
    ).fetchone()
    return held is not None


def retry_parked(conn: apsw.Connection) -> int:
    """Give parked jobs another round of attempts (after the cause was fixed)."""
    with db.transaction(conn):
        rows = conn.execute(
            "UPDATE jobs SET state = 'pending', attempts = 0, not_before = NULL, updated_at = ? "
            "WHERE state = 'parked' RETURNING id",
            (now_iso(),),
        ).fetchall()
    return len(rows)


def unfinished(conn: db.Conn, kind: str = KIND) -> int:
    """Jobs of ``kind`` not done yet (pending, running or parked)."""
    return int(conn.one("SELECT count(*) FROM jobs WHERE kind = ? AND state != 'done'", (kind,))[0])


def next_due(conn: db.Conn, kinds: Sequence[str]) -> str | None:
    """The earliest time a failed job of ``kinds`` waiting on a back-off is due again
    (naive ISO-8601 UTC); None when none waits."""
    row = conn.execute(
        "SELECT min(not_before) FROM jobs WHERE state = 'pending' AND not_before IS NOT NULL "
        f"AND kind IN ({marks(len(kinds))})",
        list(kinds),
    ).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def counts(conn: apsw.Connection, kind: str = KIND) -> dict[str, int]:
    got = {
        str(s): int(str(n))
        for s, n in conn.execute("SELECT state, count(*) FROM jobs WHERE kind = ? GROUP BY state", (kind,))
    }
    return {s: got.get(s, 0) for s in ("pending", "running", "done", "parked")}


def parked(conn: apsw.Connection, limit: int = 20) -> list[dict[str, object]]:
    rows = conn.execute(
        "SELECT id, kind, turn_id, attempts, last_error, updated_at FROM jobs WHERE state = 'parked' ORDER BY id LIMIT ?",
        (limit,),
    ).fetchall()
    return [{"job": a, "kind": k, "turn_id": b, "attempts": c, "error": d, "at": e} for a, k, b, c, d, e in rows]
