"""``localmem bench scale``: reconstruct latency and memory on synthetic stores of N turns.

Per size: build a synthetic store fast (``localmem/bench/synthetic.py``: bulk SQL, no
model), then start a FRESH process that opens it the way every entry point does, loads
the real query embedder, answers one query (which loads the vector mirrors: ``load_s``)
and then ``queries`` more with ``reconstruct(store, q, 2000)``, timed with the query
embedding included. That process reports its memory from ``/proc/self/status``:
``rss_mb`` its peak (``VmHWM``): what one MCP server or ``localmem query`` holds after
serving queries; ``idle_mb`` its resident set after opening the store and answering the
first query, before the timed ones (an idle server); ``anon_mb`` / ``file_mb`` its
private memory (``RssAnon``: heap, arrays, the model's tensors) and its file-backed
pages (``RssFile``: mapped files, shared with every process mapping the same file)
after the timed queries. With several processes on one store, ``anon_mb`` is what each
adds. ``mirror_mb`` is what the in-memory vector mirrors take of it.

Each query's time is split by stage (medians, ms): ``embed`` the query embedding,
``lexical`` the FTS5 rankings, ``dense`` the rest of the ranked lists (vector search),
``features`` the scorer's inputs for the pool, ``pool`` the rest of the candidate pool
(mirror sync, neighbourhood), ``pack`` scoring, packing, CABLE and rows. The stages are
timed by wrapping the read path's functions in the query process (:class:`Stages`);
a function that is not there (renamed) leaves its stage out.

Each size is served once per page-cache mode (``cache``, :mod:`localmem.bench.pagecache`):
``warm`` reads the store file into the OS page cache first, ``cold`` evicts it, ``as-is``
leaves it; ``cached_pct`` is the share of the file's pages cached just before the query
process starts.

``mcp_idle_mb`` (once per size, on its first row; ``--no-mcp`` skips it) is the
resident memory of a fresh MCP server on the store after 5 ``reconstruct`` calls and
3 s idle (:mod:`localmem.bench.mcp_memory`): the query process's figure plus the MCP
SDK and the server's own state.
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

from localmem.bench import mcp_memory, pagecache, procmem, synthetic
from localmem.config import Settings, load_settings
from localmem.models.embedding import Embedder
from localmem.models.registry import default_embedder
from localmem.retrieval import pool as pool_mod
from localmem.retrieval import reconstruct as reconstruct_mod
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.bench import reads
from localmem.storage.engine import db
from localmem.storage.reads import queries as queries_mod
from localmem.storage.write.store import Store

COLUMNS = [
    "turns",
    "cache",
    "cached_pct",
    "cues",
    "p50_ms",
    "p95_ms",
    "load_s",
    "rss_mb",
    "idle_mb",
    "anon_mb",
    "file_mb",
    "mirror_mb",
    "mcp_idle_mb",
    "db_mb",
    "build_s",
]
STAGES = ["embed", "lexical", "dense", "features", "pool", "pack"]


def queries_for(path: Path, n: int, seed: int = 11) -> list[str]:
    """Questions built from words of random stored turns, naming their speaker (as a
    user asks about something said), read back from the store itself."""
    conn = db.connect(path, readonly=True)
    try:
        top = reads.max_turn_id(conn)
        rng = random.Random(seed)
        out = []
        for _ in range(n):
            turn = reads.turn_from(conn, rng.randint(1, top))
            words = turn.text.replace(".", "").split()
            out.append(f"What did {turn.speaker} say about {' '.join(rng.sample(words, min(4, len(words))))}?")
        return out
    finally:
        conn.close()


def serve(path: Path, queries: list[str], budget: int, memory_cap_mb: int = 0) -> dict[str, Any]:
    """Open the store at ``path`` as a fresh process would and answer ``queries``; timings
    and this process's memory. Run in a child process (``_child``)."""
    if memory_cap_mb:  # a failed allocation rather than the kernel's OOM killer on a shared machine
        cap = memory_cap_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    settings = load_settings(db=path)
    embedder = default_embedder(settings.embedder)
    with Store(path, embedder=embedder, settings=settings) as store:
        stages = Stages(store)
        t0 = time.perf_counter()
        reconstruct(store, queries[0], budget)  # loads the mirrors and the model
        load_s = time.perf_counter() - t0
        idle = procmem.status_mb()
        times = []
        stages.reset()
        for q in queries[1:]:
            t1 = time.perf_counter()
            reconstruct(store, q, budget)
            times.append(1000 * (time.perf_counter() - t1))
            stages.next_query()
        view = store.mirrors()
        nbytes = getattr(view, "nbytes", None)
        mirror = int(nbytes()) if callable(nbytes) else sum(a.nbytes for a in _arrays(view))
        times.sort()
        after = procmem.status_mb()
        return {
            "p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(times[int(0.95 * (len(times) - 1))], 1),
            "load_s": round(load_s, 1),
            "rss_mb": round(after.get("VmHWM", _peak_rss_mb())),
            "idle_mb": round(idle.get("VmRSS", 0)),
            "anon_mb": round(after.get("RssAnon", 0)),
            "file_mb": round(after.get("RssFile", 0)),
            "mirror_mb": round(mirror / 2**20, 1),
            "queries": len(times),
            "stages_ms": stages.medians(),
        }


def _arrays(obj: object, depth: int = 0) -> list[np.ndarray]:
    """The numpy arrays an object holds (in its attributes, down to three levels)."""
    if isinstance(obj, np.ndarray):
        return [obj]
    if depth > 2 or not hasattr(obj, "__dict__"):
        return []
    return [a for v in vars(obj).values() for a in _arrays(v, depth + 1)]


