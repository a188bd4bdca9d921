"""The merge rules on real stores and real segment files: content identity, idempotence,
any delivery order converging, forget wins (and stays won), derived layers of two models,
a derived change that arrives before its turn."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

from localmem.storage.write.store import Store
from tests.helpers.devices import a_dev
from tests.helpers.sync import add_cue, hashes, open_device, session, state, sync


def _devices(tmp_path: Path, n: int) -> tuple[Path, list[Store]]:
    root = tmp_path / "folder"
    root.mkdir()
    return root, [open_device(tmp_path / f"dev{i}.db") for i in range(n)]


def test_turns_reach_the_other_device_with_the_same_hashes(tmp_path: Path) -> None:
    root, (a, b) = _devices(tmp_path, 2)
    a.write(session("trip", "We booked the train to Lyon.", "Ana loves the old town.", day=3))
    a.write([], session="empty")  # writes nothing
    b.write(session("garden", "Tomatoes need sun.", day=4, source="mcp"))
    sync(a, root)
    done = sync(b, root)
    assert done.folded.applied.turns == 2
    sync(a, root)
    assert sorted(hashes(a)) == sorted(hashes(b)) and len(hashes(a)) == 3
    assert state(a) == state(b)
    # folded turns are not exported again: B's folder holds B's one turn only
    assert sync(b, root).exported.changes == 0
    row = b.conn.one(
        "SELECT s.source, s.key, t.ts FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.text LIKE 'We booked%'"
    )
    assert tuple(row) == ("api", "trip", "2024-03-03T10:00:00")


def test_folding_twice_and_a_copy_change_nothing(tmp_path: Path) -> None:
    root, (a, b) = _devices(tmp_path, 2)
    a.write(session("s", "One.", "Two.", "Three."))
    add_cue(a, hashes(a)[0], "One", "model-x")
    sync(a, root)
    sync(b, root)
    before = state(b)
    seg = next((root / a_dev(a)).iterdir())
    shutil.copy(seg, seg.with_name(seg.stem + ".sync-conflict-20240101-120000-ABCDEFG.seg"))
    b.conn.execute("DELETE FROM sync_folded")  # as if B had never recorded folding it
    again = sync(b, root)
    assert again.folded.segments == 1 and again.folded.applied.turns == 0  # the copy: same bytes, skipped
    assert state(b) == before


def test_any_delivery_order_converges(tmp_path: Path) -> None:
    """Three devices' segments (writes, a cue, forgets, a cue about another device's turn)
    delivered to fresh stores in every order end in one state."""
    root, (a, b, c) = _devices(tmp_path, 3)
    a.write(session("s1", "Ana moved to Porto.", "Ben visited in May.", "They ate sardines."))
    sync(a, root)
    sync(b, root)
    b.write(session("s2", "Ben bought a bike.", day=5))
    add_cue(b, hashes(a)[0], "Porto", "model-b")  # B enriches A's turn
    b.forget(turn_ids=[int(b.conn.one("SELECT id FROM turns WHERE text = 'They ate sardines.'")[0])])
    sync(b, root)
    c.write(session("s3", "Carla plays chess.", day=6))
    add_cue(c, hashes(c)[0], "chess", "model-c")
    sync(c, root)
    devices = sorted(p for p in root.iterdir())
    results = []
    for order in itertools.permutations(devices):
        fresh_root = tmp_path / f"order{len(results)}"
        fresh_root.mkdir()
        fresh = open_device(tmp_path / f"fresh{len(results)}.db")
        for d in order:  # one device's folder arrives, then a pass, then the next
            shutil.copytree(d, fresh_root / d.name)
            sync(fresh, fresh_root)
        results.append(state(fresh))
        fresh.close()
    assert all(r == results[0] for r in results)
    got = results[0]
    assert len(got["turns"]) == 4 and len(got["forgotten"]) == 1
    assert {cue[2] for cue in got["cues"]} == {"Porto", "chess"}


def test_forget_wins_and_an_old_export_does_not_bring_it_back(tmp_path: Path) -> None:
    root, (a, b) = _devices(tmp_path, 2)
    trip = session("trip", "The secret is 1234.", "Nothing else.")
    a.write(trip)
    add_cue(a, hashes(a)[0], "secret", "model-x")
    sync(a, root)
    sync(b, root)
    secret = int(b.conn.one("SELECT id FROM turns WHERE text LIKE 'The secret%'")[0])
    assert b.forget(turn_ids=[secret]) == 1
    sync(b, root)
    sync(a, root)
    texts = [str(r[0]) for r in a.conn.execute("SELECT text FROM turns")]
    assert texts == ["Nothing else."]
    assert not list(a.conn.execute("SELECT 1 FROM cues WHERE text = 'secret'"))
    res = a.write(trip)  # the old export ingested again, on either device
    b.write(trip)
    assert res.new_turns == 0
    sync(a, root)
    sync(b, root)
    assert state(a) == state(b) and len(state(a)["turns"]) == 1


def test_a_late_write_of_a_forgotten_turn_stays_forgotten(tmp_path: Path) -> None:
    """B forgets a turn it folded; A's segment with the same turn (re-exported after a
    crash) arrives at a third device after B's tombstone: it stays forgotten."""
    root, (a, b, c) = _devices(tmp_path, 3)
    a.write(session("s", "Keep me.", "Forget me."))
    sync(a, root)
    sync(b, root)
    b.forget(turn_ids=[int(b.conn.one("SELECT id FROM turns WHERE text = 'Forget me.'")[0])])
    sync(b, root)
    late = tmp_path / "late"
    late.mkdir()
    shutil.copytree(root / a_dev(b), late / a_dev(b))  # the tombstone first
    sync(c, late)
    shutil.copytree(root / a_dev(a), late / a_dev(a))  # then the turn
    sync(c, late)
    assert [str(r[0]) for r in c.conn.execute("SELECT text FROM turns")] == ["Keep me."]


