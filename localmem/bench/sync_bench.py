"""``localmem bench sync``: three devices, each with a real Syncthing daemon carrying its
copy of the sync folder, writing at once through their own MCP server (``remember``,
which syncs in the background: ``serve --sync``) and the CLI (``ingest``); one forgets a
session and each adds a model-derived cue through the door. Reports the time from the
last acknowledged write to identical stores, the bytes on the wire per turn (Syncthing's
own counters), and checks that every device ends with the same turn hashes, forget set
and derived layers, none lost and none twice. Then a late device joins: it folds the
folder into an empty store (CPU per folded turn), against a plain ingest of the same
turns (``join``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio

from localmem.bench.preamble import child_env, localmem_cmd
from localmem.bench.syncthing import Daemon, mesh
from localmem.config import Settings
from localmem.errors import LocalmemError
from localmem.memory import open_store
from localmem.storage.bench import sync_checks
from localmem.sync.apply import Applied
from localmem.sync.fold import fold
from localmem.sync.keys import Keyring

NAMES = ["laptop", "desktop", "work"]


def chat_file(path: Path, device: str, sessions: int, per: int) -> int:
    """A chat log of ``sessions`` x ``per`` turns of ``device`` (JSON Lines ``localmem ingest`` reads);
    the number of turns."""
    with path.open("w", encoding="utf-8") as f:
        for s in range(sessions):
            for t in range(per):
                row = {
                    "session": f"{device}-chat-{s}",
                    "speaker": "Ana" if t % 2 == 0 else "Assistant",
                    "role": "user" if t % 2 == 0 else "assistant",
                    "text": f"On {device}, chat {s}, message {t}: notes about project {s * 31 + t} and the trip to city {t}.",
                    "timestamp": f"2024-04-{1 + s % 28:02d}T{9 + t % 12:02d}:{t % 60:02d}:00",
                }
                f.write(json.dumps(row) + "\n")
    return sessions * per


async def _remember(
    db: Path, folder: Path, device: str, calls: int, per: int, hold: anyio.Event, written: dict[str, int]
) -> None:
    from mcp import Client, StdioServerParameters  # lazy: the SDK takes ~0.5 s to import

    cmd = localmem_cmd(db, "serve", "--no-worker", "--sync", str(folder), "--sync-interval", "1")
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=child_env())
    n = 0
    async with Client(params, read_timeout_seconds=600) as client:
        for c in range(calls):
            turns = [
                {
                    "text": f"{device} remembers item {c}-{i}: the {['red', 'blue', 'green'][i % 3]} notebook.",
                    "speaker": "Ana",
                }
                for i in range(per)
            ]
            result = await client.call_tool("remember", {"turns": turns, "session": f"{device}-mcp-{c}"})
            if result.is_error:
                raise LocalmemError(f"{device}: remember failed: {result.content}")
            n += per
        written[device + "/mcp"] = n
        await hold.wait()  # keep the server (and its background sync) up until the stores converge


def fingerprint(db: Path) -> dict[str, Any]:
    with open_store(Settings(db=db)) as store:
        return sync_checks.fingerprint(store.conn)


def run(workdir: Path, turns: int = 300, timeout_s: float = 300.0) -> dict[str, Any]:
    """Three devices writing ``turns`` turns in all (half ingested, half remembered)."""
    daemons = mesh(workdir, NAMES)
    try:
        return anyio.run(_scenario, workdir, daemons, turns, timeout_s)
    finally:
        for d in daemons:
            d.stop()


async def _scenario(workdir: Path, daemons: list[Daemon], turns: int, timeout_s: float) -> dict[str, Any]:
    per_device = max(20, turns // len(daemons))
    dbs = [workdir / d.name / "memory.db" for d in daemons]
    wire0 = [d.wire_bytes() for d in daemons]
    hold = anyio.Event()
    written: dict[str, int] = {}
    t0 = time.monotonic()
    async with anyio.create_task_group() as tg:

        async def device(i: int) -> None:
            d = daemons[i]
            chats = workdir / d.name / "chats.jsonl"
            ingested = chat_file(chats, d.name, per_device // 20, 10)
            ingest = await anyio.run_process(
                localmem_cmd(dbs[i], "ingest", str(chats)),
                env=child_env(),
                check=False,
            )
            if ingest.returncode != 0:
                raise LocalmemError(f"{d.name}: ingest failed: {ingest.stderr.decode()[-500:]}")
            written[d.name] = ingested

        async def mcp(i: int) -> None:
            d = daemons[i]
            await _remember(dbs[i], d.folder, d.name, per_device // 20, 10, hold, written)

        for i in range(len(daemons)):
            tg.start_soon(mcp, i)
            tg.start_soon(device, i)
        while len(written) < 2 * len(daemons):
            await anyio.sleep(0.2)
        # One device forgets one of its sessions, every device derives a cue (through the
        # door, as enrichment would: no model runs on this CPU), then the CLI syncs too.
        forget = await anyio.run_process(
            localmem_cmd(dbs[0], "forget", "--session", f"{NAMES[0]}-chat-0"),
            env=child_env(),
        )
        for i, db in enumerate(dbs):
            _derive(db, f"bench-model-{i}")
        writes_done = time.monotonic()
        converged, prints = await _converge(dbs, timeout_s)
        converge_s = time.monotonic() - writes_done
        hold.set()
    wire = [d.wire_bytes() for d in daemons]
    out_bytes = sum(w[1] - w0[1] for w, w0 in zip(wire, wire0, strict=True))
    total = sum(written.values())
    forgotten = int(forget.stdout.split()[1]) if forget.stdout.split()[1:2] else 0
    kept = prints[0]["turns"] if prints else 0
    return {
        "devices": len(daemons),
        "turns_written": total,
        "turns_forgotten": forgotten,
        "write_s": round(writes_done - t0, 2),
        "converged": converged,
        "converge_s": round(converge_s, 2),
        "wire_bytes": out_bytes,
        "wire_bytes_per_turn": round(out_bytes / max(1, total), 1),
        "folder_bytes": sum(p.stat().st_size for p in daemons[0].folder.rglob("*.seg")),
        "turns_each": [p["turns"] for p in prints],
        "lost": max(0, total - forgotten - kept),
        "duplicated": max(p["turns"] - p["distinct"] for p in prints) if prints else 0,
        "identical": converged,
        "derived_cues_each": [p["cues"] for p in prints],
        "forget_set_each": [p["forgotten"] for p in prints],
        "join": join(daemons[0].folder, workdir / "joiner.db"),
    }


def _derive(db: Path, model: str) -> None:
    with open_store(Settings(db=db)) as store:
        sync_checks.bench_derive(store.conn, model)


async def _converge(dbs: list[Path], timeout_s: float) -> tuple[bool, list[dict[str, Any]]]:
    deadline = time.monotonic() + timeout_s
    prints: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        prints = [fingerprint(db) for db in dbs]
        if all(p == prints[0] for p in prints):
            return True, prints
        await anyio.sleep(1.0)
    return False, prints


def join(folder: Path, db: Path) -> dict[str, Any]:
    """A new device folds the whole folder into an empty store: wall and CPU time."""
    with open_store(Settings(db=db)) as store:
        c0, t0 = time.process_time(), time.perf_counter()
        done = fold(store, folder, Keyring())
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    applied: Applied = done.applied
    return {
        "turns": applied.turns,
        "derived": applied.derived,
        "seconds": round(wall, 2),
        "turns_per_s": round(applied.turns / wall, 1) if wall else 0.0,
        "cpu_ms_per_turn": round(1000 * cpu / max(1, applied.turns), 2),
    }
