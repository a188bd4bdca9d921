"""Export: append this device's new journal rows to ``DIR/<device-id>/`` as segments.

Invariants:
- only changes made here (``origin`` NULL) are exported, each once, oldest first; a
  turn carries its content, read by hash at export time (a turn forgotten before its
  export is not exported; its tombstone is);
- the segment file is complete on disk (temp name, fsync, rename) before the export
  position moves, in the same write transaction that read the rows: a crash in between
  leaves the position where it was, and the next export writes those changes again in a
  segment with the next free number (folding twice is a no-op), never over a file;
- the next number is past every segment already in this device's folder, so a store
  restored from an old backup never writes a number it used before.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localmem.storage.engine import db
from localmem.storage.sync import log as sync_log
from localmem.storage.sync import state as sync_state
from localmem.storage.write.store import Store
from localmem.sync import segment
from localmem.sync.errors import SyncError
from localmem.sync.hlc import HybridClock
from localmem.sync.keys import Keyring

SEGMENT_CHANGES = 2000  # changes per segment at most (a few hundred KB of turns)


@dataclass
class Exported:
    segments: int = 0
    changes: int = 0
    bytes: int = 0


def device_of(store: Store) -> sync_state.DeviceState:
    """This store's sync identity, made on first use (a random 16-hex-digit id)."""
    state = sync_state.device_state(store.conn)
    if state is not None:
        return state

    def make() -> sync_state.DeviceState:
        with db.transaction(store.conn):
            return sync_state.create_device(store.conn, secrets.token_hex(8))

    return store.retrying(make)


def own_numbers(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(n for p in folder.iterdir() if (n := segment.segment_number(p.name)) is not None)


def export(store: Store, root: Path, keys: Keyring) -> Exported:
    """Write every change made here since the last export into new segments."""
    if not root.is_dir():
        raise SyncError(
            f"{root}: the sync folder does not exist (make it, or point to the folder your sync tool carries)"
        )
    out = Exported()
    device = device_of(store).device
    own = root / device
    _remove_own_temps(own)
    while True:
        written = store.retrying(lambda: _one_segment(store, own, keys))
        if written is None:
            return out
        out.segments += 1
        out.changes += written[0]
        out.bytes += written[1]


def _one_segment(store: Store, own: Path, keys: Keyring) -> tuple[int, int] | None:
    conn = store.conn
    with db.transaction(conn):
        state = sync_state.device_state(conn)
        if state is None:
            raise SyncError("the store lost its sync identity during the export")
        rows = sync_state.local_changes(conn, state.exported_seq, SEGMENT_CHANGES)
        if not rows:
            return None
        clock = HybridClock(state.hlc)
        turns = sync_state.turn_payloads(conn, [r.key for r in rows if r.kind == "turn"])
        items: list[dict[str, Any]] = []
        for r in rows:
            item: dict[str, Any] = {
                "hlc": clock.now(),
                "kind": r.kind,
                "key": r.key,
                "model": r.model,
                "data": None if r.data is None else json.loads(r.data),
                "at": r.at,
            }
            if r.kind == "turn":
                if r.key not in turns:
                    continue  # forgotten before it was exported: the tombstone follows
                item["turn"] = turns[r.key]
            items.append(item)
        n = max([state.next_segment, *(x + 1 for x in own_numbers(own))])
        size = 0
        if items:
            path, data = segment.write(own, state.device, n, items, keys)
            size = len(data)
            # recorded like a folded segment, so this store never folds its own again
            # (but a store restored from an older backup folds what it wrote after it)
            sync_log.record_folded(
                conn, state.device, n, segment.file_sha256(data), path.name, len(items), size, clock.last
            )
            n += 1
        sync_state.save_export(conn, rows[-1].seq, n, clock.last)
    return len(items), size


def _remove_own_temps(own: Path) -> None:
    """A temp file of ours left by a kill mid-write: never a segment, safe to remove
    (only this device writes its folder)."""
    if own.is_dir():
        for p in own.iterdir():
            if segment.is_own_temp(p.name):
                p.unlink(missing_ok=True)
