"""A device whose segments were written before migration 0014 (no record of the rows each
holds): its first pass writes those rows again as new segments, then removes the old
files; nothing is lost, forgotten content does not come along, and the other devices
end in the same state."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.devices import a_dev
from tests.helpers.sync import hashes, open_device, session, state, sync


def test_segments_from_before_0014_are_written_again_once(tmp_path: Path) -> None:
    root = tmp_path / "folder"
    root.mkdir()
    a, b = open_device(tmp_path / "a.db"), open_device(tmp_path / "b.db")
    for i in range(3):
        a.write(session(f"s{i}", f"Session {i}, first.", f"Session {i}, second."))
        sync(a, root)
    sync(b, root)
    # what migration 0014 finds in a store synced before it: no sync_own rows, segments
    # up to the last one it recorded, no key check yet
    a.conn.execute("DELETE FROM sync_own")
    a.conn.execute("UPDATE sync_device SET legacy_through = 3, key_check = NULL, key_epoch = 0")
    a.forget(session="s1")
    done = sync(a, root)
    assert done.exported.removed == 3 and done.exported.rewritten == 1
    names = [p.name for p in sorted((root / a_dev(a)).iterdir())]
    assert names == ["00000004.seg", "00000005.seg"]  # the old rows, then the tombstones made since
    assert not any(b"Session 1" in p.read_bytes() for p in root.rglob("*.seg"))
    sync(b, root)
    c = open_device(tmp_path / "c.db")
    sync(c, root)
    assert state(a) == state(b) == state(c) and len(hashes(c)) == 4
    again = sync(a, root)
    assert again.exported.rewritten == again.exported.removed == 0
