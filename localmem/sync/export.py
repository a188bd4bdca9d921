"""Export: append this device's new journal rows to ``DIR/<device-id>/`` as segments;
and the one rule for what a segment holds, used again when one is rewritten (``rewrite``).

Invariants:
- only changes made here (``origin`` NULL) are exported, each once, oldest first; a
  turn carries its content, read by hash at export time;
- forgotten content is never written: a turn forgotten before its export is not
  exported (its tombstone is), nor a cue, extraction record or antecedent edge about a
  forgotten turn, nor the header of a session left without turns;
- a row's clock stamp is the segment's first stamp plus its distance in the journal
  (``hlc_lo + seq - seq_lo``), so a segment written again carries the same stamps;
- the segment file is complete on disk (``folder.put``: temp name, fsync, rename) before
  it is recorded and the export position moves (``storage.sync.exporting.save_export``):
  a crash in between leaves the position where it was, and the next export writes those
  changes again in a segment with the next free number (folding twice is a no-op);
- the next number is past every segment already in this device's folder, so a store
  restored from an old backup never writes a number it used before.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localmem.storage.sync import exporting
from localmem.storage.sync.exporting import Outgoing, OwnSegment
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
    rewritten: int = 0  # own segments written again (a key change, a forget)
    removed: int = 0  # own segments removed (written again under new numbers)


def device_of(store: Store) -> DeviceState:
    """This store's sync identity, made on first use (a random 16-hex-digit id)."""
    return exporting.device(store, secrets.token_hex(8))


def held_now(batch: Outgoing, hlc_lo: int) -> tuple[list[dict[str, Any]], str]:
    """The changes a segment holds for ``batch``'s rows as the store stands now (the
    module docstring's rules), stamped from ``hlc_lo``; and the digest of the rows kept."""
    seq_lo = batch.rows[0].seq if batch.rows else 0
    items: list[dict[str, Any]] = []
    kept: list[int] = []
    for r in batch.rows:
        if r.kind == "turn" and r.key not in batch.turns:
            continue  # forgotten: its tombstone goes instead
        if r.kind == "session" and r.seq not in batch.live_sessions:
            continue  # a session left without turns: its header (a title is content) goes too
        if any(h in batch.forgotten for h in batch.about.get(r.seq, ())):
            continue  # derived from a forgotten turn
        item: dict[str, Any] = {
            "hlc": hlc_lo + (r.seq - seq_lo),
            "kind": r.kind,
            "key": r.key,
            "model": r.model,
            "data": None if r.data is None else json.loads(r.data),
            "at": r.at,
        }
        if r.kind == "turn":
            item["turn"] = batch.turns[r.key]
        items.append(item)
        kept.append(r.seq)
    return items, hashlib.sha256(",".join(map(str, kept)).encode()).hexdigest()


def export(store: Store, root: Path, keys: Keyring) -> Exported:
    """Write every change made here since the last export into new segments."""
    folder = Folder(root)
    folder.require()
    out = Exported()
    device = device_of(store).device
    folder.remove_temps(device)
    while (batch := exporting.outgoing(store, SEGMENT_CHANGES)) is not None:
        changes, size = _one_segment(store, folder, batch, keys)
        out.segments += 1 if size else 0
        out.changes += changes
        out.bytes += size
    return out


def _one_segment(store: Store, folder: Folder, batch: Outgoing, keys: Keyring) -> tuple[int, int]:
    state = batch.state
    hlc_lo = HybridClock(state.hlc).now()
    seq_lo, seq_hi = batch.rows[0].seq, batch.rows[-1].seq
    last = hlc_lo + seq_hi - seq_lo
    items, digest = held_now(batch, hlc_lo)
    n = max([state.next_segment, *(x + 1 for x in folder.numbers(state.device))])
    own = None
    while items:
        data = segment.encode(state.device, n, items, keys)
        try:
            folder.put(state.device, n, data)
        except SegmentExists:  # another process of this store took the number: the next one
            n += 1
            continue
        own = OwnSegment(
            n,
            seq_lo,
            seq_hi,
            hlc_lo,
            batch.keys.key_epoch,
            keys.sealed,
            digest,
            segment.file_sha256(data),
            segment_name(n),
            len(items),
            len(data),
        )
        n += 1
        break
    exporting.save_export(store, state.device, seq_hi, n, last, own)
    return len(items), 0 if own is None else own.size
