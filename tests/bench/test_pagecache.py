"""``bench scale``'s page-cache helpers on real files: warm, evict, and the resident share
``mincore`` reports."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from localmem.bench import pagecache
from tests.helpers.files import fs_type

MB = 1 << 20


def _file(tmp_path: Path, size: int) -> Path:
    path = tmp_path / "store.db"
    with open(path, "wb") as f:
        f.write(os.urandom(size))
    return path


def _need_eviction(path: Path) -> None:
    if not pagecache.can_evict() or not Path("/proc/mounts").exists():
        pytest.skip("no posix_fadvise / /proc/mounts on this system")
    if fs_type(path) in ("tmpfs", "ramfs"):
        pytest.skip(f"{path.parent} is on {fs_type(path)}: its pages live only in memory and cannot be evicted")


def test_warm_then_cold_then_a_partial_read(tmp_path: Path) -> None:
    path = _file(tmp_path, 16 * MB + 1234)  # a last page only partly used
    wal = Path(f"{path}-wal")
    wal.write_bytes(os.urandom(2 * MB))
    assert pagecache.warm(path) == 18 * MB + 1234  # the -wal is read too
    assert pagecache.cached_pct(path) == 100.0
    _need_eviction(path)

    pagecache.evict(path)
    assert pagecache.cached_pct(path) == 0.0
    assert pagecache.cached_pct(path) == 0.0  # measuring loaded nothing
    counted = pagecache.resident_pages(wal)
    assert counted is not None and counted[0] == 0  # the -wal was evicted as well

    with open(path, "rb") as f:  # a quarter of the file, plus whatever the kernel reads ahead
        f.read(4 * MB)
    pct = pagecache.cached_pct(path)
    assert pct is not None and 24 <= pct < 60, pct

    pagecache.prepare(path, "warm")
    assert pagecache.cached_pct(path) == 100.0
    pagecache.prepare(path, "as-is")
    assert pagecache.cached_pct(path) == 100.0
    pagecache.prepare(path, "cold")
    assert pagecache.cached_pct(path) == 0.0


def test_dirty_pages_are_flushed_before_eviction(tmp_path: Path) -> None:
    # the synthetic builder writes without fsync; its last pages may still be dirty
    path = tmp_path / "dirty.db"
    with open(path, "wb") as f:
        f.write(os.urandom(4 * MB))
    _need_eviction(path)
    pagecache.evict(path)
    assert pagecache.cached_pct(path) == 0.0


def test_counting_and_modes(tmp_path: Path) -> None:
    path = _file(tmp_path, 3 * MB)
    counted = pagecache.resident_pages(path)
    assert counted is not None and counted[1] == 3 * MB // os.sysconf("SC_PAGE_SIZE")
    empty = tmp_path / "empty.db"
    empty.touch()
    assert pagecache.cached_pct(empty) is None  # no page to measure
    with pytest.raises(ValueError, match="unknown cache mode 'hot'"):
        pagecache.prepare(path, "hot")
