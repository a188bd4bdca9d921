"""The sync folder as files: the one piece of localmem that lists, reads and writes
``DIR/<device-id>/`` (as Litestream's replica client is the one that moves its files).
It knows segment *names*, never what a segment holds (that is ``segment``).

Names: ``NNNNNNNN.seg`` (eight digits, the device's segment counter). A sync tool's copies
keep the number first: Syncthing's ``00000003.sync-conflict-20240101-120000-ABCDEFG.seg``,
Dropbox's ``00000003 (Alice's conflicted copy 2024-01-01).seg``; they are listed like the
original (folding is idempotent, so a copy with the same changes adds nothing). Our own
temporary files are ``.NNNNNNNN.seg.tmp-PID``.

Invariants:
- a file is written under a temporary name, fsynced, renamed into place and the folder
  fsynced, so a reader never sees a name over a half-written file this device made;
- ``put`` never writes over an existing name; only ``replace`` does, which a device uses
  on its own segments when what they must hold changed (a key change, a forget);
- a device writes only into its own folder; the files it removes there are its own
  temporary files (a kill mid-write) and segments it wrote again under new numbers,
  never another device's, never a sync tool's copy;
- what this device makes is private: a device folder made here is 700, a segment 600,
  whatever the umask (``util.private``); the sync root is the user's, left as it is.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from localmem.sync.errors import SyncError
from localmem.util import private

SEGMENT_NAME = re.compile(r"^(\d{8})(\.seg|[ .].*\.seg)$")
_TMP = re.compile(r"^\.(\d{8})\.seg\.tmp-\d+$")


class FolderMissing(SyncError):
    """The sync folder does not exist (a sync tool may not have made it yet)."""


class SegmentExists(SyncError):
    """``put`` found the name taken (another process of this device wrote it first)."""


def segment_name(n: int) -> str:
    return f"{n:08d}.seg"


def segment_number(name: str) -> int | None:
    m = SEGMENT_NAME.match(name)
    return int(m.group(1)) if m else None


def is_own_temp(name: str) -> bool:
    return _TMP.match(name) is not None


@dataclass(frozen=True)
class SegmentFile:
    """A segment file (or a sync tool's copy of one) in a device's folder."""

    device: str
    number: int
    name: str
    path: Path


def put(folder: Path, n: int, data: bytes, *, replace: bool = False) -> Path:
    """Write ``data`` as segment ``n`` into ``folder`` atomically (temp name, fsync,
    rename, fsync the folder); refuses to replace an existing segment unless ``replace``
    (this device rewriting its own, after a key change or a forget)."""
    private.make_private_dir(folder)  # a device folder made here is 700; the sync root is the user's
    final = folder / segment_name(n)
    if final.exists() and not replace:
        raise SegmentExists(f"{final} exists already; segments are never rewritten")
    tmp = folder / f".{n:08d}.seg.tmp-{os.getpid()}"
    fd = private.create(tmp)  # 600 whatever the umask (a leftover tmp of another mode included)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, final)
    dfd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return final


class Folder:
    """The sync folder ``root``: one subfolder per device."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def require(self) -> None:
        if not self.root.is_dir():
            raise FolderMissing(
                f"{self.root}: the sync folder does not exist (make it, or point to the folder your sync tool carries)"
            )

    def devices(self) -> list[str]:
        """Every device's folder name, sorted (hidden entries skipped)."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def segments(self, device: str) -> list[SegmentFile]:
        """The segment files of ``device``, by number then name."""
        folder = self.root / device
        if not folder.is_dir():
            return []
        found = []
        for p in folder.iterdir():
            n = segment_number(p.name)
            if n is not None and p.is_file():
                found.append(SegmentFile(device, n, p.name, p))
        return sorted(found, key=lambda f: (f.number, f.name))

    def numbers(self, device: str) -> list[int]:
        return sorted({f.number for f in self.segments(device)})

    def read(self, f: SegmentFile) -> bytes | None:
        """The file's bytes, or None when the sync tool renamed or removed it meanwhile."""
        try:
            return f.path.read_bytes()
        except FileNotFoundError:
            return None

    def put(self, device: str, n: int, data: bytes) -> Path:
        return put(self.root / device, n, data)

    def replace(self, device: str, n: int, data: bytes) -> Path:
        """Rewrite this device's segment ``n`` atomically: a reader sees the old bytes or
        the new, never a mix."""
        return put(self.root / device, n, data, replace=True)

    def remove(self, device: str, n: int) -> bool:
        """Remove this device's segment ``n`` (its own name only: a sync tool's copies
        stay); True if it was there."""
        path = self.root / device / segment_name(n)
        existed = path.exists()
        path.unlink(missing_ok=True)
        return existed

    def remove_temps(self, device: str) -> int:
        """Remove our temporary files left by a kill mid-write (never a segment; only this
        device writes its folder); returns how many."""
        folder = self.root / device
        if not folder.is_dir():
            return 0
        gone = 0
        for p in folder.iterdir():
            if is_own_temp(p.name):
                p.unlink(missing_ok=True)
                gone += 1
        return gone
