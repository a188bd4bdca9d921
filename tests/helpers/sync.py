"""Helpers the sync tests share: stores on real files, a pass of sync, and the state two
stores must agree on (turn hashes, the forget set, the model-derived layers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from localmem.config import Settings
from localmem.records import SessionIn, TurnIn
from localmem.storage.engine import db
from localmem.storage.write import changes as door
from localmem.storage.write.store import Store
from localmem.sync.keys import Keyring
from localmem.sync.run import Pass, sync_once
from tests.helpers.fakes import HashEmbedder

PLAIN = Keyring()


def open_device(path: Path) -> Store:
    return Store(path, embedder=HashEmbedder(), settings=Settings(db=path))


def session(key: str, *texts: str, day: int = 1, source: str = "api") -> SessionIn:
    turns = tuple(
        TurnIn(text=t, speaker="Ana" if i % 2 == 0 else "Ben", timestamp=f"2024-03-{day:02d}T10:{i:02d}:00")
        for i, t in enumerate(texts)
    )
    return SessionIn(key=key, turns=turns, source=source)


def sync(store: Store, root: Path, keys: Keyring = PLAIN) -> Pass:
    return sync_once(store, root, keys)


def add_cue(store: Store, turn_hash: str, text: str, model: str, tags: tuple[str, ...] = ("thing",)) -> None:
    """A model-derived keyword cue through the door, as enrichment writes one."""
    tid = int(store.conn.one("SELECT id FROM turns WHERE hash = ?", (turn_hash,))[0])
    start = max(0, str(store.conn.one("SELECT text FROM turns WHERE id = ?", (tid,))[0]).find(text))
    with db.transaction(store.conn):
        door.add_cue(
            store.conn, tid, turn_hash, door.CueWrite("keyword", text, start, start + len(text), tags=tags), model
        )


def state(store: Store) -> dict[str, Any]:
    c = store.conn
    return {
        "turns": sorted(str(r[0]) for r in c.execute("SELECT hash FROM turns")),
        "forgotten": sorted(str(r[0]) for r in c.execute("SELECT hash FROM forgotten")),
        "cues": sorted(
            tuple(str(x) for x in r)
            for r in c.execute(
                "SELECT t.hash, c.kind, c.text, c.extractor FROM cues c JOIN turns t ON t.id = c.turn_id "
                "WHERE c.kind != 'statement'"
            )
        ),
        "tags": sorted(
            tuple(str(x) for x in r)
            for r in c.execute(
                "SELECT t.hash, c.text, g.name FROM cue_tags ct JOIN cues c ON c.id = ct.cue_id "
                "JOIN tags g ON g.id = ct.tag_id JOIN turns t ON t.id = ct.turn_id"
            )
        ),
        "antecedents": sorted(
            tuple(str(x) for x in r)
            for r in c.execute(
                "SELECT a.hash, b.hash, e.reason FROM edges e JOIN turns a ON a.id = e.src JOIN turns b ON b.id = e.dst "
                "WHERE e.kind = 'antecedent'"
            )
        ),
        "cue_vectors": int(c.one("SELECT count(*) FROM cues c JOIN cue_vec v ON v.cue_id = c.id")[0]),
    }


def hashes(store: Store) -> list[str]:
    return [str(r[0]) for r in store.conn.execute("SELECT hash FROM turns ORDER BY id")]
