"""localmem reembed, in process: the second vector set is built beside the live one and
switched in one transaction; writes and forgets made meanwhile are caught up; a build
stopped half-way resumes to the same end; a store opened with another embedder is
refused with both ids and the way out. (Real processes: test_reembed_processes.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from localmem.config import Settings
from localmem.errors import EmbedderMismatch
from localmem.records import SessionIn, TurnIn
from localmem.storage.vectors import rebuild
from localmem.storage.write import binding
from localmem.storage.write.reembed import discard, reembed
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

OLD = HashEmbedder(64, "old-64")
NEW = HashEmbedder(32, "new-32")


def _store(path: Path, embedder: HashEmbedder = OLD, **kw: object) -> Store:
    return Store(path, embedder=embedder, settings=Settings(db=path), **kw)  # type: ignore[arg-type]


def _sessions(n: int, tag: str = "s") -> list[SessionIn]:
    return [
        SessionIn(
            f"{tag}{i}",
            tuple(
                TurnIn(text=f"Turn {j} of {tag}{i}: I bought {j} apples. Then I walked {i} miles.", speaker=sp)
                for j, sp in enumerate(("Ana", "Ben", "Ana"))
            ),
            f"2024-01-{i % 27 + 1:02d}T10:00:00",
        )
        for i in range(n)
    ]


def _tables(store: Store) -> dict[str, list[tuple[object, ...]]]:
    out: dict[str, list[tuple[object, ...]]] = {}
    for table in rebuild.LIVE:
        out[table] = [tuple(r) for r in store.conn.execute(f"SELECT * FROM {table} ORDER BY 1")]
    return out


def test_reembed_ends_as_a_store_written_with_the_new_embedder(tmp_path: Path) -> None:
    with _store(tmp_path / "a.db") as a:
        a.write_sessions(_sessions(12))
        report = reembed(a, NEW, batch=5)
        assert (report.switched, report.previous, report.embedder, report.units) == (True, "old-64", "new-32", 36)
        assert rebuild.recorded(a.conn) == rebuild.Recorded("new-32", 32, None)
        assert rebuild.current(a.conn) is None
        names = {str(r[0]) for r in a.conn.execute("SELECT name FROM sqlite_master")}
        assert not [n for n in names if "_next" in n]
        assert a.mirrors().turn.dim == 32
        got = _tables(a)
    with _store(tmp_path / "b.db", NEW) as b:
        b.write_sessions(_sessions(12))
        assert got == _tables(b)  # same rows, same vectors, same codes
    with _store(tmp_path / "a.db", NEW) as again:  # the new embedder opens it; the old one is refused
        assert again.embedder is not None
    with pytest.raises(EmbedderMismatch):
        _store(tmp_path / "a.db")


def test_writes_and_forgets_during_a_build_are_caught_up(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with _store(path) as a:
        a.write_sessions(_sessions(10))
    writer = _store(path)
    seen: list[int] = []

    def meanwhile(done: int, total: int) -> None:
        seen.append(done)
        if len(seen) == 2:  # mid-build, another connection writes and forgets with the old embedder
            writer.write_sessions(_sessions(4, tag="late"))
            writer.forget(session="s0")
            writer.forget(session="s9")

    with _store(path, rebind=True) as r:
        report = reembed(r, NEW, batch=4, on_batch=meanwhile)
        assert report.switched
        got = _tables(r)
        texts = [str(x[0]) for x in r.conn.execute("SELECT text FROM turns ORDER BY id")]
    writer.close()
    with _store(tmp_path / "b.db", NEW) as b:
        b.write_sessions(_sessions(4, tag="late"))
        want = {t: v for t, v in zip(_texts(b), _turn_vectors(b), strict=True)}
    with _store(path, NEW) as a:
        vecs = dict(zip(texts, _turn_vectors(a), strict=True))
        for text in want:
            assert np.array_equal(vecs[text], want[text])
        # every turn's vector and every cue's is the new embedder's: nothing left of the old
        assert len(got["turn_vec"]) == a.stats()["turns"] == 30 - 6 + 12
        assert {len(bytes(r[1])) for r in got["turn_vec"] + got["cue_vec"]} == {32 * 4}
        n_cues = a.conn.one("SELECT count(*) FROM cues")[0]
        assert len(got["cue_vec"]) == len(got["cue_codes"]) == n_cues


def _texts(store: Store) -> list[str]:
    return [str(x[0]) for x in store.conn.execute("SELECT text FROM turns ORDER BY id")]


def _turn_vectors(store: Store) -> list[np.ndarray]:
    return [
        np.frombuffer(bytes(x[0]), dtype=np.float32)
        for x in store.conn.execute("SELECT embedding FROM turn_vec ORDER BY turn_id")
    ]


class _Stop(Exception):
    pass


def test_a_build_stopped_half_way_resumes_to_the_same_end(tmp_path: Path) -> None:
    for name in ("whole.db", "stopped.db"):
        with _store(tmp_path / name) as s:
            s.write_sessions(_sessions(15))
    with _store(tmp_path / "whole.db", rebind=True) as s:
        reembed(s, NEW, batch=4)
        whole = _tables(s)

    def stop(done: int, total: int) -> None:
        if done >= 12:
            raise _Stop

    with _store(tmp_path / "stopped.db", rebind=True) as s, pytest.raises(_Stop):
        reembed(s, NEW, batch=4, on_batch=stop)
    with _store(tmp_path / "stopped.db") as s:  # reads still use the old set meanwhile
        assert rebuild.recorded(s.conn) == rebuild.Recorded("old-64", 64, None)
        assert s.mirrors().turn.dim == 64
        assert rebuild.sizes(s.conn) == (45, 12)
        report = reembed(s, NEW, batch=4)
        assert (report.resumed, report.embedded) == (True, 33)
        assert _tables(s) == whole


def test_discard_drops_an_unfinished_build(tmp_path: Path) -> None:
    with _store(tmp_path / "a.db") as s:
        s.write_sessions(_sessions(6))

        def stop(done: int, total: int) -> None:
            if done:
                raise _Stop

        with pytest.raises(_Stop):
            reembed(s, NEW, batch=2, on_batch=stop)
        assert discard(s) == "new-32"
        assert discard(s) is None
        names = [str(r[0]) for r in s.conn.execute("SELECT name FROM sqlite_master WHERE name LIKE '%next%'")]
        assert names == []
        report = reembed(s, NEW)
        assert (report.resumed, report.embedded) == (False, 18)


def test_a_write_embedded_before_a_switch_is_embedded_again(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with _store(path) as a:
        a.write_sessions(_sessions(3))
    late = _sessions(1, tag="late")
    with _store(path, follow=lambda _spec: HashEmbedder(32, "new-32")) as w:
        staged = w.stage(late)
        vectors = w.embed(staged.fresh)  # with the old embedder...
        with _store(path, rebind=True) as other:
            reembed(other, NEW)  # ...then another process switches the store
        w._commit(staged, vectors)
        assert w.embedder.model_id == "new-32"
        doc = w.conn.one("SELECT t.id FROM turns t JOIN sessions s ON s.id = t.session_id WHERE s.key = 'late0'")
        (vec,) = w.mirrors().turn.vectors(w.conn, w.mirrors().turn.index_of(np.array([doc[0]])))
        assert vec.shape == (32,)
    with _store(tmp_path / "b.db", NEW) as b:
        b.write_sessions(late)
        assert np.array_equal(vec, _turn_vectors(b)[0])


def test_a_store_that_does_not_follow_is_refused_after_a_switch(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with _store(path) as a:
        a.write_sessions(_sessions(3))
        with _store(path, rebind=True) as other:
            reembed(other, NEW)
        with pytest.raises(EmbedderMismatch, match="'new-32' \\(32-d\\), but it was opened with 'old-64'"):
            a.mirrors()
        with pytest.raises(EmbedderMismatch):
            a.write_sessions(_sessions(1, tag="x"))


def test_wrong_embedder_names_both_ids_and_both_ways_out(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    old = HashEmbedder(64, "old-64")
    old.spec = "/models/old"  # type: ignore[attr-defined]
    with _store(path, old) as a:
        a.write_sessions(_sessions(1))
    other = HashEmbedder(64, "other-64")
    other.spec = "/models/other"  # type: ignore[attr-defined]
    with pytest.raises(EmbedderMismatch) as info:
        _store(path, other)
    text = str(info.value)
    assert "'old-64' (64-d)" in text and "'other-64' (64-d)" in text
    assert "--embedder /models/old" in text and "localmem reembed --model /models/other" in text
    assert binding.spec_of(other) == "/models/other"
