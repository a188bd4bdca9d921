"""This device's side of sync: its identity, the changes it has not exported yet, and
its export position, each read or written in a step of its own.

An export is three steps: ``outgoing`` reads, on one snapshot, the device state, the
next journal rows made here and their turns' content; ``localmem.sync`` writes them to a
segment file (complete on disk before anything is recorded); ``save_export`` records
that file as this device's own (so it is never folded back) and moves the export
position past the rows, in one transaction.

Invariants: the position only moves forward (``max``), so two processes exporting one
store at once never move it back (at worst a change goes out twice, which folding
ignores); a crash between the file and ``save_export`` leaves the position where it
was, and the next export writes those changes again under the next free number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from localmem.storage.engine import db
from localmem.storage.sync import log as sync_log
from localmem.storage.sync import state as sync_state
from localmem.storage.sync.state import ChangeRow, DeviceState
from localmem.storage.write.store import Store


@dataclass(frozen=True)
class Outgoing:
    """The next journal rows made here, on one snapshot with the device state; ``turns``:
    the content of each turn among them still stored (a forgotten one is absent)."""

    state: DeviceState
    rows: list[ChangeRow]
    turns: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class OwnSegment:
    """A segment file this device wrote, recorded like a folded one."""

    number: int
    name: str
    sha256: str
    changes: int
    size: int


def device(store: Store, new_id: str) -> DeviceState:
    """This store's sync identity; made with ``new_id`` on first use."""
    state = sync_state.device_state(store.conn)
    if state is not None:
        return state

    def make() -> DeviceState:
        with db.transaction(store.conn):
            return sync_state.create_device(store.conn, new_id)

    return store.retrying(make)


def outgoing(store: Store, limit: int) -> Outgoing | None:
    """At most ``limit`` journal rows made here after the export position, or None when
    there are none (or the store has no sync identity)."""
    with store.snapshot():
        state = sync_state.device_state(store.conn)
        if state is None:
            return None
        rows = sync_state.local_changes(store.conn, state.exported_seq, limit)
        if not rows:
            return None
        turns = sync_state.turn_payloads(store.conn, [r.key for r in rows if r.kind == "turn"])
    return Outgoing(state, rows, turns)


def save_export(
    store: Store, device_id: str, through_seq: int, next_segment: int, hlc: int, own: OwnSegment | None
) -> None:
    """Record ``own`` (the file just written, if any) and move the export position past
    ``through_seq``, in one transaction."""

    def save() -> None:
        with db.transaction(store.conn):
            if own is not None:
                sync_log.record_folded(
                    store.conn, device_id, own.number, own.sha256, own.name, own.changes, own.size, hlc
                )
            sync_state.save_export(store.conn, through_seq, next_segment, hlc)

    store.retrying(save)
