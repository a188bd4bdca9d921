"""One sync pass (export this device's changes, fold the others'), the watch loop, and
``sync status``. The folder is moved between devices by a sync tool; this module only
reads and writes files in it.

Invariant: a pass never stops at a bad segment: it is reported (``refused`` /
``incomplete``) and the pass goes on, so one damaged file holds back nothing else.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from localmem.storage.sync import exporting
from localmem.storage.sync import log as sync_log
from localmem.storage.write import forgets
from localmem.storage.write.store import Store
from localmem.sync import rewrite
from localmem.sync.export import Exported, device_of, export
from localmem.sync.fold import Folded, fold
from localmem.sync.folder import Folder, FolderMissing
from localmem.sync.keys import Keyring

PLAINTEXT_WARNING = (
    "no sync key is set: the segments in {root} hold your memories in plaintext (compressed, not encrypted); "
    "anyone who can read that folder can read them. Set --passphrase-file or --identity to encrypt them."
)


@dataclass
class Pass:
    device: str
    exported: Exported
    folded: Folded
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "exported": asdict(self.exported),
            "folded": {
                "segments": self.folded.segments,
                "changes": self.folded.changes,
                "bytes": self.folded.bytes,
                "turns": self.folded.applied.turns,
                "forgotten": self.folded.applied.forgotten,
                "derived": self.folded.applied.derived,
                "pending": self.folded.applied.pending,
                "dropped": self.folded.applied.dropped,
                "unknown_kinds": self.folded.applied.unknown,
                "refused": self.folded.refused,
                "incomplete": self.folded.incomplete,
            },
            "seconds": round(self.seconds, 3),
        }


def sync_once(store: Store, root: Path, keys: Keyring) -> Pass:
    """One pass: note a key change, fold the others' segments (so a tombstone learnt here
    keeps forgotten content out of what this device writes next), export this device's
    changes, then write again its own segments that a key change or a forget made stale."""
    t0 = time.perf_counter()
    folder = Folder(root)
    folder.require()
    me = device_of(store)
    epoch = rewrite.key_epoch(store, keys)
    folded = fold(store, root, keys)
    exported = Exported()
    rewrite.adopt_legacy(store, folder, me, keys, exported)
    new = export(store, root, keys)
    exported.segments, exported.changes, exported.bytes = new.segments, new.changes, new.bytes
    rewrite.rewrite_own(store, folder, me.device, keys, epoch.epoch, exported)
    return Pass(me.device, exported, folded, time.perf_counter() - t0)


def watch(
    store: Store,
    root: Path,
    keys: Keyring,
    interval: float,
    stop: threading.Event,
    report: Callable[[Pass], None] | None = None,
    waiting: Callable[[str], None] | None = None,
) -> None:
    """Sync every ``interval`` seconds until ``stop`` is set (the sync tool moves files
    on its own schedule, so polling the folder is as good as watching it). A folder that
    does not exist (yet: the sync tool has not made it) is waited for: ``waiting`` is
    told once, and the first pass runs when it appears."""
    told = False
    while not stop.is_set():
        try:
            done = sync_once(store, root, keys)
        except FolderMissing as exc:
            if not told and waiting is not None:
                waiting(f"{exc}; waiting for it to appear")
            told = True
            stop.wait(interval)
            continue
        told = False
        if report is not None:
            report(done)
        stop.wait(interval)


def health(store: Store) -> dict[str, Any] | None:
    """What ``doctor`` says of sync: None for a store that never synced, else its device
    id and every segment refused (with the reason) or still arriving."""
    state = exporting.device_state(store)
    if state is None:
        return None
    rows = sync_log.refused(store.conn)
    return {
        "device": state.device,
        "refused": [asdict(r) for r in rows if not r.incomplete],
        "incomplete": [asdict(r) for r in rows if r.incomplete],
        "unexported_changes": exporting.unexported(store, state.exported_seq),
    }


def status(store: Store, root: Path | None) -> dict[str, Any]:
    """Per device: segments folded, the last one, lag (segments in the folder not folded
    yet), bytes, and every refused or incomplete segment with its reason."""
    me = device_of(store)
    logs = {d.device: d for d in sync_log.device_logs(store.conn)}
    folder = Folder(root) if root is not None else None
    seen = {d: folder.numbers(d) for d in folder.devices()} if folder is not None else {}
    devices = []
    for device in sorted(set(logs) | set(seen)):
        log = logs.get(device)
        folded = sync_log.folded_numbers(store.conn, device)
        in_folder = seen.get(device, [])
        devices.append(
            {
                "device": device,
                "this_device": device == me.device,
                "segments_folded": log.segments if log else 0,
                "last_segment_folded": log.last_segment if log else None,
                "lag_segments": len([n for n in in_folder if n not in folded]),
                "newest_in_folder": max(in_folder, default=None),
                "bytes_folded": log.bytes if log else 0,
                "changes_folded": log.changes if log else 0,
                "last_folded_at": log.folded_at if log else None,
            }
        )
    return {
        "device": me.device,
        "next_segment": me.next_segment,
        "unexported_changes": exporting.unexported(store, me.exported_seq),
        "devices": devices,
        "refused": [asdict(r) for r in sync_log.refused(store.conn)],
        "pending_derived": sync_log.pending_count(store.conn),
        "forgotten": len(forgets.forget_set(store.conn)),
    }
