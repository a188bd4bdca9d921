"""The vector mirrors saved inside the store (``storage/vectors/snapshots``, migration 0017).

A fresh connection that starts from a stored snapshot must hold, array for array, what a
full load of the same commit gives: after writes, after forgets and updates (the counter
moved: the snapshot is gone and ignored), after a rollback, with no snapshot, with a
damaged one. Real stores, real processes where it is about processes: a writer that
writes and forgets while fresh readers load snapshots and save new ones, a forget seen by
a fresh process, a snapshot that lives in an encrypted store's file only encrypted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from localmem.config import Settings
from localmem.records import SessionIn, TurnIn
from localmem.storage.engine import db, keys
from localmem.storage.vectors import mirrors as mirrors_mod
from localmem.storage.vectors import snapshots
from localmem.storage.vectors.mirrors import MirrorView
from localmem.storage.vectors.table_mirror import CueMirror, TurnMirror, VectorMirror
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder
from tests.helpers.notes import sessions as _sessions

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _save_often(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every connection that loads a row beyond the stored snapshot saves a new one."""
    monkeypatch.setattr(mirrors_mod, "SNAPSHOT_ROWS", 0)
    monkeypatch.setattr(mirrors_mod, "SNAPSHOT_SHARE", 10**9)


def _open(path: Path) -> Store:
    return Store(path, embedder=HashEmbedder(), settings=Settings(db=path))


def _full(store: Store) -> MirrorView:
    """Both mirrors loaded row by row, in the caller's snapshot."""
    dim = store.embedder.dim
    return MirrorView(TurnMirror(dim).synced(store.conn), CueMirror(dim).synced(store.conn))


def _same_mirror(a: VectorMirror, b: VectorMirror) -> None:
    assert type(a) is type(b)
    for name in ("ids", "turns", *a.saved):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name
    assert (a.held is None) == (b.held is None)
    if a.held is not None and b.held is not None:
        assert np.array_equal(a.held, b.held)
    if isinstance(a, TurnMirror) and isinstance(b, TurnMirror):
        assert a.names == b.names and np.array_equal(a._name_words, b._name_words)
        assert a.turns is a.ids
        pos = np.arange(len(a.ids))
        assert np.array_equal(a.neighbour(pos, 1), b.neighbour(pos, 1))


def _check_fresh(path: Path) -> dict[str, int]:
    """A fresh connection's mirrors equal a full load of the same commit; what it restored."""
    store = _open(path)
    try:
        with store.snapshot():
            view, full = store.mirrors(), _full(store)
            _same_mirror(view.turn, full.turn)
            _same_mirror(view.cue, full.cue)
            assert np.array_equal(view.cue_pos, full.cue_pos)
        return dict(store._mirrors.restored)
    finally:
        store.close()


def _raw_turn(store: Store, tid: int, speaker: str) -> None:
    vec = store.embedder.embed([f"raw turn {tid}"])[0].tobytes()
    with db.transaction(store.conn):
        sid = store.conn.one("INSERT INTO sessions(source, key) VALUES ('x', ?) RETURNING id", (f"raw{tid}",))[0]
        store.conn.execute(
            "INSERT INTO turns(id, session_id, ord, text, hash, words, speaker) VALUES (?, ?, 0, 'raw', ?, 1, ?)",
            (tid, sid, f"h{tid}", speaker),
        )
        store.conn.execute("INSERT INTO turn_vec(turn_id, embedding) VALUES (?, ?)", (tid, vec))


def _stored(store: Store) -> dict[str, tuple[int, int]]:
    """The stored snapshots: table -> (counter, newest id)."""
    return {
        str(m): (int(e), int(n)) for m, e, n in store.conn.execute("SELECT mirror, epoch, newest FROM mirror_snapshots")
    }


def _epochs(store: Store) -> tuple[int, int]:
    t, c = store.conn.one("SELECT turns, cues FROM mirror_epochs")
    return int(t), int(c)


