"""``localmem bench sync --faults``: key changes and forgets across three devices, each a
store driven by the real CLI in its own processes (``ingest``, ``sync``, ``forget``), all
syncing through one folder (as on a network share; the transport is not what is tested here).

The round: each device ingests its own chats; *laptop* syncs without a key, *desktop* with
a wrong one (an age identity the others do not have), *work* with the right one; laptop
forgets one of its sessions; desktop, offline as far as that forget goes, ingests laptop's
chats again (the same export: the forgotten session comes back in its store); laptop turns
the key on, desktop corrects its key; work forgets one of desktop's sessions; then each
device syncs once, in turn, and once more; a fourth device joins with the key.

Counted at the end: turns lost (written, not forgotten, and missing on any device or the
joiner), forgotten bytes (any forgotten turn's text in any file of the folder, raw or in a
segment's decrypted body), plaintext bytes (any turn's text readable in the raw bytes of a
file, and segments not encrypted), refusals left, and whether the four stores are identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from localmem.config import Settings
from localmem.errors import LocalmemError
from localmem.memory import open_store
from localmem.storage.bench import reads as bench_reads
from localmem.storage.bench import sync_checks
from localmem.sync import segment
from localmem.sync.errors import Incomplete, Refused
from localmem.sync.keys import Keyring, new_identity

NAMES = ("laptop", "desktop", "work")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCALMEM_") or k == "LOCALMEM_BUSY_TIMEOUT_MS"}
    return env


def _cli(db: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args], capture_output=True, text=True, env=_env()
    )
    if done.returncode not in (0, 1):  # 1: a sync pass that refused a segment (reported, not a failure here)
        raise LocalmemError(f"localmem {' '.join(args)}: {done.stderr[-1500:]}")
    return done.stdout


def _chats(path: Path, device: str, sessions: int, per: int) -> list[str]:
    texts = []
    with path.open("w", encoding="utf-8") as f:
        for s in range(sessions):
            for t in range(per):
                text = f"{device} chat {s} line {t}: the parcel for flat {s * 13 + t} goes to the {device} desk."
                f.write(json.dumps({"session": f"{device}-{s}", "speaker": "Ana", "text": text}) + "\n")
                texts.append(text)
    return texts


def _identity(path: Path) -> str:
    ident = new_identity()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(ident + "\n")
    return ident


def run(workdir: Path, sessions: int = 6, per: int = 5) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    folder = workdir / "folder"
    folder.mkdir(exist_ok=True)
    right, wrong = workdir / "right.key", workdir / "wrong.key"
    key = Keyring(identities=(_identity(right),))
    _identity(wrong)
    dbs = {n: workdir / f"{n}.db" for n in NAMES}
    written: dict[str, list[str]] = {}
    t0 = time.perf_counter()
    for n in NAMES:
        written[n] = _chats(workdir / f"{n}.jsonl", n, sessions, per)
        _cli(dbs[n], "ingest", str(workdir / f"{n}.jsonl"))
    keyed = ("--identity", str(right))
    _cli(dbs["laptop"], "sync", str(folder))  # no key
    _cli(dbs["desktop"], "sync", str(folder), "--identity", str(wrong))  # the wrong key
    _cli(dbs["work"], "sync", str(folder), *keyed)
    _cli(dbs["laptop"], "forget", "--session", "laptop-0")
    _cli(dbs["laptop"], "sync", str(folder))
    _cli(dbs["desktop"], "ingest", str(workdir / "laptop.jsonl"))  # the same export, forget not known there
    _cli(dbs["desktop"], "sync", str(folder), "--identity", str(wrong))
    _cli(dbs["work"], "sync", str(folder), *keyed)
    for n in NAMES:  # the keys are right everywhere now
        _cli(dbs[n], "sync", str(folder), *keyed)
    _cli(dbs["work"], "forget", "--session", "desktop-1")  # work has desktop's turns now: forget one session
    passes = 0
    for _ in range(2):  # one sync each after the last forget, then once more
        for n in NAMES:
            _cli(dbs[n], "sync", str(folder), *keyed)
            passes += 1
    joiner = workdir / "joiner.db"
    _cli(joiner, "sync", str(folder), *keyed)
    seconds = time.perf_counter() - t0
    forgotten = {t for t in written["laptop"] if t.startswith("laptop chat 0 ")}
    forgotten |= {t for t in written["desktop"] if t.startswith("desktop chat 1 ")}
    kept = {t for ts in written.values() for t in ts} - forgotten
    prints, texts, refused = {}, {}, {}
    for n, db in [*dbs.items(), ("joiner", joiner)]:
        with open_store(Settings(db=db)) as store:
            prints[n] = sync_checks.fingerprint(store.conn)
            texts[n] = set(bench_reads.turn_text_counts(store.conn))
        refused[n] = len(json.loads(_cli(db, "sync", "status", "--json"))["refused"])
    scan = _scan(folder, key, forgotten, kept | forgotten)
    return {
        "devices": len(NAMES) + 1,
        "turns_written": sum(len(v) for v in written.values()),
        "turns_forgotten": len(forgotten),
        "turns_lost": max(len(kept - t) for t in texts.values()),
        "forgotten_on_a_device": max(len(forgotten & t) for t in texts.values()),
        "identical": all(p == prints["laptop"] for p in prints.values()),
        "refused_left": sum(refused.values()),
        "passes_after_last_forget": passes,
        "seconds": round(seconds, 1),
        **scan,
    }


def _scan(folder: Path, key: Keyring, forgotten: set[str], every: set[str]) -> dict[str, int]:
    """Forgotten text and readable text in every file of the folder (raw bytes, and each
    segment's body decrypted with the right key)."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    raw = [p.read_bytes() for p in files]
    bodies: list[str] = []
    plain_segments = undecodable = 0
    for p, data in zip(files, raw, strict=True):
        if segment.segment_number(p.name) is None:
            continue
        for keys in (Keyring(), key):  # a plaintext segment reads only without a key
            try:
                bodies.append(json.dumps(segment.decode(data, keys).changes, ensure_ascii=False))
            except (Refused, Incomplete):
                continue
            plain_segments += keys is not key
            break
        else:
            undecodable += 1  # encrypted to a key the folder's devices do not share
    return {
        "files": len(files),
        "segments_plaintext": plain_segments,
        "segments_undecodable_with_the_key": undecodable,
        "forgotten_bytes_raw": sum(len(t.encode()) for t in forgotten for d in raw if t.encode() in d),
        "forgotten_bytes_decrypted": sum(len(t.encode()) for t in forgotten for b in bodies if t in b),
        "plaintext_bytes_raw": sum(len(t.encode()) for t in every for d in raw if t.encode() in d),
    }
