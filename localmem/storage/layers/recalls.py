"""The recall log: what each reconstruct made for a client handed it, and why, kept bounded.

A row per call in ``recall_calls`` (migration 0015: when, which client and tool, the
client's session and project when it gives them, the query, budget, as_of, scope, tokens
and how many turns were handed) and a row per turn handed in ``recall_turns`` (its place,
reason, score and the reason's detail). The web view reads it: the Injected page (every
call, newest first, and what it handed) and a turn's page (the queries that recalled it
most).

Invariants:
- private and bounded: not a fact, so never journaled, exported or synced; the query is
  stored with its secrets replaced by placeholders (``util.secrets.redact``); the
  transaction that writes a call deletes those older than the newest ``keep`` (the
  ``recall_log`` setting), and ``keep`` 0 writes nothing;
- forget reaches it: a forgotten turn's rows go with the turn (ON DELETE CASCADE); the
  call keeps its count of turns handed, so the page can say how many are gone;
- a log write never costs the caller its result: ``log`` with ``best_effort`` waits at most
  ``WAIT_MS`` for another writer and gives up on a busy, read-only or full database (one
  warning) instead of raising.

Who writes: the MCP server's ``reconstruct`` and ``answer`` tools and ``localmem query``
(``from_context`` + ``log``); the agent hooks write the same rows with ``client`` =
``hook:<agent>``, ``tool`` = the hook event and the agent's session id and project.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import NamedTuple

import apsw

from localmem.errors import StoreError
from localmem.records import Context
from localmem.storage.engine import db
from localmem.storage.engine.retry import busy_timeout_ms
from localmem.storage.reads.traversal import Counted
from localmem.util import secrets

log_ = logging.getLogger(__name__)
QUERY_CHARS = 4_000  # of a query, stored (a hook may pass a whole prompt)
WAIT_MS = 250  # a best-effort log write waits this long for another writer, then gives up


@dataclass(frozen=True)
class RecallTurn:
    turn_id: int
    reason: str
    score: float
    why: str = ""


@dataclass(frozen=True)
class RecallWrite:
    """One reconstruct call as a client received it."""

    client: str  # mcp:<client name> / cli / hook:<agent>
    tool: str  # reconstruct / answer / query / the hook's event
    query: str
    budget: int
    tokens: int
    turns: tuple[RecallTurn, ...]
    as_of: str | None = None
    scope: str | None = None
    session: str | None = None
    project: str | None = None


class RecallCall(NamedTuple):
    id: int
    at: str
    client: str
    tool: str
    session: str | None
    project: str | None
    query: str
    budget: int
    as_of: str | None
    scope: str | None
    tokens: int
    turns: int  # handed
    kept: int  # of those, still stored (the others were forgotten since)


class RecalledTurn(NamedTuple):
    """A turn a call handed, with its row as stored now."""

    turn_id: int
    place: int
    reason: str
    score: float
    why: str
    session_id: int
    session: str
    speaker: str
    ts: str | None
    text: str


class TurnRecall(NamedTuple):
    """A query that recalled a turn: how often, by which clients, when last."""

    query: str
    calls: int
    clients: str  # comma-separated, distinct
    last: str


def from_context(
    ctx: Context,
    client: str,
    tool: str,
    *,
    as_of: str | None = None,
    scope: str | None = None,
    session: str | None = None,
    project: str | None = None,
) -> RecallWrite:
    """The record of ``ctx`` as handed to ``client`` by ``tool``."""
    turns = tuple(RecallTurn(t.turn_id, t.reason, float(t.score), t.why) for t in ctx.turns)
    query = secrets.redact(ctx.query[:QUERY_CHARS])
    return RecallWrite(client, tool, query, ctx.budget_tokens, ctx.tokens, turns, as_of, scope, session, project)


def write(conn: db.Conn, rec: RecallWrite, keep: int) -> int | None:
    """Insert ``rec`` and prune to the newest ``keep`` calls, inside the caller's
    transaction; returns the call's id (None when ``keep`` is 0: nothing is written).
    Turns forgotten since the read are left out (their rows could not exist)."""
    if keep <= 0:
        return None
    call = int(
        conn.one(
            "INSERT INTO recall_calls(client, tool, session, project, query, budget, as_of, scope, tokens, turns) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                rec.client,
                rec.tool,
                rec.session,
                rec.project,
                rec.query,
                rec.budget,
                rec.as_of,
                rec.scope,
                rec.tokens,
                len(rec.turns),
            ),
        )[0]
    )
    conn.executemany(
        "INSERT OR IGNORE INTO recall_turns(call_id, turn_id, place, reason, score, why) "
        "SELECT ?, id, ?, ?, ?, ? FROM turns WHERE id = ?",
        [(call, i, t.reason, t.score, t.why, t.turn_id) for i, t in enumerate(rec.turns, start=1)],
    )
    # ids only grow (nothing else deletes one call), so the newest `keep` are a range of ids
    conn.execute("DELETE FROM recall_calls WHERE id <= ? - ?", (call, keep))
    return call


def log(conn: db.Conn, rec: RecallWrite, keep: int, *, best_effort: bool = True) -> int | None:
    """``write`` in a transaction of its own. ``best_effort``: a database that cannot be
    written (another writer holding it past ``WAIT_MS``, read-only, full) costs the record,
    not the caller's result nor its time."""
    if keep <= 0:
        return None
    if best_effort:
        conn.set_busy_timeout(WAIT_MS)
    try:
        with db.transaction(conn):
            return write(conn, rec, keep)
    except (apsw.BusyError, apsw.LockedError, StoreError) as exc:
        if not best_effort:
            raise
        log_.warning("recall log not written: %s", exc)
        return None
    finally:
        if best_effort:
            conn.set_busy_timeout(busy_timeout_ms())