def test_a_fresh_connection_takes_the_snapshot_and_the_rows_after_it(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = _open(path)
    store.write_sessions(_sessions(0, 40))
    assert _stored(store) == {}  # a writer saves none: its reads are inside its write transactions
    assert _check_fresh(path) == {"turns": 0, "cues": 0}  # no snapshot: loaded row by row, then saved
    turns, cues = _epochs(store)
    newest_turn = int(store.conn.one("SELECT max(turn_id) FROM turn_codes")[0])
    assert _stored(store) == {"turns": (turns, newest_turn), "cues": (cues, _stored(store)["cues"][1])}
    # new speakers and an id past int32 reach the mirrors after the snapshot
    store.write_sessions(_sessions(40, 10, speakers=("Cleo Marie", "Ana")))
    _raw_turn(store, 2**31 + 5, "Dov")  # the full load widens its ids to int64; so must the rows after a snapshot
    store.write_sessions([SessionIn(key="far", turns=(TurnIn(text="tomato harbor", speaker="Eve"),))])
    restored = _check_fresh(path)
    assert 0 < restored["turns"] < int(store.conn.one("SELECT count(*) FROM turns")[0])
    assert restored["cues"] > 0
    store.close()


def test_a_big_table_is_saved_again_only_after_a_tenth_more_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mirrors_mod, "SNAPSHOT_SHARE", 10)
    path = tmp_path / "m.db"
    store = _open(path)
    store.write_sessions(_sessions(0, 60))
    _check_fresh(path)
    first = _stored(store)["turns"]
    rows = int(store.conn.one("SELECT count(*) FROM turn_codes")[0])
    store.write_sessions(_sessions(60, 1))  # 1-3 turns: fewer than a tenth of the table
    assert _check_fresh(path)["turns"] == rows and _stored(store)["turns"] == first
    store.write_sessions(_sessions(61, 12))  # now more than a tenth
    _check_fresh(path)
    assert _stored(store)["turns"][1] > first[1]
    store.close()


