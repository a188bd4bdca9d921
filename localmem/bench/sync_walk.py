"""The ``sync`` walk, read as data: one real ``localmem sync`` pass between two devices
under ``sys.setprofile``, counting which rooms of localmem it visits and how it moves
between them (issue 36's before/after; ``localmem bench sync --walk``).

A *room* is a top-level package or module of localmem (``localmem.sync``,
``localmem.models``, ``localmem.config``...) and, inside ``localmem.storage``, one of its
sub-packages (``localmem.storage.sync``, ``localmem.storage.write``...). Every call from a
localmem frame into a localmem function of another room is a *crossing*. A crossing is a
*step back up* when it goes from a room to one above it in the import layers of
pyproject.toml (a callback: storage calling a closure of ``localmem.sync``); every other
crossing goes down and comes back as a *return*. Counted twice: as distinct edges
(caller function -> callee function; independent of how much data the pass carries) and
as events. Frames outside localmem (contextlib, threading) are skipped: a call is
attributed to the nearest localmem frame below it; what runs while a module is imported
is not part of the walk.

Invariant: the pass is a real one (the CLI's ``main`` in this process, on stores made by
the real CLI in subprocesses, with the real embedder); only the profiler watches it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from localmem.bench.sync_bench import chat_file
from localmem.config import Settings
from localmem.memory import open_store
from localmem.storage.bench import sync_checks

# The layers contract of pyproject.toml, top first; storage's rooms in their own order.
_LAYERS = [
    ["localmem.cli"],
    ["mcp_server", "localmem.ui"],
    ["localmem.bench"],
    ["localmem.answering"],
    ["localmem.enrichment", "localmem.toolkit", "localmem.ingest", "localmem.sync"],
    ["localmem.memory"],
    ["localmem.retrieval"],
    ["localmem.storage"],
    ["localmem.models"],
    ["localmem.util"],
    ["localmem.config", "localmem.records"],
    ["localmem.errors"],
]
_STORAGE = [["bench"], ["sync", "copies"], ["layers"], ["write"], ["vectors", "reads"], ["engine"]]


def room(module: str) -> str | None:
    """The room of a module name, or None outside localmem."""
    parts = module.split(".")
    if parts[0] == "mcp_server":
        return "mcp_server"
    if parts[0] != "localmem":
        return None
    if len(parts) == 1:
        return "localmem"
    if parts[1] == "storage" and len(parts) > 2:
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def rank(r: str) -> tuple[int, int]:
    """Higher is further up: (layer, storage room)."""
    top = next((len(_LAYERS) - i for i, names in enumerate(_LAYERS) if any(r.startswith(n) for n in names)), 0)
    sub = 0
    if r.startswith("localmem.storage."):
        name = r.split(".")[2]
        sub = next((len(_STORAGE) - i for i, names in enumerate(_STORAGE) if name in names), 0)
    return top, sub


class Walk:
    """What a profiled stretch of code did, room by room."""

    def __init__(self) -> None:
        self.rooms: Counter[str] = Counter()
        self.down: Counter[tuple[str, str]] = Counter()
        self.up: Counter[tuple[str, str]] = Counter()
        self.calls_from: dict[str, set[str]] = {}
        self.transactions: Counter[str] = Counter()  # write transactions opened, by the opener's module
        self._tx_frames: list[FrameType] = []

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = room(frame.f_globals.get("__name__", ""))
        if callee is None or _importing(frame):  # an import runs the module: not part of the walk
            return
        self.rooms[callee] += 1
        caller_frame = frame.f_back
        while caller_frame is not None and room(caller_frame.f_globals.get("__name__", "")) is None:
            caller_frame = caller_frame.f_back
        if caller_frame is None:
            return
        caller = room(caller_frame.f_globals.get("__name__", ""))
        if caller is None or caller == callee:
            return
        self.calls_from.setdefault(caller, set()).add(callee)
        # ``db.transaction`` is a generator: its frame is called again when the block ends
        opens = (
            frame.f_code.co_name == "transaction" and frame.f_globals.get("__name__") == "localmem.storage.engine.db"
        )
        if opens and not any(f is frame for f in self._tx_frames):
            self._tx_frames.append(frame)  # held, so no later frame reuses its id
            self.transactions[caller_frame.f_globals.get("__name__", "?")] += 1
        edge = (_where(caller_frame), _where(frame))
        (self.up if rank(callee) > rank(caller) else self.down)[edge] += 1

    def report(self) -> dict[str, Any]:
        ups = sorted({f"{a} -> {b}" for a, b in self.up})
        return {
            "rooms": len(self.rooms),
            "room_names": sorted(self.rooms),
            "steps_back_up": len(self.up),
            "steps_back_up_events": sum(self.up.values()),
            "steps_back_up_into_sync": len([1 for _a, b in self.up if b.startswith("localmem.sync.")]),
            "returns": len(self.down),
            "returns_events": sum(self.down.values()),
            "sync_calls_into": sorted(self.calls_from.get("localmem.sync", set())),
            "transactions_opened_by": dict(sorted(self.transactions.items())),
            "steps_back_up_edges": ups,
        }


def _importing(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs a localmem module's body, or is called from one."""
    while frame is not None:
        if frame.f_code.co_name == "<module>" and room(frame.f_globals.get("__name__", "")) is not None:
            return True
        frame = frame.f_back
    return False


