"""Forget with a preview, and redact a span in place: the web view's two writes.

A selection names turns four ways: ``{"turns": [ids]}`` (a turn, or the results a person
ticked), ``{"session": id}``, or ``{"filter": {...}}`` (a date range and the browser's other
filters, at least one of them). ``preview`` resolves it to turn ids and counts what goes
(turns, sessions, cues, edges, topics, recall-log rows) with a digest of the turns' content
hashes; ``forget`` resolves it again and deletes exactly those turns only if the digest
is unchanged (else ``Changed``: look again), through ``Store.forget``, the one forget of
``localmem forget`` and MCP ``forget``: each turn journaled as forgotten, so sync carries
the tombstones. ``redact`` is ``storage.write.redact.redact_span``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from localmem.errors import InputError, NotFound
from localmem.storage.reads import browse, selection
from localmem.storage.reads import views as reads
from localmem.storage.write.redact import Conflict, redact_span
from localmem.storage.write.store import Store

SAMPLE = 8  # turns listed in a preview
MAX_IDS = 100_000  # turn ids one selection may name

NO_UNDO = "There is no undo: forgotten turns cannot be brought back from this store."
REACH = (
    "If this store syncs (localmem sync), the forget travels to your other devices: each deletes these "
    "turns and everything derived from them and keeps their hashes in its forget set, so they do not come "
    "back from a late segment, an old export or a re-ingest of the source file; and each writes its own "
    "sync segments again without them: after one sync on every device, no file of the sync folder holds them."
)
NOT_REACHED = (
    "What the forget does not reach: a retired device's folder in the sync folder (delete it) and copies "
    "outside it (a sync tool's versioning or trash); a Litestream replica's earlier states until its "
    "retention drops them, and replica snapshots taken before; `localmem backup` files and exports made "
    "before; this store's change journal, which keeps the text of the forgotten turns' cues until the "
    "store is rebuilt; and, until SQLite reuses them, freed pages of the database file and its WAL. "
    "docs/security.md says how to purge each."
)


class Changed(InputError):
    """The selection no longer names the turns its preview showed."""


def resolve(store: Store, sel: Mapping[str, Any]) -> list[int]:
    """The stored turn ids a selection names, ascending."""
    if not isinstance(sel, Mapping) or len([k for k in ("turns", "session", "filter") if k in sel]) != 1:
        raise InputError('a selection is one of {"turns": [ids]}, {"session": id} or {"filter": {...}}')
    if "turns" in sel:
        ids = sel["turns"]
        if not isinstance(ids, list) or not ids or len(ids) > MAX_IDS:
            raise InputError(f"turns must be a list of 1 to {MAX_IDS:,} turn ids")
        wanted = [_id(x, "turns") for x in ids]
        found = selection.existing(store.conn, wanted)
        if not found:
            raise NotFound(
                f"no turn with id {wanted[0]}" if len(wanted) == 1 else f"none of the {len(wanted)} turns exists"
            )
        return found
    if "session" in sel:
        sid = _id(sel["session"], "session")
        if reads.session_head(store.conn, sid) is None:
            raise NotFound(f"no session with id {sid}")
        return sorted(selection.session_turn_ids(store.conn, sid))
    flt = sel["filter"]
    if not isinstance(flt, Mapping):
        raise InputError("filter must be an object of filters (start, end, source, speaker, role)")
    clean = browse.clean({str(k): None if v is None else str(v) for k, v in flt.items()})
    if not clean:
        raise InputError("a filter selection needs at least one filter (a date range, a source, ...)")
    return browse.turn_ids(store.conn, clean)


def _id(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InputError(f"{name}: {value!r} is not an id")
    try:
        out = int(value)
    except ValueError as exc:
        raise InputError(f"{name}: {value!r} is not an id") from exc
    if not 0 < out < 2**63:
        raise InputError(f"{name}: {out} is out of range")
    return out


def digest(hashes: list[str]) -> str:
    """One hash of the selected turns' content hashes (sorted): what the preview showed."""
    return hashlib.sha256("\n".join(sorted(hashes)).encode()).hexdigest()[:32]


def preview(store: Store, sel: Mapping[str, Any]) -> dict[str, Any]:
    """What forgetting the selection removes, a few of its turns, and what it reaches."""
    ids = resolve(store, sel)
    p = selection.preview(store.conn, ids)
    sample = browse.turn_rows(store.conn, ids[:SAMPLE])
    return {
        "turns": p.turns,
        "sessions": p.sessions,
        "sessions_emptied": p.sessions_emptied,
        "cues": p.cues,
        "edges": p.edges,
        "topics": p.topics,
        "recalls": p.recalls,
        "jobs": p.jobs,
        "first": p.first,
        "last": p.last,
        "digest": digest(p.hashes),
        "sample": [
            {"turn_id": r.id, "session": r.session, "speaker": r.speaker, "timestamp": r.ts, "text": r.text[:200]}
            for r in (sample[i] for i in ids[:SAMPLE] if i in sample)
        ],
        "reach": REACH,
        "not_reached": NOT_REACHED,
        "undo": NO_UNDO,
    }


def forget(store: Store, sel: Mapping[str, Any], expect: str) -> dict[str, Any]:
    """Forget the selection's turns if they are still the ones its preview (``expect``,
    its digest) showed; returns how many turns and sessions went. Only those ids are
    forgotten: a turn written or redacted after the check is never taken along."""
    with store.snapshot():  # the selection and its digest as of one commit
        ids = resolve(store, sel)
        if not isinstance(expect, str) or not expect:
            raise InputError("forget needs the digest of its preview (POST /api/forget/preview first)")
        p = selection.preview(store.conn, ids)
    if digest(p.hashes) != expect:
        raise Changed("the selection changed since its preview (turns were added, redacted or forgotten): look again")
    if not ids:
        return {"forgotten": 0, "sessions_emptied": 0}
    n = store.forget(turn_ids=ids)
    return {"forgotten": n, "sessions_emptied": p.sessions_emptied}


def redact(
    store: Store, turn_id: int, start: int, end: int, expect_hash: str | None, expect_text: str | None = None
) -> dict[str, Any]:
    """Replace a span of a turn's text by ``[secret: manual]``; returns the new turn id.
    ``expect_text``: the selected text, checked against characters ``start`` .. ``end``."""
    try:
        r = redact_span(store, turn_id, start, end, expect_hash=expect_hash, expect_text=expect_text)
    except Conflict as exc:
        raise Changed(str(exc)) from exc
    return {
        "turn_id": r.new_id,
        "old_turn_id": r.old_id,
        "session_id": r.session_id,
        "text": r.text,
        "forgotten": r.new_id is None,
    }
