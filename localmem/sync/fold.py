"""Fold: apply every other device's new segments to this store.

Invariants:
- a segment is folded only when it verifies whole (format version, length, sha256,
  decryption, JSON); one that does not is recorded as refused (or incomplete, when it is
  still arriving) and looked at again next time: nothing of it is applied;
- a segment is recorded as folded after all its changes are applied (each step its own
  transaction): a crash mid-fold folds it again, which changes nothing already applied;
- segments fold in number order per device, but nothing depends on it: gaps (a segment
  still on its way) and late arrivals fold whenever they come (merge rules in apply.py);
- this device's own segments are recorded when written, so they are never folded back;
  one in its folder that this store has no record of (it was restored from an older
  backup) is folded like another device's, so nothing it wrote before the restore is lost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localmem.storage.engine import db
from localmem.storage.sync import log as sync_log
from localmem.storage.sync import state as sync_state
from localmem.storage.write import forgets
from localmem.storage.write.store import Store
from localmem.sync import segment
from localmem.sync.apply import Applied, apply_changes, apply_derived
from localmem.sync.errors import Incomplete, Refused
from localmem.sync.export import device_of
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
    device_of(store)
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        _fold_device(store, folder, keys, out)
    _retry_pending(store, out)
    return out


def _fold_device(store: Store, folder: Path, keys: Keyring, out: Folded) -> None:
    device = folder.name
    names: set[str] = set()
    files = []
    for p in folder.iterdir():
        n = segment.segment_number(p.name)
        if n is not None and p.is_file():
            names.add(p.name)
            files.append((n, p.name, p))
    for n, name, path in sorted(files):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue  # renamed or removed by the sync tool meanwhile
        digest = segment.file_sha256(data)
        if sync_log.is_folded(store.conn, device, n, digest):
            continue
        try:
            seg = segment.decode(data, keys, where=f"{device}/{name}")
            if seg.header.device != device or seg.header.segment != n:
                raise Refused(
                    f"{device}/{name}: the header says device {seg.header.device} segment {seg.header.segment}"
                )
        except (Refused, Incomplete) as exc:
            _refuse(store, device, name, str(exc), isinstance(exc, Incomplete), out)
            continue
        apply_changes(store, device, seg.changes, out.applied)
        _record(store, device, n, name, seg)
        out.segments += 1
        out.changes += len(seg.changes)
        out.bytes += seg.size

    def tidy() -> None:
        with db.transaction(store.conn):
            sync_log.clear_refused(store.conn, device, names)

    store.retrying(tidy)


def _record(store: Store, device: str, n: int, name: str, seg: segment.Segment) -> None:
    def record() -> None:
        with db.transaction(store.conn):
            sync_log.record_folded(
                store.conn, device, n, seg.sha256, name, len(seg.changes), seg.size, seg.header.hlc_hi
            )
            state = sync_state.device_state(store.conn)
            clock = HybridClock(state.hlc if state else 0)
            sync_state.save_hlc(store.conn, clock.observe(seg.header.hlc_hi))

    store.retrying(record)


def _refuse(store: Store, device: str, name: str, reason: str, incomplete: bool, out: Folded) -> None:
    (out.incomplete if incomplete else out.refused).append(reason)

    def record() -> None:
        with db.transaction(store.conn):
            sync_log.record_refused(store.conn, device, name, reason, incomplete=incomplete)

    store.retrying(record)


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
    by_device: dict[str, tuple[list[dict[str, Any]], list[int]]] = {}
    for pid, device, change in rows:
        items, ids = by_device.setdefault(device, ([], []))
        items.append(json.loads(change))
        ids.append(pid)
    for device, (items, ids) in by_device.items():
        apply_derived(store, device, items, out.applied, drop=ids)  # one still missing a turn waits again
