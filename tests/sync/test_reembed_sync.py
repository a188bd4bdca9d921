"""Vectors are derived per device: two devices with different embedders (and one of them
moved to a third by ``reembed`` between passes) sync the same facts, each keeping only its
own embedder's vectors, and no segment carries a vector or an embedder id."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from localmem.config import Settings
from localmem.storage.write.reembed import reembed
from localmem.storage.write.store import Store
from localmem.storage.write.vectorize import turn_doc
from tests.helpers.fakes import HashEmbedder
from tests.helpers.sync import add_cue, hashes, session, state, sync


def _device(path: Path, embedder: HashEmbedder) -> Store:
    return Store(path, embedder=embedder, settings=Settings(db=path))


def _dims(store: Store) -> set[int]:
    return {
        len(bytes(r[0])) // 4
        for r in store.conn.execute("SELECT embedding FROM turn_vec UNION ALL SELECT embedding FROM cue_vec")
    }


def test_devices_with_different_embedders_sync_and_keep_their_own_vectors(tmp_path: Path) -> None:
    root = tmp_path / "folder"
    root.mkdir()
    alpha, beta, gamma = (HashEmbedder(d, f"embedder-{n}-{d}") for n, d in (("alpha", 64), ("beta", 32), ("gamma", 16)))
    a, b = _device(tmp_path / "a.db", alpha), _device(tmp_path / "b.db", beta)
    a.write(session("trip", "We booked the train to Lyon.", "Ana loves the old town.", day=3))
    add_cue(a, hashes(a)[0], "Lyon", "model-x")
    b.write(session("garden", "Tomatoes need sun.", day=4))
    sync(a, root)
    sync(b, root)
    sync(a, root)
    facts = {k: v for k, v in state(a).items() if k != "cue_vectors"}  # add_cue leaves A's cue unembedded
    assert facts == {k: v for k, v in state(b).items() if k != "cue_vectors"}
    assert (_dims(a), _dims(b)) == ({64}, {32})

    report = reembed(a, gamma)  # A moves to a third embedder; B keeps its own
    assert report.switched
    a.write(session("later", "Ben bought a bike in May.", day=5))
    sync(a, root)
    sync(b, root)
    assert state(a) == state(b)
    assert (_dims(a), _dims(b)) == ({16}, {32})
    # B embedded what it folded with its own model
    row = b.conn.one(
        "SELECT v.embedding, t.speaker, t.text, t.ts FROM turns t JOIN turn_vec v ON v.turn_id = t.id "
        "WHERE t.text LIKE 'Ben bought%'"
    )
    assert np.array_equal(np.frombuffer(bytes(row[0]), dtype=np.float32), beta.embed([turn_doc(*row[1:])])[0])
    blobs = b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
    assert blobs and not any(e.model_id.encode() in blobs for e in (alpha, beta, gamma))
    a.close()
    b.close()
