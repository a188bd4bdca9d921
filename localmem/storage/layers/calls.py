"""The model-call log: every model call's record, kept bounded, and per-purpose totals.

A row per call (migration 0008): time, purpose, model, prompt hash, the reply (its first
``REPLY_CHARS`` characters), the parse status (``ok`` or a ``ReplyError`` reason) and
token counts. The transaction that writes rows also deletes those older than the newest
``MAX_ROWS`` and adds the calls to ``model_call_totals`` (parsed / unparsed per
purpose, over the store's whole life), so the log never grows past its bound and the
counts never depend on it. A call that raised before any reply (a model that could not
run) leaves no row: its job's error says why.

``write`` runs inside the caller's transaction (the enrichment steps write the records
with their results); ``log`` takes a transaction of its own (answer, explore).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import apsw

from localmem.models.replies import OK, PURPOSES, CallRecord
from localmem.storage.engine import db

log_ = logging.getLogger(__name__)
MAX_ROWS = 10_000
REPLY_CHARS = 4_000


def write(conn: db.Conn, records: Sequence[CallRecord], *, max_rows: int | None = None) -> None:
    """Insert ``records``, update the totals and prune to the newest ``max_rows``
    (default ``MAX_ROWS``); inside the caller's transaction."""
    if not records:
        return
    max_rows = MAX_ROWS if max_rows is None else max_rows
    conn.executemany(
        "INSERT INTO model_calls(purpose, model, prompt_hash, reply, reply_chars, status, prompt_tokens, "
        "generated_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                r.purpose,
                r.model,
                r.prompt_hash,
                r.reply[:REPLY_CHARS],
                len(r.reply),
                r.status[:200],
                r.prompt_tokens,
                r.generated_tokens,
            )
            for r in records
        ],
    )
    conn.executemany(
        "INSERT INTO model_call_totals(purpose, parsed, unparsed, prompt_tokens, generated_tokens) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT(purpose) DO UPDATE SET parsed = parsed + excluded.parsed, "
        "unparsed = unparsed + excluded.unparsed, prompt_tokens = prompt_tokens + excluded.prompt_tokens, "
        "generated_tokens = generated_tokens + excluded.generated_tokens",
        [(r.purpose, int(r.status == OK), int(r.status != OK), r.prompt_tokens, r.generated_tokens) for r in records],
    )
    # ids only grow (nothing else deletes here), so the newest max_rows are a range of ids
    conn.execute("DELETE FROM model_calls WHERE id <= (SELECT max(id) FROM model_calls) - ?", (max_rows,))


def log(conn: db.Conn, records: Sequence[CallRecord], *, best_effort: bool = False) -> None:
    """``write`` in a transaction of its own. ``best_effort``: a database that cannot be
    written (busy past the timeout, read-only) costs the record, not the caller's result."""
    if not records:
        return
    try:
        with db.transaction(conn):
            write(conn, records)
    except (apsw.BusyError, apsw.LockedError, apsw.ReadOnlyError, apsw.CantOpenError) as exc:
        if not best_effort:
            raise
        log_.warning("model call log not written: %s", exc)


def totals(conn: db.Conn) -> dict[str, dict[str, int]]:
    """Parsed / unparsed calls and tokens per purpose (every purpose, zeros included)."""
    got = {
        str(r[0]): {
            "parsed": int(r[1]),
            "unparsed": int(r[2]),
            "prompt_tokens": int(r[3]),
            "generated_tokens": int(r[4]),
        }
        for r in conn.execute(
            "SELECT purpose, parsed, unparsed, prompt_tokens, generated_tokens FROM model_call_totals ORDER BY purpose"
        )
    }
    zero = {"parsed": 0, "unparsed": 0, "prompt_tokens": 0, "generated_tokens": 0}
    return {p: got.pop(p, dict(zero)) for p in PURPOSES} | got


def recent_failures(conn: db.Conn, limit: int = 5) -> list[dict[str, object]]:
    """The newest calls whose reply was refused, newest first."""
    rows = conn.execute(
        "SELECT at, purpose, model, status, substr(reply, 1, 120) FROM model_calls WHERE status != ? "
        "ORDER BY id DESC LIMIT ?",
        (OK, limit),
    ).fetchall()
    return [{"at": a, "purpose": p, "model": m, "status": s, "reply": r} for a, p, m, s, r in rows]
