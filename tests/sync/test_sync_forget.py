"""Forget reaches every file of the folder (issue 40): a device that learns a tombstone
writes its own segments again without the forgotten content; an offline device's new
segment never carries it; a forgotten session stays forgotten, header too, in every
order its segments are folded; ``sync status`` counts only this device's own changes as
unexported. Real stores and segment files."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import pytest

from localmem.records import SessionIn, TurnIn
from localmem.storage.write.store import Store
from localmem.sync import segment
from localmem.sync.keys import Keyring
from localmem.sync.run import status
from tests.helpers.devices import a_dev
from tests.helpers.sync import add_cue, hashes, open_device, session, state, sync

SECRET = "The safe code is 4711 and it opens at noon."


def _root(tmp_path: Path, name: str = "folder") -> Path:
    root = tmp_path / name
    root.mkdir()
    return root


def _holding(root: Path, needle: bytes) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


def _secret_session(title: str = "") -> SessionIn:
    turns = (
        TurnIn(text=SECRET, speaker="Ana", timestamp="2024-03-01T10:00:00"),
        TurnIn(text="Nothing else to say.", speaker="Ben", timestamp="2024-03-01T10:01:00"),
    )
    return SessionIn(key="vault", turns=turns, source="chatgpt", title=title)


def _sessions(store: Store) -> list[tuple[str, str, str]]:
    return sorted(
        (str(r[0]), str(r[1]), str(r[2])) for r in store.conn.execute("SELECT source, key, title FROM sessions")
    )


def test_after_one_sync_each_no_file_holds_a_forgotten_turn_or_its_cue(tmp_path: Path) -> None:
    root = _root(tmp_path)
    a, b, c = (open_device(tmp_path / f"{n}.db") for n in "abc")
    a.write(_secret_session())
    add_cue(a, hashes(a)[0], "safe code is 4711", "model-x")
    sync(a, root)
    sync(b, root)
    c.write(session("other", "C writes something else."))
    sync(c, root)
    assert _inflated_holding(root, "4711") != []  # in A's segments (zlib-compressed JSON)
    b.forget(turn_ids=[int(b.conn.one("SELECT id FROM turns WHERE text = ?", (SECRET,))[0])])
    for s in (b, a, c):
        sync(s, root)
    assert _holding(root, b"4711") == [] and not _inflated_holding(root, "4711")
    fresh = open_device(tmp_path / "fresh.db")
    sync(fresh, root)
    assert state(fresh) == state(a) == state(b) and SECRET not in {
        t for (t,) in fresh.conn.execute("SELECT text FROM turns")
    }


def _inflated_holding(root: Path, needle: str) -> list[str]:
    """Segments whose changes (decoded: plaintext bodies are zlib-compressed) hold ``needle``."""
    found = []
    for p in root.rglob("*.seg"):
        seg = segment.decode(p.read_bytes(), Keyring())
        if needle in repr(seg.changes):
            found.append(str(p.relative_to(root)))
    return found


def test_an_offline_device_never_writes_forgotten_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _root(tmp_path)
    a, b = open_device(tmp_path / "a.db"), open_device(tmp_path / "b.db")
    a.write(_secret_session())
    sync(a, root)
    a.forget(session="vault", source="chatgpt")
    sync(a, root)
    b.write(_secret_session())  # the same export ingested on a device that was offline
    b.write(session("mine", "A note of B's own."))
    written: list[str] = []
    encode = segment.encode

    def spy(device: str, n: int, changes: Any, keys: Keyring) -> bytes:
        written.append(repr(changes))
        return encode(device, n, changes, keys)

    monkeypatch.setattr(segment, "encode", spy)
    sync(b, root)
    assert len(written) == 1 and "A note of B's own." in written[0] and "4711" not in written[0]
    assert not _inflated_holding(root, "4711")
    assert SECRET not in {t for (t,) in b.conn.execute("SELECT text FROM turns")}


def test_a_forgotten_session_stays_forgotten_header_too_in_every_fold_order(tmp_path: Path) -> None:
    root = _root(tmp_path)
    a = open_device(tmp_path / "a.db")
    a.write(_secret_session(title="Vault plans"))
    sync(a, root)
    a.write(session("kept", "This one stays."))
    sync(a, root)
    a.forget(session="vault", source="chatgpt")
    sync(a, root)
    res = a.write(_secret_session(title="Vault plans"))  # the export ingested again
    assert res.new_turns == 0
    sync(a, root)
    assert ("chatgpt", "vault", "Vault plans") not in _sessions(a)
    segs = sorted((root / a_dev(a)).iterdir())
    results = []
    for order in itertools.permutations(segs):
        fresh_root = _root(tmp_path, f"order{len(results)}")
        (fresh_root / a_dev(a)).mkdir()
        fresh = open_device(tmp_path / f"fresh{len(results)}.db")
        for seg in order:
            shutil.copy(seg, fresh_root / a_dev(a) / seg.name)
            sync(fresh, fresh_root)
        results.append((_sessions(fresh), state(fresh)))
        fresh.close()
    assert all(r == results[0] for r in results)
    assert results[0][0] == _sessions(a) == [("api", "kept", "")]
    assert _holding(root, b"Vault plans") == [] and not _inflated_holding(root, "Vault plans")


def test_sync_status_counts_only_this_devices_changes_as_unexported(tmp_path: Path) -> None:
    root = _root(tmp_path)
    a, b = open_device(tmp_path / "a.db"), open_device(tmp_path / "b.db")
    a.write(session("s", "One.", "Two.", "Three."))
    sync(a, root)
    sync(b, root)
    assert status(b, root)["unexported_changes"] == 0
    b.write(session("t", "Four."))
    assert status(b, root)["unexported_changes"] == 2  # the session and its turn