def test_a_forget_deletes_the_snapshot_in_its_own_transaction(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = _open(path)
    store.write_sessions(_sessions(0, 30))
    _check_fresh(path)
    assert set(_stored(store)) == {"turns", "cues"}
    gone = [
        int(r[0])
        for r in store.conn.execute(
            "SELECT t.id FROM turns t JOIN sessions s ON s.id = t.session_id WHERE s.key = 's29'"
        )
    ]
    store.forget(session="s29")  # the newest: its ids are given out again below
    assert _stored(store) == {}  # gone with the rows, before anyone reads
    assert _check_fresh(path) == {"turns": 0, "cues": 0}
    store.write_sessions(_sessions(100, 3))
    assert _check_fresh(path)["turns"] > 0
    reused = set(gone) & {int(r[0]) for r in store.conn.execute("SELECT id FROM turns")}
    assert reused  # the freed ids now name other turns, and the mirrors carry those
    store.close()


def test_an_update_of_a_mirrored_column_expires_the_turn_snapshot_only(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = _open(path)
    store.write_sessions(_sessions(0, 20))
    _check_fresh(path)
    cues_before = _stored(store)["cues"]
    with db.transaction(store.conn):
        store.conn.execute("UPDATE turns SET speaker = 'Zed' WHERE id = 3")
    assert _stored(store) == {"cues": cues_before}
    assert _check_fresh(path) == {"turns": 0, "cues": len(store.mirror("cue").ids)}
    store.close()


def test_a_rolled_back_forget_keeps_the_snapshot_and_rolled_back_rows_are_never_saved(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    a, b = _open(path), _open(path)
    a.write_sessions(_sessions(0, 20))
    _check_fresh(path)
    before = _stored(a)
    with pytest.raises(RuntimeError), db.transaction(a.conn):
        a.conn.execute("DELETE FROM turns WHERE id = 2")
        assert _stored(a) == {}  # inside: the trigger took it
        raise RuntimeError("abort")
    assert _stored(a) == before
    # rows loaded inside a caller's write transaction that then rolls back
    vec = a.embedder.embed(["a turn that never was"])[0].tobytes()
    with pytest.raises(RuntimeError), db.transaction(a.conn):
        sid = a.conn.one("INSERT INTO sessions(source, key) VALUES ('x', 'ghost') RETURNING id")[0]
        tid = int(
            a.conn.one(
                "INSERT INTO turns(session_id, ord, text, hash, words, speaker) VALUES (?, 0, 'ghost', 'h', 1, 'Ghost') "
                "RETURNING id",
                (sid,),
            )[0]
        )
        a.conn.execute("INSERT INTO turn_vec(turn_id, embedding) VALUES (?, ?)", (tid, vec))
        assert tid in a.turn_mirror().ids  # seen (and loaded) inside the transaction
        raise RuntimeError("abort")
    a.turn_mirror()  # an own snapshot after the rollback: reloads and may save
    assert "Ghost" not in a.turn_mirror().names
    assert _stored(a)["turns"][1] < tid
    b.write_sessions(_sessions(50, 1))  # takes the rolled-back id
    assert _check_fresh(path)["turns"] > 0
    a.close()
    b.close()


def test_a_store_from_before_the_snapshots_migrates_and_reads_as_before(tmp_path: Path) -> None:
    """A store of schema 16 (no snapshot table): opening it migrates to 17 with no
    snapshot, the first read loads row by row and saves one, the next takes it."""
    path = tmp_path / "m.db"
    store = _open(path)
    store.write_sessions(_sessions(0, 30))
    with db.transaction(store.conn):  # back to what version 16 made
        store.conn.execute("DROP TRIGGER mirror_snapshots_expire")
        store.conn.execute("DROP TABLE mirror_snapshots")
        store.conn.execute("PRAGMA user_version = 16")
    store.close()
    assert _check_fresh(path) == {"turns": 0, "cues": 0}
    again = _open(path)
    assert db.user_version(again.conn) == len(db.migrations()) and set(_stored(again)) == {"turns", "cues"}
    again.close()
    assert _check_fresh(path)["turns"] > 0


def test_a_save_after_a_forget_by_another_connection_writes_nothing(tmp_path: Path) -> None:
    """The mirrors were loaded before another connection's forget: their state is no
    longer the table's, and the save must see it in its own transaction."""
    path = tmp_path / "m.db"
    a, b = _open(path), _open(path)
    a.write_sessions(_sessions(0, 20))
    turns, cues = _epochs(a)
    view = a.mirrors()
    b.forget(session="s19")
    b.write_sessions(_sessions(60, 1))  # the freed ids, given out again
    assert snapshots.save(a.conn, [(view.turn, turns), (view.cue, cues)]) == []
    assert _stored(a) == {}
    assert snapshots.save(b.conn, [(_full(b).turn, _epochs(b)[0])]) == ["turns"]
    a.close()
    b.close()


def test_a_snapshot_that_does_not_match_is_ignored(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "m.db"
    store = _open(path)
    store.write_sessions(_sessions(0, 20))
    _check_fresh(path)
    conn = store.conn
    with db.transaction(conn):  # written at another counter (no trigger moves it here)
        conn.execute("UPDATE mirror_snapshots SET epoch = epoch - 1 WHERE mirror = 'turns'")
    assert _check_fresh(path)["turns"] == 0
    for change in (
        "UPDATE mirror_snapshots SET header = json_set(header, '$.dim', 32) WHERE mirror = 'cues'",
        "UPDATE mirror_snapshots SET header = json_set(header, '$.rows', json_extract(header, '$.rows') + 1) "
        "WHERE mirror = 'cues'",
        "UPDATE mirror_snapshots SET newest = newest + 1 WHERE mirror = 'cues'",
        "UPDATE mirror_snapshots SET data = substr(data, 1, 100) WHERE mirror = 'cues'",
        "UPDATE mirror_snapshots SET header = 'not json' WHERE mirror = 'cues'",
    ):
        _check_fresh(path)  # saves a good one again
        with db.transaction(conn):
            conn.execute(change)
        assert _check_fresh(path)["cues"] == 0, change
    assert "ignoring the cues mirror snapshot" in caplog.text
    store.close()


def test_a_busy_or_read_only_store_reads_without_saving(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = _open(path)
    store.write_sessions(_sessions(0, 20))
    other = db.connect(path)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        _check_fresh(path)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert _stored(store) == {}
    store.close()
    ro = Store(f"file:{path}?mode=ro", embedder=HashEmbedder())
    assert len(ro.turn_mirror().ids) > 0
    ro.close()
    assert _stored(_open(path)) == {}


# -- real processes ------------------------------------------------------------------------

_WRITER = """
import json, sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from localmem.config import Settings
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder
from tests.helpers.notes import sessions as _sessions
path = Path({path!r})
store = Store(path, embedder=HashEmbedder(), settings=Settings(db=path))
until, k, forgets = time.monotonic() + {seconds}, 1000, 0
while time.monotonic() < until:
    store.write_sessions(_sessions(k, 2))
    k += 2
    if k % 6 == 0:  # the newest session: its ids are given out again at once
        newest = store.conn.one("SELECT key FROM sessions ORDER BY id DESC LIMIT 1")[0]
        forgets += store.forget(session=str(newest)) > 0
print(json.dumps({{"forgets": forgets, "written": k - 1000}}))
"""


def test_fresh_readers_match_a_full_load_while_another_process_writes_and_forgets(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = _open(path)
    store.write_sessions(_sessions(0, 60))
    store.close()
    code = _WRITER.format(root=str(ROOT), path=str(path), seconds=4)
    writer = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    reads = from_snapshot = 0
    try:
        while writer.poll() is None:
            restored = _check_fresh(path)  # loads, compares in one snapshot, saves after it
            reads += 1
            from_snapshot += restored["turns"] > 0 or restored["cues"] > 0
            time.sleep(0.01)
    finally:
        out, _ = writer.communicate(timeout=60)
    assert writer.returncode == 0
    done = json.loads(out.strip().splitlines()[-1])
    assert done["forgets"] > 0 and done["written"] > 0
    assert reads >= 3 and from_snapshot >= 1, (reads, from_snapshot)


_READER = """
import json, sys
sys.path.insert(0, {root!r})
from pathlib import Path
from localmem.config import Settings
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder
path = Path({path!r})
store = Store(path, embedder=HashEmbedder(), settings=Settings(db=path))
view = store.mirrors()
print(json.dumps({{"turns": view.turn.ids.tolist(), "cues": view.cue.ids.tolist(),
                  "restored": store._mirrors.restored}}))
"""


def _read_in_process(path: Path) -> dict[str, list[int]]:
    code = _READER.format(root=str(ROOT), path=str(path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, list[int]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_a_fresh_process_after_a_forget_never_sees_the_forgotten_rows(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    store = _open(path)
    store.write_sessions(_sessions(0, 30))
    first = _read_in_process(path)  # saves the snapshot (the process's SNAPSHOT_ROWS is 10,000: force it)
    assert first["restored"] == {"turns": 0, "cues": 0}
    mirrors_mod.Mirrors(store.conn, lambda: store.embedder.dim).view()  # this process saves (SNAPSHOT_ROWS 0)
    assert set(_stored(store)) == {"turns", "cues"}
    assert _read_in_process(path)["restored"]["turns"] == len(first["turns"])
    gone = {
        int(r[0])
        for r in store.conn.execute(
            "SELECT id FROM turns WHERE session_id IN (SELECT id FROM sessions WHERE key IN ('s3', 's17'))"
        )
    }
    gone_cues = {
        int(r[0])
        for r in store.conn.execute(
            "SELECT id FROM cues WHERE turn_id IN (SELECT value FROM json_each(?))", (json.dumps(sorted(gone)),)
        )
    }
    assert store.forget(session="s3") and store.forget(session="s17")
    after = _read_in_process(path)
    assert after["restored"] == {"turns": 0, "cues": 0}
    assert gone and not gone & set(after["turns"]) and gone_cues and not gone_cues & set(after["cues"])
    assert set(after["turns"]) == set(first["turns"]) - gone
    store.close()


@pytest.mark.skipif(not keys.encryption_available(), reason="needs apsw-sqlite3mc")
def test_an_encrypted_stores_snapshot_is_in_its_file_encrypted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshot is a row of the store: the folder holds no other file, and its bytes
    (a run of the codes) are in no file of an encrypted store, as they are in a plaintext
    one's (the control: the search can fail)."""
    found = {}
    for name, key in (("plain", None), ("secret", "correct horse battery staple")):
        folder = tmp_path / name
        folder.mkdir()
        if key:
            monkeypatch.setenv(keys.KEY_ENV, key)
        path = folder / "m.db"
        store = _open(path)
        store.write_sessions(_sessions(0, 40))
        _check_fresh(path)
        data = bytes(store.conn.one("SELECT data FROM mirror_snapshots WHERE mirror = 'cues'")[0])
        header = json.loads(store.conn.one("SELECT header FROM mirror_snapshots WHERE mirror = 'cues'")[0])
        codes = next(a for a in header["arrays"] if a["name"] == "codes")["offset"]
        needle = data[codes : codes + 64]
        assert len(set(needle)) > 8  # a run of real codes, not zeros
        files = sorted(p.name for p in folder.iterdir())
        assert files == ["m.db", "m.db-shm", "m.db-wal"]
        found[name] = [p.name for p in folder.iterdir() if needle in p.read_bytes()]
        store.close()
        if key:
            assert keys.file_state(path) != "plain"
            monkeypatch.delenv(keys.KEY_ENV)
            with pytest.raises(keys.StoreLocked):
                _open(path)
    assert found["plain"] and found["secret"] == []
