"""Export: append this device's new journal rows to ``DIR/<device-id>/`` as segments.

Invariants:
- only changes made here (``origin`` NULL) are exported, each once, oldest first; a
  turn carries its content, read by hash at export time (a turn forgotten before its
  export is not exported; its tombstone is);
- the segment file is complete on disk (``folder.put``: temp name, fsync, rename) before
  the export position moves (``storage.sync.exporting.save_export``): a crash in between
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

from localmem.storage.sync import exporting
from localmem.storage.sync.state import DeviceState
from localmem.storage.write.store import Store
from localmem.sync import segment
from localmem.sync.folder import Folder, SegmentExists, segment_name
from localmem.sync.hlc import HybridClock
from localmem.sync.keys import Keyring

SEGMENT_CHANGES = 2000  # changes per segment at most (a few hundred KB of turns)


@dataclass
class Exported:
    segments: int = 0
    changes: int = 0
    bytes: int = 0


def device_of(store: Store) -> DeviceState:
    """This store's sync identity, made on first use (a random 16-hex-digit id)."""
    return exporting.device(store, secrets.token_hex(8))


def export(store: Store, root: Path, keys: Keyring) -> Exported:
    """Write every change made here since the last export into new segments."""
    folder = Folder(root)
    folder.require()
    out = Exported()
    device = device_of(store).device
    folder.remove_temps(device)
    while (batch := exporting.outgoing(store, SEGMENT_CHANGES)) is not None:
        changes, size = _one_segment(store, folder, batch, keys)
        out.segments += 1
        out.changes += changes
        out.bytes += size
    return out


def _one_segment(store: Store, folder: Folder, batch: exporting.Outgoing, keys: Keyring) -> tuple[int, int]:
    state = batch.state
    clock = HybridClock(state.hlc)
    items: list[dict[str, Any]] = []
    for r in batch.rows:
        item: dict[str, Any] = {
            "hlc": clock.now(),
            "kind": r.kind,
            "key": r.key,
            "model": r.model,
            "data": None if r.data is None else json.loads(r.data),
            "at": r.at,
        }
        if r.kind == "turn":
            if r.key not in batch.turns:
                continue  # forgotten before it was exported: the tombstone follows
            item["turn"] = batch.turns[r.key]
        items.append(item)
    n = max([state.next_segment, *(x + 1 for x in folder.numbers(state.device))])
    own = None
    while items:
        data = segment.encode(state.device, n, items, keys)
        try:
            folder.put(state.device, n, data)
        except SegmentExists:  # another process of this store took the number: the next one
            n += 1
            continue
        # recorded like a folded segment, so this store never folds its own again
        # (but a store restored from an older backup folds what it wrote after it)
        own = exporting.OwnSegment(n, segment_name(n), segment.file_sha256(data), len(items), len(data))
        n += 1
        break
    exporting.save_export(store, state.device, batch.rows[-1].seq, n, clock.last, own)
    return len(items), 0 if own is None else own.size
