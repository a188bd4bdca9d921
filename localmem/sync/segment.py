"""The segment format: one device's batch of changes as bytes, and those bytes checked
and read back. Where the bytes go (names, fsync, rename, listing) is ``folder``.

Layout (in a file named ``NNNNNNNN.seg``, see ``folder``)::

    LMSEG/<format version>\\n
    <header: one line of JSON>\\n
    <body: body_bytes bytes>

The header names the device, the segment number, the hybrid-clock range of its changes,
how many there are, the body's length and its sha256, and whether the body is age
encrypted. The body is zlib-compressed JSON lines, one change each (encrypted after
compression when a key is set). Invariants:

- a file shorter than its header says is ``Incomplete`` (a sync tool still carrying it):
  not an error, looked at again next time; any other mismatch (checksum, version,
  decryption, JSON) is ``Refused`` with the reason, and nothing of it is folded;
- the format version is read before anything else, so a newer format is refused by name.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localmem.sync import folder as transport
from localmem.sync.errors import Incomplete, Refused, SyncError
from localmem.sync.folder import segment_number
from localmem.sync.keys import Keyring

# ``segment_number`` and ``SyncError`` are named here too: a segment's number is read
# from its name, and ``write`` refuses an existing one with ``SyncError``.
__all__ = ["FORMAT_VERSION", "Header", "Segment", "SyncError", "decode", "encode", "file_sha256", "read_header"]
__all__ += ["segment_number", "write"]

FORMAT_VERSION = 1
MAGIC = b"LMSEG/"
_MAX_HEADER = 4096


@dataclass(frozen=True)
class Header:
    version: int
    device: str
    segment: int
    hlc_lo: int
    hlc_hi: int
    count: int
    body_bytes: int
    body_sha256: str
    encrypted: str | None  # "age" or None

    def to_json(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "segment": self.segment,
            "hlc": [self.hlc_lo, self.hlc_hi],
            "count": self.count,
            "body_bytes": self.body_bytes,
            "body_sha256": self.body_sha256,
            "encoding": "jsonl+zlib",
            "encrypted": self.encrypted,
        }


@dataclass(frozen=True)
class Segment:
    header: Header
    changes: list[dict[str, Any]]
    sha256: str  # of the whole file: what "folded" is recorded against
    size: int


def file_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def encode(device: str, n: int, changes: Sequence[dict[str, Any]], keys: Keyring) -> bytes:
    """The bytes of segment ``n`` of ``device`` holding ``changes`` (each with ``hlc``)."""
    lines = b"".join(json.dumps(c, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for c in changes)
    body = zlib.compress(lines, 6)
    encrypted = None
    if keys.encrypts:
        body = keys.encrypt(body)
        encrypted = "age"
    stamps = [int(c["hlc"]) for c in changes]
    header = Header(
        FORMAT_VERSION,
        device,
        n,
        min(stamps, default=0),
        max(stamps, default=0),
        len(changes),
        len(body),
        hashlib.sha256(body).hexdigest(),
        encrypted,
    )
    head = json.dumps(header.to_json(), separators=(",", ":")).encode()
    return MAGIC + str(FORMAT_VERSION).encode() + b"\n" + head + b"\n" + body


def write(folder: Path, device: str, n: int, changes: Sequence[dict[str, Any]], keys: Keyring) -> tuple[Path, bytes]:
    """Encode segment ``n`` and write it into ``folder`` (``folder.put``: atomically,
    never over an existing segment); returns its path and bytes."""
    data = encode(device, n, changes, keys)
    return transport.put(folder, n, data), data


def peek_version(data: bytes) -> int:
    if len(data) < len(MAGIC) and MAGIC.startswith(data):
        raise Incomplete("the file has not arrived yet (empty or a few bytes)")
    if not data.startswith(MAGIC):
        raise Refused("not a localmem segment (no LMSEG header)")
    end = data.find(b"\n", 0, _MAX_HEADER)
    if end < 0:
        raise Incomplete("the first line has not arrived")
    try:
        return int(data[len(MAGIC) : end])
    except ValueError:
        raise Refused("the format version is not a number") from None


def read_header(data: bytes) -> Header:
    """The header alone (it is never encrypted); ``Refused`` or ``Incomplete`` says why not."""
    version = peek_version(data)
    if version < 1 or version > FORMAT_VERSION:
        raise Refused(f"format version {version} is not one this localmem reads")
    first = data.index(b"\n") + 1
    second = data.find(b"\n", first, first + _MAX_HEADER)
    if second < 0:
        raise Incomplete("the header has not fully arrived")
    return _header(version, data[first:second])


def decode(data: bytes, keys: Keyring, *, where: str = "segment") -> Segment:
    """Parse and verify a segment's bytes; ``Refused`` or ``Incomplete`` says why not."""
    try:
        version = peek_version(data)
        if version > FORMAT_VERSION:
            raise Refused(
                f"format version {version} is newer than this localmem reads ({FORMAT_VERSION}); "
                "upgrade localmem on this device to fold it (nothing is lost meanwhile)"
            )
        if version < 1:
            raise Refused(f"format version {version} is not one localmem ever wrote")
        first = data.index(b"\n") + 1
        second = data.find(b"\n", first, first + _MAX_HEADER)
        if second < 0:
            raise Incomplete("the header has not fully arrived")
        header = _header(version, data[first:second])
        body = data[second + 1 :]
        if len(body) < header.body_bytes:
            raise Incomplete(f"{len(body)} of {header.body_bytes} body bytes have arrived")
        if len(body) > header.body_bytes:
            raise Refused(f"the body has {len(body)} bytes, the header says {header.body_bytes}")
        if hashlib.sha256(body).hexdigest() != header.body_sha256:
            raise Refused("the body's sha256 does not match its header (a damaged copy)")
        if header.encrypted:
            body = keys.decrypt(body)
        elif keys.encrypts:
            raise Refused("the segment is not encrypted, but this device requires encrypted segments")
        changes = _changes(zlib.decompress(body))
    except (Refused, Incomplete) as exc:
        raise type(exc)(f"{where}: {exc}") from None
    except zlib.error as exc:
        raise Refused(f"{where}: the body does not decompress ({exc})") from None
    if len(changes) != header.count:
        raise Refused(f"{where}: {len(changes)} changes, the header says {header.count}")
    return Segment(header, changes, hashlib.sha256(data).hexdigest(), len(data))


def _header(version: int, line: bytes) -> Header:
    try:
        h = json.loads(line)
        return Header(
            version,
            str(h["device"]),
            int(h["segment"]),
            int(h["hlc"][0]),
            int(h["hlc"][1]),
            int(h["count"]),
            int(h["body_bytes"]),
            str(h["body_sha256"]),
            h.get("encrypted"),
        )
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise Refused(f"the header is not valid ({exc})") from None


def _changes(lines: bytes) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, line in enumerate(lines.splitlines(), start=1):
        try:
            c = json.loads(line)
        except ValueError as exc:
            raise Refused(f"change {i} is not JSON ({exc})") from None
        if not isinstance(c, dict) or not isinstance(c.get("kind"), str) or not isinstance(c.get("key"), str):
            raise Refused(f"change {i} lacks a kind or a key")
        out.append(c)
    return out
