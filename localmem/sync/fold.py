"""Fold: apply every other device's new segments to this store.

Invariants:
- a segment is folded only when it verifies whole (format version, length, sha256,
  decryption, JSON); one that does not is recorded as refused (or incomplete, when it is
  still arriving) and looked at again next time: nothing of it is applied;
- a segment's changes and the record that it was folded commit in one transaction
  (``storage.sync.folding.commit_segment``): a crash mid-fold leaves it unfolded, and it
  folds again next time;
- segments fold in number order per device, but nothing depends on it: gaps (a segment
  still on its way) and late arrivals fold whenever they come (merge rules in apply.py);
- this device's own segments are recorded when written (``sync_own``), so they are never
  folded back, even rewritten; one in its folder that this store has no record of (it was restored from an older
  backup) is folded like another device's, so nothing it wrote before the restore is lost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from localmem.storage.sync import exporting, folding
from localmem.storage.sync import log as sync_log
from localmem.storage.sync import state as sync_state
from localmem.storage.write import forgets
from localmem.storage.write.store import Store
from localmem.sync import apply, segment
from localmem.sync.apply import Applied
from localmem.sync.errors import Incomplete, Refused
from localmem.sync.export import device_of
from localmem.sync.folder import Folder, SegmentFile, segment_name
from localmem.sync.hlc import HybridClock
from localmem.sync.keys import Keyring


@dataclass
class Folded:
    segments: int = 0
    changes: int = 0
    bytes: int = 0
    refused: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    applied: Applied = field(default_factory=Applied)


def fold(store: Store, root: Path, keys: Keyring) -> Folded:
    out = Folded()
    me = device_of(store).device
    folder = Folder(root)
    for device in folder.devices():
        mine = {segment_name(s.number) for s in exporting.own_segments(store)} if device == me else set()
        _fold_device(store, folder, device, keys, out, mine)
    _retry_pending(store, out)
    return out


def _fold_device(store: Store, folder: Folder, device: str, keys: Keyring, out: Folded, mine: set[str]) -> None:
    files = folder.segments(device)
    for f in files:
        if f.name in mine:
            continue  # written by this store (perhaps rewritten since its last record): never folded back
        data = folder.read(f)
        if data is None:
            continue  # renamed or removed by the sync tool meanwhile
        digest = segment.file_sha256(data)
        if sync_log.is_folded(store.conn, device, f.number, digest):
            continue
        try:
            seg = segment.decode(data, keys, where=f"{device}/{f.name}")
            if seg.header.device != device or seg.header.segment != f.number:
                raise Refused(
                    f"{device}/{f.name}: the header says device {seg.header.device} segment {seg.header.segment}"
                )
        except (Refused, Incomplete) as exc:
            (out.incomplete if isinstance(exc, Incomplete) else out.refused).append(str(exc))
            folding.record_refusal(store, device, f.name, str(exc), incomplete=isinstance(exc, Incomplete))
            continue
        _record(store, f, seg, out)
        out.segments += 1
        out.changes += len(seg.changes)
        out.bytes += seg.size
    folding.forget_refusals(store, device, {f.name for f in files})


def _record(store: Store, f: SegmentFile, seg: segment.Segment, out: Folded) -> None:
    """Apply one segment and record it as folded: one transaction
    (tests/helpers/sync_worker.py hooks this step to kill a fold between segments)."""
    state = sync_state.device_state(store.conn)
    clock = HybridClock(state.hlc if state else 0)
    done = folding.FoldedFile(
        f.device,
        f.number,
        f.name,
        seg.sha256,
        len(seg.changes),
        seg.size,
        seg.header.hlc_hi,
        clock.observe(seg.header.hlc_hi),
    )
    out.applied.add(folding.commit_segment(store, done, apply.incoming(seg.changes, out.applied)))


def _retry_pending(store: Store, out: Folded) -> None:
    """Derived changes that waited for a turn: apply those whose turn came, drop those
    whose turn is forgotten."""
    waiting = sync_log.pending_turns(store.conn)
    if not waiting:
        return
    here = set(sync_state.turn_ids(store.conn, waiting))
    gone = forgets.forgotten_among(store.conn, waiting - here)
    rows = sync_log.pending_for(store.conn, here | gone)
    if not rows:
        return
    by_device: dict[str, tuple[list[str], list[int]]] = {}
    for pid, device, change in rows:
        items, ids = by_device.setdefault(device, ([], []))
        items.append(change)
        ids.append(pid)
    for device, (items, ids) in by_device.items():
        changes = apply.derived([json.loads(c) for c in items])
        out.applied.add(folding.commit_pending(store, device, changes, ids))
