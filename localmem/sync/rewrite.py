"""Rewriting this device's own segments when what they must hold changed: the keys they
are written under, or the forget set (docs/sync.md, "Key changes" and "Forget").

- **Keys.** Each pass compares the keyring with the one the device's segments were
  written under (``Keyring.matches``: a passphrase is checked by decrypting a short
  record made with it, once per process). Changed, the device starts a new key epoch
  and writes every segment of an older epoch again under the new keys; a plaintext
  segment is written again as soon as a key is set. So a device that synced without a
  key, or with a wrong one, reaches the others once its key is right, and a device that
  joins an encrypted folder finds every device's whole history, tombstones included.
  Never the other way: a device whose key is missing is not taken to mean "decrypt the
  folder" (its new segments are plaintext, with the warning; they are written again
  encrypted once the key is back).
- **Forget.** When the forget set has grown, every segment of this device is checked:
  one whose rows, as they would be written now, differ from what it holds (a forgotten
  turn, a cue or edge about one, the header of a session left without turns) is written
  again without them. So once every device has synced, no file of the folder holds
  forgotten content (a device's own segments are the only ones it writes).
- **Before migration 0014** a device's segments were written without a record of their
  rows: the first pass writes those rows again as new segments, then removes the old
  files. Stamps then restart from the oldest of them (topic changes, which alone use
  stamps across devices, keep their order on this device).

Invariants: a segment is rewritten in place (``folder.replace``: a reader sees the old
bytes or the new), with the same number and the same clock stamps; it is recorded after
the file is complete, so a crash in between rewrites it again next time (folding
either version changes nothing already applied). Old files are removed only after their
replacements are recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

from localmem.storage.sync import exporting
from localmem.storage.sync.exporting import OwnSegment
from localmem.storage.sync.state import DeviceState
from localmem.storage.write.store import Store
from localmem.sync import segment
from localmem.sync.errors import Incomplete, Refused
from localmem.sync.export import SEGMENT_CHANGES, Exported, held_now
from localmem.sync.folder import Folder, segment_name
from localmem.sync.keys import Keyring


@dataclass(frozen=True)
class KeyEpoch:
    epoch: int
    changed: bool  # this pass started a new epoch


def key_epoch(store: Store, keys: Keyring) -> KeyEpoch:
    """The key epoch segments are written under now (a new one when the keys changed)."""
    state = exporting.key_state(store)
    if state.key_check is None:
        exporting.save_key(store, max(1, state.key_epoch), keys.check())
        return KeyEpoch(max(1, state.key_epoch), False)
    if keys.matches(state.key_check):
        return KeyEpoch(state.key_epoch, False)
    if not keys.encrypts:
        return KeyEpoch(state.key_epoch, False)  # no key now: never a reason to write plaintext again
    exporting.save_key(store, state.key_epoch + 1, keys.check())
    return KeyEpoch(state.key_epoch + 1, True)


def adopt_legacy(store: Store, folder: Folder, device: DeviceState, keys: Keyring, out: Exported) -> None:
    """Segments written before ``sync_own``: their rows again as new segments, recorded;
    then the old files go (a crash before that: they go next time)."""
    state = exporting.key_state(store)
    if state.legacy_through > 0:
        own = exporting.own_segments(store)
        through = min(s.seq_lo for s in own) - 1 if own else device.exported_seq
        stamps = _oldest_stamp(folder, device.device, state.legacy_through)
        written: list[OwnSegment] = []
        n = max([state.legacy_through, device.next_segment - 1, *folder.numbers(device.device)]) + 1
        lo = 1
        while (batch := exporting.held(store, lo, through, SEGMENT_CHANGES)) is not None and batch.rows:
            seq_lo, seq_hi = batch.rows[0].seq, batch.rows[-1].seq
            written.append(
                _write(folder, device.device, n, batch, stamps + seq_lo - 1, state.key_epoch, keys, new=True)
            )
            n, lo = n + 1, seq_hi + 1
        exporting.save_rewrite(store, device.device, written, legacy_through=state.legacy_through)
        out.rewritten += len(written)
        state = exporting.key_state(store)
    if state.legacy_through < 0:
        mine = {s.number for s in exporting.own_segments(store)}
        gone = [k for k in range(1, -state.legacy_through + 1) if k not in mine]
        out.removed += sum(folder.remove(device.device, k) for k in gone)
        exporting.legacy_removed(store)


def rewrite_own(store: Store, folder: Folder, device: str, keys: Keyring, epoch: int, out: Exported) -> None:
    """Write again every own segment of an older key epoch, plaintext under a key, or
    holding content forgotten since (see the module docstring)."""
    mark = exporting.forget_count(store)
    forgot = mark > exporting.key_state(store).forget_mark
    again: list[OwnSegment] = []
    for s in exporting.own_segments(store):
        stale_key = s.key_epoch < epoch or (s.sealed == "plain" and keys.encrypts)
        if not stale_key and not forgot:
            continue
        batch = exporting.held(store, s.seq_lo, s.seq_hi)
        if batch is None or not batch.rows:
            continue
        _items, digest = held_now(batch, s.hlc_lo)
        if stale_key or digest != s.digest:
            again.append(_write(folder, device, s.number, batch, s.hlc_lo, epoch, keys, new=False))
    if again:
        exporting.save_rewrite(store, device, again)
        out.rewritten += len(again)
    if forgot:
        exporting.save_forget_mark(store, mark)


def _write(
    folder: Folder, device: str, n: int, batch: exporting.Outgoing, hlc_lo: int, epoch: int, keys: Keyring, *, new: bool
) -> OwnSegment:
    """Segment ``n`` holding ``batch``'s rows as they are now (journal rows are never
    removed, so the rows of a segment's range are the ones it was written from)."""
    items, digest = held_now(batch, hlc_lo)
    data = segment.encode(device, n, items, keys)
    if new:
        folder.put(device, n, data)
    else:
        folder.replace(device, n, data)
    lo, hi = batch.rows[0].seq, batch.rows[-1].seq
    return OwnSegment(
        n, lo, hi, hlc_lo, epoch, keys.sealed, digest, segment.file_sha256(data), segment_name(n), len(items), len(data)
    )


def _oldest_stamp(folder: Folder, device: str, through: int) -> int:
    """The first clock stamp of the oldest readable header among segments 1..``through``."""
    stamps = []
    for f in folder.segments(device):
        if f.number <= through and f.name == segment_name(f.number) and (data := folder.read(f)) is not None:
            try:
                stamps.append(segment.read_header(data).hlc_lo)
            except (Refused, Incomplete):
                continue
    return min(stamps, default=0)