class Stages:
    """Per-query time of the read path's stages, by wrapping its functions in this
    process: ``store.embedder.embed``, ``queries.lexical``, ``pool._signals`` (lexical
    and dense lists), ``pool.features``, ``reconstruct.candidate_pool`` (the query's
    embedding and all of these) and ``reconstruct.assemble``. A stage's time is its
    function's less the stages inside."""

    def __init__(self, store: Store) -> None:
        self.now: dict[str, float] = {}
        self.per_query: list[dict[str, float]] = []
        self.wrapped: set[str] = set()
        self._wrap(store.embedder, "embed", "embed")
        self._wrap(queries_mod, "lexical", "lexical")
        self._wrap(pool_mod, "_signals", "signals")
        for name in ("features", "_features"):  # the name pool.py calls them by
            self._wrap(pool_mod, name, "features")
        self._wrap(reconstruct_mod, "candidate_pool", "pool_all")
        self._wrap(reconstruct_mod, "assemble", "pack")

    def _wrap(self, owner: object, name: str, stage: str) -> None:
        fn = getattr(owner, name, None)
        if not callable(fn) or stage in self.wrapped:
            return
        self.wrapped.add(stage)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.now[stage] = self.now.get(stage, 0.0) + 1000 * (time.perf_counter() - t)

        setattr(owner, name, timed)

    def reset(self) -> None:
        self.now, self.per_query = {}, []

    def next_query(self) -> None:
        n = self.now
        out: dict[str, float] = {
            k: n.get(k, 0.0) for k in ("embed", "lexical", "features", "pack") if k in self.wrapped
        }
        if "signals" in self.wrapped:
            out["dense"] = n.get("signals", 0.0) - out.get("lexical", 0.0)
        if "pool_all" in self.wrapped:
            inner = n.get("signals", out.get("lexical", 0.0)) + out.get("features", 0.0) + out.get("embed", 0.0)
            out["pool"] = n.get("pool_all", 0.0) - inner
        self.per_query.append(out)
        self.now = {}

    def medians(self) -> dict[str, float]:
        keys = [k for k in STAGES if self.per_query and all(k in q for q in self.per_query)]
        return {k: round(statistics.median(q[k] for q in self.per_query), 1) for k in keys}


def _peak_rss_mb() -> float:
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
    cache: Sequence[str] = ("warm", "cold"),
    mcp: bool = True,
) -> dict[str, Any]:
    """Per size, build (or keep) the store, then serve it once per cache mode in ``cache``,
    in that order: one row per size and mode."""
    rows = []
    for n in sizes:
        path = workdir / f"scale-{n}.db"
        build_s = synthetic.build(path, n, embedder, settings, log=log)
        log(f"{n}: built in {build_s:.0f} s" if build_s else f"{n}: kept the store built before")
        conn = db.connect(path, readonly=True)
        try:
            cues = reads.count_cues(conn)
        finally:
            conn.close()
        size = sum(p.stat().st_size for p in pagecache.files(path))
        asked = queries_for(path, queries + 1)  # reads the store: before its cache state is set
        for mode in cache:
            pagecache.prepare(path, mode)
            row: dict[str, Any] = {
                "turns": n,
                "cache": mode,
                "cached_pct": pagecache.cached_pct(path),
                "cues": cues,
                "db_mb": round(size / 2**20),
                "build_s": round(build_s, 1),
            }
            row.update(serve_in_child(path, asked, budget, memory_cap_mb, timeout))
            if mcp and mode == cache[0]:
                try:
                    row.update(mcp_memory.idle_server_mb(path, asked[:5]))
                except Exception as exc:  # the row keeps its other figures; the failure is shown
                    row["mcp_error"] = f"MCP server: {exc}"
            rows.append(row)
            log(f"{n} ({mode}): {row}")
    return {
        "benchmark": "scale",
        "embedder": embedder.model_id,
        "generator": synthetic.GENERATOR,
        "budget": budget,
        "queries": queries,
        "cache": list(cache),
        "rows": rows,
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"scale ({result['embedder']}; synthetic {result['generator']} stores; reconstruct at {result['budget']} "
        f"tokens, query embedding included; {result['queries']} queries in a fresh process; rss = its peak, "
        "idle = after the first query, anon/file = private / file-backed after the queries; mcp_idle = an MCP "
        "server after 5 calls and 3 s idle; cache = page-cache "
        "state set before the process starts, cached_pct = share of the db file's pages cached then)",
        " | ".join(f"{c:>9}" for c in COLUMNS),
        "-" * (12 * len(COLUMNS)),
    ]
    for r in result["rows"]:
        lines.append(" | ".join(f"{_cell(r.get(c))!s:>9}" for c in COLUMNS))
        for key in ("error", "mcp_error"):
            if key in r:
                lines.append(f"  {r['turns']} ({r.get('cache', '-')}): {r[key]}")
    lines += ["", "median ms per query by stage", " | ".join(f"{c:>9}" for c in ["turns", "cache", *STAGES])]
    for r in result["rows"]:
        st = r.get("stages_ms", {})
        cells = [r["turns"], r.get("cache", "-"), *(st.get(k, "-") for k in STAGES)]
        lines.append(" | ".join(f"{v!s:>9}" for v in cells))
    return "\n".join(lines)


def _cell(value: object) -> object:
    return "-" if value is None else value