def test_two_models_for_one_turn_keep_both(tmp_path: Path) -> None:
    root, (a, b) = _devices(tmp_path, 2)
    a.write(session("s", "Ana met Ben in Lisbon."))
    sync(a, root)
    sync(b, root)
    h = hashes(a)[0]
    add_cue(a, h, "Lisbon", "model-a", ("place",))
    add_cue(b, h, "Lisbon", "model-b", ("city",))
    add_cue(b, h, "Ben", "model-b")
    sync(a, root)
    sync(b, root)
    sync(a, root)
    sa, sb = state(a), state(b)
    assert sa["cues"] == sb["cues"]
    # one (turn, kind, text) cue per turn: the first one stored keeps its model, the other
    # model's tags join it; a cue only one model found is there with that model
    assert ("Ben" in {c[2] for c in sa["cues"]}) and len(sa["cues"]) == 2
    assert (
        {t[2] for t in sa["tags"] if t[1] == "Lisbon"}
        == {"place", "city"}
        == {t[2] for t in sb["tags"] if t[1] == "Lisbon"}
    )


def test_a_derived_change_before_its_turn_waits_then_applies(tmp_path: Path) -> None:
    root, (a, b, c) = _devices(tmp_path, 3)
    a.write(session("s", "Ana adopted a cat named Miso."))
    sync(a, root)
    sync(b, root)
    add_cue(b, hashes(b)[0], "Miso", "model-b")
    sync(b, root)
    only_b = tmp_path / "only_b"
    only_b.mkdir()
    shutil.copytree(root / a_dev(b), only_b / a_dev(b))
    first = sync(c, only_b)
    assert first.folded.applied.pending == 1 and not hashes(c)
    shutil.copytree(root / a_dev(a), only_b / a_dev(a))
    sync(c, only_b)
    assert [cue[2] for cue in state(c)["cues"]] == ["Miso"]
    assert int(c.conn.one("SELECT count(*) FROM sync_pending")[0]) == 0
