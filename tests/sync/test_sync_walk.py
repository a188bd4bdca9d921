"""Sync commits the way enrichment does: a pass, watched by ``sys.setprofile``
(``localmem.bench.sync_walk``), opens no write transaction in ``localmem.sync`` and
storage never calls back up into it; each folded segment is one transaction."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from localmem.bench.sync_walk import Walk
from tests.helpers.sync import add_cue, hashes, open_device, session, sync

ROOT = Path(__file__).resolve().parents[2]


def test_no_transaction_is_written_in_the_sync_package() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in sorted((ROOT / "localmem" / "sync").glob("*.py"))
        for n, line in enumerate(p.read_text("utf-8").splitlines(), 1)
        if re.search(r"\btransaction\(|\bBEGIN\b", line)
    ]
    assert not found


def test_a_pass_opens_no_transaction_in_sync_and_storage_never_calls_back_up(tmp_path: Path) -> None:
    root = tmp_path / "folder"
    root.mkdir()
    a, b = open_device(tmp_path / "a.db"), open_device(tmp_path / "b.db")
    a.write(session("s1", "Ana moved to Porto.", "Ben visited in May."))
    a.write(session("s2", "Carla plays chess.", day=2))
    add_cue(a, hashes(a)[0], "Porto", "model-a")
    sync(a, root)
    sync(b, root)
    a.forget(session="s2")
    a.write(session("s3", "They ate sardines.", day=3))
    add_cue(a, hashes(a)[-1], "sardines", "model-a")
    sync(a, root)
    b.write(session("b1", "Ben bought a bike.", day=4))
    walk = Walk()
    sys.setprofile(walk)
    try:
        done = sync(b, root)
    finally:
        sys.setprofile(None)
    report = walk.report()
    # A's new segment, and A's first one written again without the session it forgot
    assert done.folded.segments == 2 and done.folded.applied.forgotten == 1 and done.exported.segments == 1
    assert done.folded.applied.turns == 1 and done.folded.applied.derived == 2
    assert report["steps_back_up_into_sync"] == 0, report["steps_back_up_edges"]
    opened = report["transactions_opened_by"]
    assert not [m for m in opened if m.startswith("localmem.sync")], opened
    assert opened.get("localmem.storage.sync.folding") == 2  # one transaction per segment folded
    assert set(hashes(a)) <= set(hashes(b))
