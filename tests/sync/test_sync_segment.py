"""The segment file and the hybrid clock, on their own: round trip, a half-arrived file,
a flipped byte, a newer format, sync tools' copy names, age encryption."""

from __future__ import annotations

from pathlib import Path

import pytest

from localmem.sync import segment
from localmem.sync.errors import Incomplete, Refused
from localmem.sync.hlc import HybridClock, pack, unpack
from localmem.sync.keys import Keyring

CHANGES = [{"hlc": pack(1000, i), "kind": "turn", "key": f"h{i}", "turn": {"text": "ünïcode " * i}} for i in range(5)]


def test_round_trip_and_header(tmp_path: Path) -> None:
    path, _data = segment.write(tmp_path / "dev1", "dev1", 3, CHANGES, Keyring())
    assert path.name == "00000003.seg"
    seg = segment.decode(path.read_bytes(), Keyring())
    assert seg.changes == CHANGES
    assert (seg.header.device, seg.header.segment, seg.header.count) == ("dev1", 3, 5)
    assert (seg.header.hlc_lo, seg.header.hlc_hi) == (pack(1000, 0), pack(1000, 4))
    assert not [p for p in path.parent.iterdir() if p.name != path.name]  # no temp left behind
    with pytest.raises(segment.SyncError, match="never rewritten"):
        segment.write(tmp_path / "dev1", "dev1", 3, CHANGES, Keyring())


def test_truncated_is_incomplete_then_folds_when_complete(tmp_path: Path) -> None:
    data = segment.encode("d", 1, CHANGES, Keyring())
    for cut in (3, 10, len(data) // 2, len(data) - 1):
        with pytest.raises(Incomplete):
            segment.decode(data[:cut], Keyring())
    assert segment.decode(data, Keyring()).changes == CHANGES


def test_a_flipped_byte_is_refused(tmp_path: Path) -> None:
    data = bytearray(segment.encode("d", 1, CHANGES, Keyring()))
    data[-5] ^= 0x01
    with pytest.raises(Refused, match="sha256"):
        segment.decode(bytes(data), Keyring())


def test_a_newer_format_is_refused_by_name() -> None:
    data = segment.encode("d", 1, CHANGES, Keyring()).replace(b"LMSEG/1\n", b"LMSEG/2\n", 1)
    with pytest.raises(Refused, match="format version 2 is newer"):
        segment.decode(data, Keyring())
    with pytest.raises(Refused, match="not a localmem segment"):
        segment.decode(b"hello\n", Keyring())


def test_sync_tool_copies_keep_their_number() -> None:
    assert segment.segment_number("00000003.seg") == 3
    assert segment.segment_number("00000003.sync-conflict-20240101-120000-ABCDEFG.seg") == 3
    assert segment.segment_number("00000003 (Alice's conflicted copy 2024-01-01).seg") == 3
    assert segment.segment_number(".00000003.seg.tmp-123") is None
    assert segment.segment_number("~syncthing~00000003.seg.tmp") is None
    assert segment.segment_number("0003.seg") is None


def test_hybrid_clock_orders_after_a_peer_ahead_and_survives_a_clock_behind() -> None:
    wall = [1000]
    c = HybridClock(wall=lambda: wall[0])
    a = c.now()
    b = c.now()
    assert b > a and unpack(b) == (1000, 1)
    peer = pack(5000, 7)  # a device whose clock is 4 s ahead
    assert c.observe(peer) > peer
    wall[0] = 10  # this machine's clock jumps back
    later = c.now()
    assert later > peer and unpack(later)[0] == 5000


def test_passphrase_and_identity_encryption(tmp_path: Path) -> None:
    pyrage = pytest.importorskip("pyrage")
    secret = Keyring(passphrase="correct horse")
    data = segment.encode("d", 1, CHANGES, secret)
    assert b"unicode" not in data and "ünïcode".encode() not in data
    assert segment.decode(data, secret).changes == CHANGES
    with pytest.raises(Refused, match="does not decrypt"):
        segment.decode(data, Keyring(passphrase="wrong"))
    with pytest.raises(Refused, match="no key is set"):
        segment.decode(data, Keyring())
    ident = pyrage.x25519.Identity.generate()
    other = pyrage.x25519.Identity.generate()
    mine = Keyring(identities=(str(ident),), recipients=(str(other.to_public()),))
    data = segment.encode("d", 1, CHANGES, mine)
    assert segment.decode(data, Keyring(identities=(str(other),))).changes == CHANGES  # the extra recipient reads it
    with pytest.raises(Refused):
        segment.decode(data, Keyring(identities=(str(pyrage.x25519.Identity.generate()),)))
    plain = segment.encode("d", 1, CHANGES, Keyring())
    with pytest.raises(Refused, match="requires encrypted"):
        segment.decode(plain, secret)
