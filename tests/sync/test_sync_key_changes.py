"""Key changes lose nothing (issue 40): a device that synced without a key, or with a
wrong one, reaches the others once its key is right (it writes its own segments again
under it); a refused segment is folded as soon as it can be; a device joining a folder
that turned encrypted gets the whole history and the forget set. Real stores, real
segment files, real age (pyrage)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from localmem.storage.write.store import Store
from localmem.sync.keys import Keyring
from localmem.sync.run import status
from tests.helpers.devices import a_dev
from tests.helpers.sync import hashes, open_device, session, state, sync

pyrage = pytest.importorskip("pyrage")


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "folder"
    root.mkdir()
    return root


def _identity() -> Keyring:
    return Keyring(identities=(str(pyrage.x25519.Identity.generate()),))


def _texts(store: Store) -> set[str]:
    return {str(r[0]) for r in store.conn.execute("SELECT text FROM turns")}


def _in_folder(root: Path, needle: bytes) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _refused(store: Store, root: Path) -> list[dict[str, Any]]:
    return [r for r in status(store, root)["refused"] if not r["incomplete"]]


def test_a_device_that_synced_without_a_key_reaches_keyed_devices_once_it_has_one(tmp_path: Path) -> None:
    root, key = _root(tmp_path), _identity()
    a, b = open_device(tmp_path / "a.db"), open_device(tmp_path / "b.db")
    a.write(session("s1", "Written before the key, first."))
    sync(a, root)
    a.write(session("s2", "Written before the key, second."))
    sync(a, root)
    b.write(session("b1", "Written on the keyed device."))
    sync(b, root, key)
    assert len(_refused(b, root)) == 2  # A's plaintext segments, refused for now
    a.write(session("s3", "Written with the key."))
    sync(a, root, key)  # the key turned on: A writes its first two segments again, encrypted
    sync(b, root, key)
    assert _texts(b) == _texts(a) | {"Written on the keyed device."}
    assert _refused(b, root) == []
    assert _in_folder(root, b"before the key") == []  # no plaintext left in the folder
    assert [p.name for p in sorted((root / a_dev(a)).iterdir())] == ["00000001.seg", "00000002.seg", "00000003.seg"]


def test_a_wrong_passphrase_then_the_right_one_loses_nothing(tmp_path: Path) -> None:
    root = _root(tmp_path)
    wrong, right = Keyring(passphrase="correct horse battery"), Keyring(passphrase="correct horse staple")
    a, b = open_device(tmp_path / "a.db"), open_device(tmp_path / "b.db")
    a.write(session("a1", "Typed on the laptop with the wrong passphrase."))
    sync(a, root, wrong)
    b.write(session("b1", "Typed on the desktop."))
    sync(b, root, right)
    assert "does not decrypt" in _refused(b, root)[0]["reason"]
    sync(a, root, right)  # corrected: A writes its segment again, and folds B's it refused
    sync(b, root, right)
    assert _texts(a) == _texts(b) == {"Typed on the laptop with the wrong passphrase.", "Typed on the desktop."}
    assert _refused(a, root) == [] and _refused(b, root) == []


def test_a_folder_that_turned_encrypted_gives_a_new_device_the_whole_history_and_forget_set(tmp_path: Path) -> None:
    root, key = _root(tmp_path), _identity()
    a, b = open_device(tmp_path / "a.db"), open_device(tmp_path / "b.db")
    for i in range(8):  # 16 plaintext segments, as in the issue
        a.write(session(f"a{i}", f"Laptop note {i}."))
        sync(a, root)
        b.write(session(f"b{i}", f"Desktop note {i}."))
        sync(b, root)
    sync(a, root)
    a.forget(session="b3")  # a forget before the key: its tombstone is in a plaintext segment
    sync(a, root)
    sync(a, root, key)  # the key turned on, as the warning advises, on both devices
    sync(b, root, key)
    new = open_device(tmp_path / "new.db")
    sync(new, root, key)
    assert _refused(new, root) == []
    assert len(hashes(new)) == 15 and sorted(hashes(new)) == sorted(hashes(a)) == sorted(hashes(b))
    assert state(new)["forgotten"] == state(a)["forgotten"] != []
    b.forget(session="a5")  # a later forget reaches it too
    sync(b, root, key)
    sync(new, root, key)
    assert "Laptop note 5." not in _texts(new) and len(hashes(new)) == 14
    assert _in_folder(root, b"note") == []
