"""``localmem bench scale``: reconstruct latency and memory on synthetic stores of N turns.

Per size: build a synthetic store fast (``localmem/bench/synthetic.py``: bulk SQL, no
model), then start a FRESH process that opens it the way every entry point does, loads
the real query embedder, answers one query (which loads the vector mirrors: ``load_s``)
and then ``queries`` more with ``reconstruct(store, q, 2000)``, timed with the query
embedding included. That process reports its peak resident memory (``VmHWM``), so
``rss_mb`` is what one MCP server or ``localmem query`` holds after serving queries on a
store of that size, and ``mirror_mb`` how much of it the float32 vector mirrors are.
"""

from __future__ import annotations

import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from localmem.bench import synthetic
from localmem.config import Settings, load_settings
from localmem.models.embedding import Embedder
from localmem.models.registry import default_embedder
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage import db
from localmem.storage.store import Store

COLUMNS = ["turns", "cues", "p50_ms", "p95_ms", "load_s", "rss_mb", "mirror_mb", "db_mb", "build_s"]


def queries_for(path: Path, n: int, seed: int = 11) -> list[str]:
    """Questions built from words of random stored turns, naming their speaker (as a
    user asks about something said), read back from the store itself."""
    conn = db.connect(path, readonly=True)
    try:
        top = int(conn.one("SELECT max(id) FROM turns")[0] or 0)
        rng = random.Random(seed)
        out = []
        for _ in range(n):
            row = conn.one("SELECT speaker, text FROM turns WHERE id >= ? LIMIT 1", (rng.randint(1, top),))
            words = str(row[1]).replace(".", "").split()
            out.append(f"What did {row[0]} say about {' '.join(rng.sample(words, min(4, len(words))))}?")
        return out
    finally:
        conn.close()


def serve(path: Path, queries: list[str], budget: int, memory_cap_mb: int = 0) -> dict[str, Any]:
    """Open the store at ``path`` as a fresh process would and answer ``queries``; timings
    and this process's peak memory. Run in a child process (``_child``)."""
    if memory_cap_mb:  # a failed allocation rather than the kernel's OOM killer on a shared machine
        cap = memory_cap_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    settings = load_settings(db=path)
    embedder = default_embedder(settings.embedder)
    with Store(path, embedder=embedder, settings=settings) as store:
        t0 = time.perf_counter()
        reconstruct(store, queries[0], budget)  # loads the mirrors and the model
        load_s = time.perf_counter() - t0
        times = []
        for q in queries[1:]:
            t1 = time.perf_counter()
            reconstruct(store, q, budget)
            times.append(1000 * (time.perf_counter() - t1))
        view = store.mirrors()
        mirror = sum(
            v.nbytes for m in (view.turn, view.cue) for v in vars(m).values() if isinstance(v, np.ndarray)
        ) + int(view.cue_pos.nbytes)
        times.sort()
        return {
            "p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(times[int(0.95 * (len(times) - 1))], 1),
            "load_s": round(load_s, 1),
            "rss_mb": round(_peak_rss_mb(), 0),
            "mirror_mb": round(mirror / 2**20, 0),
            "queries": len(times),
        }


def _peak_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _child() -> None:
    args = json.loads(sys.stdin.read())
    print(json.dumps(serve(Path(args["db"]), args["queries"], args["budget"], args["memory_cap_mb"])))


def serve_in_child(path: Path, queries: list[str], budget: int, memory_cap_mb: int, timeout: float) -> dict[str, Any]:
    code = "from localmem.bench.scale import _child; _child()"
    payload = json.dumps({"db": str(path), "queries": queries, "budget": budget, "memory_cap_mb": memory_cap_mb})
    proc = subprocess.run(
        [sys.executable, "-c", code], input=payload, capture_output=True, text=True, timeout=timeout, env=os.environ
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"query process exited {proc.returncode}: {' | '.join(tail)}"}
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def run(
    sizes: Sequence[int],
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    queries: int = 100,
    log: Callable[[str], None] = lambda _m: None,
    *,
    budget: int = 2000,
    memory_cap_mb: int = 0,
    timeout: float = 3600.0,
) -> dict[str, Any]:
    rows = []
    for n in sizes:
        path = workdir / f"scale-{n}.db"
        build_s = synthetic.build(path, n, embedder, settings, log=log)
        log(f"{n}: built in {build_s:.0f} s" if build_s else f"{n}: kept the store built before")
        conn = db.connect(path, readonly=True)
        try:
            cues = int(conn.one("SELECT count(*) FROM cues")[0])
        finally:
            conn.close()
        size = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
        row: dict[str, Any] = {"turns": n, "cues": cues, "db_mb": round(size / 2**20), "build_s": round(build_s, 1)}
        row.update(serve_in_child(path, queries_for(path, queries + 1), budget, memory_cap_mb, timeout))
        rows.append(row)
        log(f"{n}: {row}")
    return {
        "benchmark": "scale",
        "embedder": embedder.model_id,
        "generator": synthetic.GENERATOR,
        "budget": budget,
        "queries": queries,
        "rows": rows,
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"scale ({result['embedder']}; synthetic {result['generator']} stores; reconstruct at {result['budget']} "
        f"tokens, query embedding included; {result['queries']} queries in a fresh process; rss = its peak)",
        " | ".join(f"{c:>9}" for c in COLUMNS),
        "-" * (12 * len(COLUMNS)),
    ]
    for r in result["rows"]:
        lines.append(" | ".join(f"{r.get(c, '-')!s:>9}" for c in COLUMNS))
        if "error" in r:
            lines.append(f"  {r['turns']}: {r['error']}")
    return "\n".join(lines)
