"""This device's side of sync: its identity, what it has to write (new journal rows, or
the rows one of its segments holds, for a rewrite) with the facts that leave forgotten
content out, and the records of what it wrote, each read or written in a step of its own.

An export is three steps: ``outgoing`` reads, on one snapshot, the device state, the
next journal rows made here, their turns' content, which referenced turns are forgotten
and which sessions still exist; ``localmem.sync`` writes a segment file (complete on disk
before anything is recorded); ``save_export`` records that file as this device's own (so
it is never folded back) and moves the export position past the rows, in one transaction.
A rewrite (a key change, a forget) is ``held`` then ``save_rewrite``.

Invariants: the position only moves forward (``max``), so two processes exporting one
store at once never move it back (at worst a change goes out twice, which folding
ignores); a crash between the file and its record leaves the store as it was, and the
step is done again next time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from localmem.storage.engine import db
from localmem.storage.sync import log as sync_log
from localmem.storage.sync import own as own_sql
from localmem.storage.sync import state as sync_state
from localmem.storage.sync.own import KeyState, OwnSegment
from localmem.storage.sync.state import ChangeRow, DeviceState
from localmem.storage.write.store import Store

__all__ = ["KeyState", "Outgoing", "OwnSegment"]


@dataclass(frozen=True)
class Outgoing:
    """Journal rows made here, on one snapshot with the device state; ``turns``: the
    content of each turn among them still stored (a forgotten one is absent);
    ``about``: the turns each derived row is about (by seq), ``forgotten`` those of them
    in the forget set; ``live_sessions``: the seqs of session rows whose session exists."""

    state: DeviceState
    keys: KeyState
    rows: list[ChangeRow]
    turns: dict[str, dict[str, Any]]
    about: dict[int, tuple[str, ...]]
    forgotten: set[str]
    live_sessions: set[int]


def device(store: Store, new_id: str) -> DeviceState:
    """This store's sync identity; made with ``new_id`` on first use."""
    state = sync_state.device_state(store.conn)
    if state is not None:
        return state

    def make() -> DeviceState:
        with db.transaction(store.conn):
            return sync_state.create_device(store.conn, new_id)

    return store.retrying(make)


def device_state(store: Store) -> DeviceState | None:
    """This store's sync identity, or None when it never synced (nothing is made)."""
    return sync_state.device_state(store.conn)


def key_state(store: Store) -> KeyState:
    found = own_sql.key_state(store.conn)
    return found if found is not None else KeyState(0, None, 0, 0)


def outgoing(store: Store, limit: int) -> Outgoing | None:
    """At most ``limit`` journal rows made here after the export position, or None when
    there are none (or the store has no sync identity)."""
    with store.snapshot():
        state = sync_state.device_state(store.conn)
        if state is None:
            return None
        rows = sync_state.local_changes(store.conn, state.exported_seq, limit)
        return _with_facts(store, state, rows) if rows else None


def held(store: Store, seq_lo: int, seq_hi: int, limit: int = -1) -> Outgoing | None:
    """The journal rows made here with ``seq_lo <= seq <= seq_hi`` (at most ``limit``;
    what one of this device's segments holds), as they would be written now."""
    with store.snapshot():
        state = sync_state.device_state(store.conn)
        if state is None:
            return None
        return _with_facts(store, state, own_sql.local_rows(store.conn, seq_lo, seq_hi, limit))


def _with_facts(store: Store, state: DeviceState, rows: list[ChangeRow]) -> Outgoing:
    conn = store.conn
    turns = sync_state.turn_payloads(conn, [r.key for r in rows if r.kind == "turn"])
    about = own_sql.referenced_turns(rows)
    forgotten = own_sql.forgotten_among(conn, {h for hs in about.values() for h in hs})
    return Outgoing(state, key_state(store), rows, turns, about, forgotten, own_sql.live_sessions(conn, rows))


def own_segments(store: Store) -> list[OwnSegment]:
    return own_sql.own_segments(store.conn)


def unexported(store: Store, after_seq: int) -> int:
    """Changes made here after the export position (folded ones are not this device's to export)."""
    return own_sql.unexported(store.conn, after_seq)


def forget_count(store: Store) -> int:
    return own_sql.forget_count(store.conn)


def save_export(
    store: Store, device_id: str, through_seq: int, next_segment: int, hlc: int, own: OwnSegment | None
) -> None:
    """Record ``own`` (the file just written, if any) and move the export position past
    ``through_seq``, in one transaction."""

    def save() -> None:
        with db.transaction(store.conn):
            if own is not None:
                _record(store.conn, device_id, own, hlc)
            sync_state.save_export(store.conn, through_seq, next_segment, hlc)

    store.retrying(save)


def save_rewrite(store: Store, device_id: str, own: Sequence[OwnSegment], *, legacy_through: int | None = None) -> None:
    """Record segments written again (a key change, a forget) or anew for the rows of
    segments written before ``sync_own`` (``legacy_through``: then negated, meaning
    "those files are to be removed"), in one transaction."""

    def save() -> None:
        with db.transaction(store.conn):
            for s in own:
                _record(store.conn, device_id, s, s.hlc_lo + s.seq_hi - s.seq_lo)
            if legacy_through is not None:
                own_sql.set_legacy_through(store.conn, -legacy_through)
                if own:
                    nxt = max(s.number for s in own) + 1
                    sync_state.save_export(store.conn, 0, nxt, 0)

    store.retrying(save)


def legacy_removed(store: Store) -> None:
    def save() -> None:
        with db.transaction(store.conn):
            own_sql.set_legacy_through(store.conn, 0)

    store.retrying(save)


def save_key(store: Store, epoch: int, check: bytes) -> None:
    """The keys segments are written under from now on (``epoch``), and their check."""

    def save() -> None:
        with db.transaction(store.conn):
            own_sql.set_key(store.conn, epoch, check)

    store.retrying(save)


def save_forget_mark(store: Store, mark: int) -> None:
    def save() -> None:
        with db.transaction(store.conn):
            own_sql.set_forget_mark(store.conn, mark)

    store.retrying(save)


def _record(conn: db.Conn, device_id: str, own: OwnSegment, hlc: int) -> None:
    # recorded like a folded segment too, so this store never folds its own back; a
    # rewritten one replaces the record of the bytes it replaced
    own_sql.put_own(conn, own)
    sync_log.replace_folded(conn, device_id, own.number, own.sha256, own.name, own.changes, own.size, hlc)
