"""The copy ``localmem encrypt`` / ``decrypt`` builds beside a store (``.NAME.convert-partial``)
and what a killed conversion leaves of it.

A conversion holds an exclusive ``flock`` on the copy from the moment it makes it (mode 600:
mid-decrypt it is a plaintext copy of the whole store) until it is renamed over the store or
removed. Every connection ``db.connect`` opens first removes a copy nobody holds: a conversion
killed with -9 leaves nothing behind that an ordinary command does not clear.

Invariants: a copy whose lock is held is never touched (its conversion is alive); a copy
is made with ``O_EXCL`` and checked to still be the file locked, so two conversions never
share one.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from localmem.errors import LocalmemError


def partial_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.convert-partial")


def _sidecars(p: Path) -> list[Path]:
    return [p, Path(f"{p}-journal"), Path(f"{p}-wal"), Path(f"{p}-shm")]


def clear_stale(path: str | Path) -> bool:
    """Remove the copy beside ``path`` (and its journal) if no live conversion holds it;
    True when one was removed."""
    p = partial_path(Path(path))
    try:
        fd = os.open(p, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a conversion is running on it
        if os.fstat(fd).st_ino != _inode(p):
            return False  # replaced meanwhile by a new conversion's copy
        for side in _sidecars(p):
            side.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def claim(path: Path) -> int:
    """Make the copy for a conversion of ``path`` (mode 600, empty) and lock it; the
    descriptor holds the lock until ``release``. A stale copy is removed first."""
    clear_stale(path)
    p = partial_path(path)
    try:
        fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise LocalmemError(f"{path}: another encrypt or decrypt is running on it ({p} is in use)") from None
    fcntl.flock(fd, fcntl.LOCK_EX)
    if os.fstat(fd).st_ino != _inode(p):
        os.close(fd)
        raise LocalmemError(f"{path}: another encrypt or decrypt is running on it ({p} changed)")
    return fd


def release(path: Path, fd: int, *, remove: bool) -> None:
    """Unlock (and with ``remove``, delete) the copy of a conversion of ``path``."""
    try:
        if remove:
            for side in _sidecars(partial_path(path)):
                side.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _inode(p: Path) -> int:
    try:
        return os.stat(p).st_ino
    except FileNotFoundError:
        return -1
