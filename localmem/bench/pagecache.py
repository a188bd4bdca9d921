"""Page-cache state of a store file for ``bench scale``: warm it, evict it, measure it.

A query reads a few thousand exact vectors by rowid from the store file, so its time
depends on whether those pages are in the OS page cache (a disk read per row when cold,
a memory copy when cached). The bench sets that state before each query process:

- :func:`warm` reads the file (and its ``-wal``) once, sequentially, in 1 MiB reads into
  one reused buffer: the pages end up cached, as in a long-running server on a machine
  with enough RAM, and this process's memory does not grow;
- :func:`evict` drops the file's clean pages from the cache (``posix_fadvise``
  ``DONTNEED``; no root needed), as after a reboot or on a machine whose RAM cannot hold
  the file;
- :func:`cached_pct` measures the share of the file's pages that are resident, with
  ``mincore(2)`` on a read-only shared mapping: it touches no page, so it does not
  change what it measures. ``None`` where the system has no ``mincore``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path

import numpy as np

MODES = ("warm", "cold", "as-is")
CHUNK = 1 << 20  # bytes per read when warming
WINDOW = 1 << 30  # bytes mapped at a time when measuring (keeps address space small)


def files(path: Path) -> list[Path]:
    """The store file and its write-ahead log, those that exist."""
    return [p for p in (path, Path(f"{path}-wal")) if p.exists()]


def can_evict() -> bool:
    """Whether this system can drop a file's pages from the cache (Linux and most Unixes)."""
    return hasattr(os, "posix_fadvise") and hasattr(os, "POSIX_FADV_DONTNEED")


def warm(path: Path) -> int:
    """Read the store file and its ``-wal`` once, sequentially; returns the bytes read."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    total = 0
    for p in files(path):
        with open(p, "rb", buffering=0) as f:
            while n := f.readinto(view):
                total += n
    return total


def evict(path: Path) -> None:
    """Drop the store file's and its ``-wal``'s pages from the page cache. Only clean pages
    go, so each file is flushed first (the bench's builder writes without fsync, and its
    last pages may not be on disk yet). No writer may have the file open."""
    if not can_evict():
        raise OSError("this system cannot evict a file from the page cache (no posix_fadvise)")
    for p in files(path):
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    if not all(hasattr(libc, f) for f in ("mmap", "munmap", "mincore")):
        return None
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.restype = ctypes.c_int
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.restype = ctypes.c_int
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    return libc


def resident_pages(path: Path) -> tuple[int, int] | None:
    """(resident pages, pages) of the file at ``path``, or ``None`` where ``mincore`` is
    not available or fails. Maps the file a window at a time, read-only and shared."""
    libc = _libc()
    if libc is None:
        return None
    page = mmap.PAGESIZE
    map_failed = ctypes.c_void_p(-1).value
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        resident = 0
        for off in range(0, size, WINDOW):
            length = min(WINDOW, size - off)
            addr = libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, off)
            if addr is None or addr == map_failed:
                return None
            try:
                vec = np.zeros((length + page - 1) // page, dtype=np.uint8)  # one byte per page
                if libc.mincore(addr, length, vec.ctypes.data_as(ctypes.POINTER(ctypes.c_ubyte))) != 0:
                    return None
                resident += int(np.count_nonzero(vec & 1))
            finally:
                libc.munmap(addr, length)
        return resident, (size + page - 1) // page
    finally:
        os.close(fd)


def cached_pct(path: Path) -> float | None:
    """Share (%) of the file's pages in the page cache now; ``None`` if it cannot be told."""
    try:
        counted = resident_pages(path)
    except OSError:
        return None
    if counted is None or counted[1] == 0:
        return None
    return round(100 * counted[0] / counted[1], 1)


def prepare(path: Path, mode: str) -> None:
    """Put the store file in the cache state ``mode`` (one of :data:`MODES`)."""
    if mode == "warm":
        warm(path)
    elif mode == "cold":
        evict(path)
    elif mode != "as-is":
        raise ValueError(f"unknown cache mode {mode!r}; expected one of {', '.join(MODES)}")
