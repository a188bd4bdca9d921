"""``localmem bench crash``: kill -9 writers at random moments; nothing acknowledged is lost.

Rounds on one growing database file, cycling through three writers, each a real process:
- ``ingest``: ``localmem ingest`` of a new JSONL file, killed after a random delay. What
  it reported committed is its durable resume point (``ingest_files.resume_unit``):
  every line before it must be stored. Then the same ingest runs again to the end (a
  *resume*) and every line must be stored exactly once.
- ``mcp``: an MCP stdio server (``python -m mcp_server``) sent ``remember`` calls over
  the real protocol (newline-delimited JSON-RPC on its stdin/stdout) until it is killed,
  possibly in the middle of a call; every call that returned ids must be stored.
- ``worker``: the enrichment worker with the embedded model, killed mid-batch; its
  claimed jobs must be claimed again by the next worker (a *resume*), never lost.

After every round: acknowledged turns present, ``quick_check`` ok; at the end
``integrity_check`` and ``foreign_key_check``. Kill times come from ``seed``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import IO, Any, TypeVar

from localmem.bench.preamble import child_env, create_store, localmem_cmd, mcp_server_cmd, working_folder
from localmem.storage.bench import reads
from localmem.storage.engine import db

T = TypeVar("T")

PROTOCOL = "2025-06-18"


def _read(dbfile: Path, read: Callable[[db.Conn], T]) -> T:
    """``read`` on a connection of its own, closed after."""
    conn = db.connect(dbfile)
    try:
        return read(conn)
    finally:
        conn.close()


def _texts(dbfile: Path) -> Counter[str]:
    return _read(dbfile, reads.turn_text_counts)


def _kill_after(proc: subprocess.Popen[Any], delay: float) -> threading.Timer:
    def kill() -> None:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)

    timer = threading.Timer(delay, kill)
    timer.start()
    return timer


def _ingest_round(dbfile: Path, work: Path, r: int, rng: random.Random, acked: set[str]) -> dict[str, Any]:
    path = work / f"round{r}.jsonl"
    lines = [f"round {r} line {i}: the tide table said {i % 12} o'clock." for i in range(120)]
    with path.open("w", encoding="utf-8") as fh:
        for t in lines:
            fh.write(json.dumps({"text": t, "speaker": "log", "timestamp": "2024-06-01T09:00:00"}) + "\n")
    proc = subprocess.Popen(
        localmem_cmd(dbfile, "ingest", str(path), "--json"),
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    timer = _kill_after(proc, rng.uniform(0.3, 4.0))
    proc.wait()
    timer.cancel()
    killed = proc.returncode == -signal.SIGKILL
    done = _read(dbfile, lambda c: reads.resume_unit(c, str(path.resolve())))
    have = _texts(dbfile)
    lost_before_resume = sum(1 for t in lines[: int(done)] if have[t] == 0)
    # Resume: the same command again, to the end.
    again = subprocess.run(localmem_cmd(dbfile, "ingest", str(path), "--json"), env=child_env(), capture_output=True)
    have = _texts(dbfile)
    acked.update(lines)
    return {
        "killed": killed,
        "committed_at_kill": int(done),
        "lost": lost_before_resume + sum(1 for t in lines if have[t] == 0),
        "duplicated": sum(have[t] - 1 for t in lines if have[t] > 1),
        "resumed": again.returncode == 0,
    }


def _send(pipe: IO[bytes], msg: dict[str, Any]) -> None:
    pipe.write((json.dumps(msg) + "\n").encode())
    pipe.flush()


def _mcp_round(dbfile: Path, r: int, rng: random.Random, acked: set[str]) -> dict[str, Any]:
    proc = subprocess.Popen(
        mcp_server_cmd(dbfile),
        env=child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    timer: threading.Timer | None = None
    calls = ok = 0
    try:
        _send(
            proc.stdin,
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": {"name": "bench-crash", "version": "1"},
                },
            },
        )
        proc.stdout.readline()
        _send(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        timer = _kill_after(proc, rng.uniform(0.2, 3.0))
        while True:
            calls += 1
            texts = [f"round {r} call {calls} turn {j}: the kettle boiled at {j} minutes." for j in range(3)]
            _send(
                proc.stdin,
                {
                    "jsonrpc": "2.0",
                    "id": calls,
                    "method": "tools/call",
                    "params": {
                        "name": "remember",
                        "arguments": {
                            "turns": [{"text": t, "speaker": "Ana"} for t in texts],
                            "session": f"crash-{r}-{calls}",
                        },
                    },
                },
            )
            line = proc.stdout.readline()
            if not line:
                break  # killed
            reply = json.loads(line)
            result = reply.get("result") or {}
            if (
                reply.get("id") == calls
                and not result.get("isError")
                and result.get("structuredContent", {}).get("turn_ids")
            ):
                acked.update(texts)
                ok += 1
    except (BrokenPipeError, ValueError):
        pass
    finally:
        if timer is not None:
            timer.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return {"killed": proc.returncode == -signal.SIGKILL, "calls": calls, "acknowledged_calls": ok}


def _worker_round(dbfile: Path, rng: random.Random) -> dict[str, Any]:
    proc = subprocess.Popen(
        localmem_cmd(dbfile, "worker"), env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    timer = _kill_after(proc, rng.uniform(1.5, 6.0))
    proc.wait()
    timer.cancel()
    held = _read(dbfile, lambda c: reads.jobs_held_by_pid(c, proc.pid))
    return {"killed": proc.returncode == -signal.SIGKILL, "jobs_held_at_kill": int(held), "pid": proc.pid}


def run(*, rounds: int = 50, seed: int = 0, workdir: Path | None = None) -> dict[str, Any]:
    rng = random.Random(seed)
    with working_folder(workdir, "crash") as work:
        dbfile = work / "crash.db"
        create_store(dbfile)
        acked: set[str] = set()
        per_kind: dict[str, list[dict[str, Any]]] = {"ingest": [], "mcp": [], "worker": []}
        quick_failures = 0
        held_pids: list[tuple[int, int]] = []
        started = time.perf_counter()
        for r in range(rounds):
            kind = ("ingest", "mcp", "worker")[r % 3]
            if kind == "ingest":
                per_kind[kind].append(_ingest_round(dbfile, work, r, rng, acked))
            elif kind == "mcp":
                per_kind[kind].append(_mcp_round(dbfile, r, rng, acked))
            else:
                out = _worker_round(dbfile, rng)
                held_pids.append((out["pid"], out["jobs_held_at_kill"]))
                per_kind[kind].append(out)
            if _read(dbfile, reads.quick_check) != "ok":
                quick_failures += 1
        # A last worker pass reclaims what the last killed worker held.
        subprocess.run(localmem_cmd(dbfile, "worker", "--once"), env=child_env(), capture_output=True)
        still_held = sum(_read(dbfile, partial(reads.jobs_held_by_pid, pid=p)) for p, _n in held_pids)
        have = _texts(dbfile)
        integrity = _read(dbfile, reads.integrity_check)
        fk = _read(dbfile, reads.foreign_key_violations)
        ing, mcp, wrk = per_kind["ingest"], per_kind["mcp"], per_kind["worker"]
        return {
            "rounds": rounds,
            "kills": sum(1 for rows in per_kind.values() for x in rows if x["killed"]),
            "acknowledged_turns": len(acked),
            "acknowledged_lost": sum(1 for t in acked if have[t] == 0),
            "duplicated": sum(n - 1 for n in have.values() if n > 1),
            "ingest_rounds": len(ing),
            "ingest_killed_mid_file": sum(1 for x in ing if x["killed"] and x["committed_at_kill"] < 120),
            "ingest_resumed": sum(1 for x in ing if x["resumed"]),
            "mcp_rounds": len(mcp),
            "mcp_acknowledged_calls": sum(x["acknowledged_calls"] for x in mcp),
            "worker_rounds": len(wrk),
            "worker_jobs_held_at_kill": sum(x["jobs_held_at_kill"] for x in wrk),
            "worker_jobs_still_held_by_dead": still_held,
            "quick_check_failures": quick_failures,
            "integrity_check": integrity,
            "integrity_failures": int(integrity != "ok") + quick_failures,
            "foreign_key_violations": fk,
            "seconds": round(time.perf_counter() - started, 1),
        }


def print_report(result: dict[str, Any]) -> None:
    for key, value in result.items():
        print(f"{key:>32}: {value}")