def _where(frame: FrameType) -> str:
    return f"{frame.f_globals.get('__name__', '?')}.{frame.f_code.co_qualname}"


def _cli(db: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"localmem {' '.join(args)} failed: {done.stderr[-2000:]}")


def run(workdir: Path) -> dict[str, Any]:
    """Devices A and B ingest and sync; then A ingests more, forgets a session B has
    folded and derives a cue on some turns (through the door, as enrichment would), and
    syncs; B ingests more; then one ``localmem sync`` pass of B runs here, profiled: it
    exports B's new turns and folds A's turns, tombstones and derived cues."""
    folder = workdir / "folder"
    folder.mkdir(parents=True, exist_ok=True)
    a, b = workdir / "a.db", workdir / "b.db"
    for db, name in ((a, "laptop"), (b, "desktop")):
        chat_file(workdir / f"{name}.jsonl", name, 3, 6)
        _cli(db, "ingest", str(workdir / f"{name}.jsonl"))
    _cli(a, "sync", str(folder))
    _cli(b, "sync", str(folder))  # B's first pass: the walk below is a steady-state one
    chat_file(workdir / "more.jsonl", "laptop-again", 2, 6)
    _cli(a, "ingest", str(workdir / "more.jsonl"))
    _cli(a, "forget", "--session", "laptop-chat-0")
    with open_store(Settings(db=a)) as store:
        sync_checks.bench_derive(store.conn, "walk-model", n=40)
    _cli(a, "sync", str(folder))
    chat_file(workdir / "more-b.jsonl", "desktop-again", 2, 6)
    _cli(b, "ingest", str(workdir / "more-b.jsonl"))
    walk = Walk()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = _profiled_cli(walk, ["--db", str(b), "sync", str(folder), "--json"])
    out = walk.report()
    out["exit_code"] = code
    out["pass"] = json.loads(printed.getvalue())
    return out


def _profiled_cli(walk: Walk, argv: list[str]) -> int:
    """``python -m localmem ARGV`` in this process (the entry point a user runs; run, not
    imported, as bench sits below the CLI), watched by ``walk``."""
    saved = sys.argv
    sys.argv = ["localmem", *argv]
    sys.setprofile(walk)
    try:
        runpy.run_module("localmem", run_name="__main__", alter_sys=False)
    except SystemExit as done:
        return int(done.code or 0)
    finally:
        sys.setprofile(None)
        sys.argv = saved
    return 0


def main_cli() -> int:
    os.environ.pop("LOCALMEM_MODEL", None)
    with tempfile.TemporaryDirectory(prefix="localmem-sync-walk-") as tmp:
        result = run(Path(tmp))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main_cli())