def clear(conn: db.Conn) -> int:
    """Delete every call (and its turns); returns how many. Own transaction."""
    with db.transaction(conn):
        return len(conn.execute("DELETE FROM recall_calls RETURNING id").fetchall())


# -- reads (the web view) ---------------------------------------------------------------

_CALL = (
    "SELECT c.id, c.at, c.client, c.tool, c.session, c.project, c.query, c.budget, c.as_of, c.scope, c.tokens, "
    "c.turns, (SELECT count(*) FROM recall_turns r WHERE r.call_id = c.id) FROM recall_calls c"
)


def calls(conn: db.Conn, limit: int, offset: int, client: str | None = None) -> Counted[RecallCall]:
    """Calls newest first (``client``: only that client's), one page, with the total."""
    where, args = ("WHERE c.client = ?", [client]) if client else ("", [])
    total = int(conn.one(f"SELECT count(*) FROM recall_calls c {where}", args)[0])
    rows = conn.execute(f"{_CALL} {where} ORDER BY c.id DESC LIMIT ? OFFSET ?", [*args, limit, offset]).fetchall()
    return Counted(total, [RecallCall(*r) for r in rows])


def call(conn: db.Conn, call_id: int) -> RecallCall | None:
    row = conn.execute(f"{_CALL} WHERE c.id = ?", (call_id,)).fetchone()
    return None if row is None else RecallCall(*row)


def call_turns(conn: db.Conn, call_id: int) -> list[RecalledTurn]:
    """The turns a call handed that are still stored, in their place in the context."""
    return [
        RecalledTurn(*r)
        for r in conn.execute(
            "SELECT r.turn_id, r.place, r.reason, r.score, r.why, t.session_id, s.key, t.speaker, t.ts, t.text "
            "FROM recall_turns r JOIN turns t ON t.id = r.turn_id JOIN sessions s ON s.id = t.session_id "
            "WHERE r.call_id = ? ORDER BY r.place",
            (call_id,),
        )
    ]


def clients(conn: db.Conn) -> list[tuple[str, int]]:
    """Every client in the log with its number of calls, most first."""
    return [
        (str(c), int(n))
        for c, n in conn.execute("SELECT client, count(*) FROM recall_calls GROUP BY client ORDER BY 2 DESC, 1")
    ]


def turn_recalls(conn: db.Conn, turn_id: int, limit: int = 10) -> Counted[TurnRecall]:
    """The queries that recalled ``turn_id`` most (calls in the log), with the total number
    of calls that handed it."""
    total = int(conn.one("SELECT count(*) FROM recall_turns WHERE turn_id = ?", (turn_id,))[0])
    rows = conn.execute(
        "SELECT c.query, count(*), group_concat(DISTINCT c.client), max(c.at) FROM recall_turns r "
        "JOIN recall_calls c ON c.id = r.call_id WHERE r.turn_id = ? GROUP BY c.query "
        "ORDER BY 2 DESC, 4 DESC LIMIT ?",
        (turn_id, limit),
    ).fetchall()
    return Counted(total, [TurnRecall(str(q), int(n), str(cl), str(last)) for q, n, cl, last in rows])


def handed_in_session(conn: db.Conn, client: str, session: str, since_tool: str) -> frozenset[int]:
    """The turns ``client`` was handed in its session ``session`` since the session's last
    call by ``since_tool`` (that call included; every call when it has none): what the
    agent's context holds already. A hook's prompt leaves them out (``resident.recall``);
    a session start after a compaction begins again, so the turns before it count no more."""
    row = conn.execute(
        "SELECT max(id) FROM recall_calls WHERE client = ? AND session = ? AND tool = ?", (client, session, since_tool)
    ).fetchone()
    first = int(row[0]) if row and row[0] is not None else 0
    return frozenset(
        int(r[0])
        for r in conn.execute(
            "SELECT DISTINCT r.turn_id FROM recall_turns r JOIN recall_calls c ON c.id = r.call_id "
            "WHERE c.client = ? AND c.session = ? AND c.id >= ?",
            (client, session, first),
        )
    )


def turn_recall_sessions(conn: db.Conn, turn_id: int, limit: int = 10) -> list[tuple[str, str, int, str]]:
    """The client sessions (those a client named, e.g. an agent's) whose calls handed
    ``turn_id`` most: (client, session, calls, last time)."""
    return [
        (str(c), str(s), int(n), str(last))
        for c, s, n, last in conn.execute(
            "SELECT c.client, c.session, count(*), max(c.at) FROM recall_turns r JOIN recall_calls c "
            "ON c.id = r.call_id WHERE r.turn_id = ? AND c.session IS NOT NULL GROUP BY c.client, c.session "
            "ORDER BY 3 DESC, 4 DESC LIMIT ?",
            (turn_id, limit),
        )
    ]
