"""``localmem bench hooks``: the agents' hooks as the agents run them, on a large store,
and the prompt hook's relevance bar calibrated on data.

Latency (``run``): a synthetic store of N turns (``bench.synthetic``, the ``bench scale``
builder; its sessions spread over four project folders), then each hook as a fresh
``python -m localmem.hooks`` process with a Claude Code payload on stdin, timed from
``Popen`` to exit (process start, imports, the embedding model, the store, the work):
prompts (the bar at -1 so that each renders, replies and records what it injected: the
most a prompt hook does) and session starts on both paths, in-process (no resident
process; hooks start no daemon here) and through a ``localmem serve --transport socket``
already running (warmed by one untimed prompt and session start), then stops that ingest
one new exchange of a transcript. Beside them: the interpreter alone, and the hook module imported and its
``--help`` printed. The synthetic store's vectors are generated, not embedded, so the
replies' content means nothing here; the time is the point.

Calibration (``calibrate``): LoCoMo's conversations in one store (real vectors of the
embedder measured, the configured one by default);
each question asked once with its own conversation in scope (memory that bears on it
exists) and once with another conversation in scope (it does not); the best cosine of a
visible turn or sentence (``Context.stats["best_cosine"]``) for both, and for each bar
the share of each kind that would get memory, and how often the evidence is in what the
first kind gets.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localmem.bench import agent_logs, metrics, scale, synthetic
from localmem.config import Settings
from localmem.hooks import detach, status
from localmem.ingest import locomo as locomo_ingest
from localmem.memory import open_store
from localmem.models.registry import default_embedder
from localmem.resident import client, wire
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.bench import reads as bench_reads
from localmem.storage.bench import synthetic as bench_rows
from localmem.storage.engine import db

FOLDERS = ("/home/dev/shop", "/home/dev/etl", "/home/dev/site", "/home/dev/infra")
BARS = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LOCALMEM_MODEL"}
    env["LOCALMEM_HOOKS_DAEMON_IDLE"] = "0"  # the resident process is the bench's own (`_resident`), not a hook's
    # measure the work, not a deadline: the defaults would give up on a cold 100k store
    env.update(
        LOCALMEM_HOOKS_PROMPT_BAR="-1", LOCALMEM_HOOKS_PROMPT_DEADLINE="120", LOCALMEM_HOOKS_SESSION_DEADLINE="120"
    )
    env["LOCALMEM_HOOKS_INGEST_DEADLINE"] = "300"
    return env


@dataclass(frozen=True)
class _Run:
    wall: float  # seconds from Popen to exit
    cpu: float  # the process's user + system seconds: steadier than wall time on a loaded machine


def _timed(argv: list[str], payload: bytes, env: dict[str, str]) -> tuple[_Run, bytes]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, input=payload, capture_output=True, env=env, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    took = _Run(wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    if proc.returncode != 0:
        raise RuntimeError(f"{argv}: exit {proc.returncode}: {proc.stderr[-300:]!r}")
    return took, proc.stdout


def _stats(times: list[_Run], replies: int) -> dict[str, Any]:
    ms = sorted(t.wall * 1000 for t in times)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return {
        "runs": len(ms),
        "p50_ms": round(statistics.median(ms)),
        "p95_ms": round(p95),
        "max_ms": round(ms[-1]),
        "cpu_p50_ms": round(statistics.median(t.cpu * 1000 for t in times)),
        "replied": replies,
    }


def run(
    work: Path, turns: int = 100_000, prompts: int = 40, starts: int = 10, stops: int = 5, embedder: str = "default"
) -> dict[str, Any]:
    """The hooks timed on ``hooks-<turns>.db`` in ``work``, built with ``embedder`` when it is
    not there (a store kept from an earlier run needs the embedder it was built with; the
    hook and server processes follow the store's record)."""
    settings = Settings(db=work / f"hooks-{turns}.db", embedder=embedder)
    built = synthetic.build(settings.db, turns, default_embedder(settings.embedder), settings)
    conn = db.connect(settings.db)
    try:
        bench_rows.spread_projects(conn, FOLDERS)
    finally:
        conn.close()
    env = _env()
    py = [sys.executable]
    hook = [*py, "-m", "localmem.hooks", "--db", str(settings.db)]
    out: dict[str, Any] = {"turns": turns, "build_s": round(built, 1)}
    out["python_start"] = _stats([_timed([*py, "-c", "pass"], b"", env)[0] for _ in range(5)], 0)
    out["hook_import"] = _stats([_timed([*hook, "--help"], b"", env)[0] for _ in range(5)], 0)
    questions = scale.queries_for(settings.db, prompts)
    out["in_process"] = _recall_rounds(settings.db, hook, env, questions, starts)
    with _resident(settings.db, env) as started_s:
        _recall_rounds(settings.db, hook, env, questions[:1], 1)  # the server's first read loads its mirrors
        out["resident"] = _recall_rounds(settings.db, hook, env, questions, starts)
        out["resident"]["server_ready_s"] = round(started_s, 1)
    out["stop"] = _stops(work, hook, env, stops, foreground=False)
    out["stop_foreground"] = _stops(work, hook, env, stops, foreground=True)
    return out


def _stops(work: Path, hook: list[str], env: dict[str, str], stops: int, *, foreground: bool) -> dict[str, Any]:
    """Stops that each ingest one new exchange: the agent's wait (the process, start to
    exit) and, for the background path, the time until the worker has counted the run."""
    log = work / ("transcript-fg.jsonl" if foreground else "transcript.jsonl")
    session = "5e551011-0000-4000-8000-00000000000" + ("2" if foreground else "1")
    log.write_text("", "utf-8")
    if foreground:
        env = {**env, detach.FOREGROUND_ENV: "1"}
    store = Path(hook[hook.index("--db") + 1])
    times: list[_Run] = []
    done_s: list[float] = []
    for i in range(stops):
        with log.open("a", encoding="utf-8") as fh:
            fh.write("\n".join(agent_logs.exchange(session, FOLDERS[0], i)) + "\n")
        payload = {"session_id": session, "transcript_path": str(log), "cwd": FOLDERS[0]}
        runs = status.runs(store, "stop")
        t0 = time.perf_counter()
        times.append(_timed([*hook, "stop", "--client", "claude-code"], json.dumps(payload).encode(), env)[0])
        _settle(store, "stop", runs + 1, 600)
        done_s.append(time.perf_counter() - t0)
    got = _stats(times, 0)
    got["ingested_p50_ms"] = round(statistics.median(done_s) * 1000)
    return got


def locked_stops(work: Path, exchanges: int = 4_000, stops: int = 6, hold_s: float = 10.0) -> dict[str, Any]:
    """The agent's side of Stops that meet a held write lock on a long transcript:
    ``exchanges`` exchanges (5 lines each: 4,000 is a 20,000-line transcript) and ``stops``
    Stop hooks fired while another connection holds the store's write lock for
    ``hold_s`` seconds; each hook's wait, and the time from the lock's release until every
    run is counted and every turn stored."""
    store = work / "locked.db"
    for suffix in ("", "-wal", "-shm", "-hooks.json"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    log = work / "long.jsonl"
    session = "5e551011-0000-4000-8000-000000000003"
    log.write_text("\n".join(agent_logs.transcript(session, FOLDERS[0], 1)) + "\n", "utf-8")
    env = _env()
    hook = [sys.executable, "-m", "localmem.hooks", "--db", str(store), "stop", "--client", "claude-code"]
    payload = json.dumps({"session_id": session, "transcript_path": str(log), "cwd": FOLDERS[0]}).encode()
    _timed(hook, payload, env)
    _settle(store, "stop", 1, 600)  # the store exists, with the first exchange
    with log.open("a", encoding="utf-8") as fh:
        for i in range(1, exchanges):
            fh.write("\n".join(agent_logs.exchange(session, FOLDERS[0], i)) + "\n")
    holder = db.connect(store)
    try:
        with db.transaction(holder):  # another process's write lock, for hold_s seconds
            waits = [_timed(hook, payload, env)[0] for _ in range(stops)]
            time.sleep(max(0.0, hold_s - sum(w.wall for w in waits)))
            counted_in_lock = status.runs(store, "stop") - 1
        released = time.perf_counter()
        _settle(store, "stop", 1 + stops, 900)
        after_s = time.perf_counter() - released
        stored = bench_reads.count_turns(holder)
    finally:
        holder.close()
    got = _stats(waits, 0)
    ran = status.read(store)
    return {
        **got,
        "lines": 5 * exchanges,
        "held_s": hold_s,
        "counted_while_locked": counted_in_lock,
        "all_ingested_after_release_s": round(after_s, 1),
        "turns_stored": stored,
        "turns_expected": len(agent_logs.expected_turns(exchanges)),
        "failures": ran.get("failures") or {},
    }


def _settle(store: Path, event: str, runs: int, timeout: float) -> None:
    if status.wait_for_runs(store, event, runs, timeout, poll=0.01) < runs:
        raise RuntimeError(f"{event}: run {runs} was never counted")


def _recall_rounds(
    store: Path, hook: list[str], env: dict[str, str], questions: list[str], starts: int
) -> dict[str, Any]:
    """Prompt and session-start hooks timed as processes; ``via_resident`` counts the runs
    the resident process answered (the hook's status says which path it took)."""
    out: dict[str, Any] = {}
    for event, n in (("prompt", len(questions)), ("session-start", starts)):
        times: list[_Run] = []
        replies, served = 0, 0
        for i in range(n):
            # a session of its own per run: a prompt does not repeat what its session was given
            session = f"{event}-{i}-{time.monotonic_ns()}"
            payload: dict[str, str] = {"session_id": session, "cwd": FOLDERS[i % len(FOLDERS)]}
            payload.update({"prompt": questions[i]} if event == "prompt" else {"source": "startup"})
            took, reply = _timed([*hook, event, "--client", "claude-code"], json.dumps(payload).encode(), env)
            times.append(took)
            replies += bool(reply.strip())
            served += (status.read(store).get("last_run") or {}).get("via") == "resident"
        out[event.replace("-", "_")] = _stats(times, replies) | {"via_resident": served}
    return out


@contextmanager
def _resident(store: Path, env: dict[str, str]) -> Iterator[float]:
    """``localmem serve --transport socket`` on ``store`` while the block runs; yields the
    seconds it took to answer on its socket."""
    path = wire.socket_path(store)
    if path is None:
        raise RuntimeError(f"{store}: no socket path (the runtime folder's path is too long)")
    argv = [sys.executable, "-m", "localmem", "--db", str(store), "serve", "--transport", "socket"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        while not client.answers(path):
            if proc.poll() is not None or time.perf_counter() - t0 > 600:
                raise RuntimeError(f"the resident server did not start: {proc.communicate(timeout=5)[1][-300:]!r}")
            time.sleep(0.1)
        yield time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(60)


def calibrate(data: Path, work: Path, budget: int = 300, embedder: str = "default") -> dict[str, Any]:
    """The bar's trade-off on LoCoMo (module docstring), with the embedder ``embedder``
    names (a store of its own per embedder: ``calibrate-<model id>.db``)."""
    samples = metrics.read_benchmark(data, "locomo")
    emb = default_embedder(embedder)
    name = emb.model_id.replace("/", "_").replace("@", "-")
    settings = Settings(db=work / f"calibrate-{name}.db", embedder=embedder)
    sources = [f"locomo:{s['sample_id']}" for s in samples]
    with open_store(settings, embedder=emb) as store:
        for sample in samples:
            store.write_sessions(list(locomo_ingest.parse(data, sample=str(sample["sample_id"]))))
        pos: list[tuple[float, bool]] = []
        neg: list[float] = []
        for k, sample in enumerate(samples):
            other = sources[(k + 1) % len(sources)]
            for qa in sample.get("qa", []):
                evidence, _bad = metrics.clean_evidence(qa.get("evidence") or [])
                if qa.get("category") == 5 or not evidence:
                    continue
                own = reconstruct(store, str(qa["question"]), budget, scope=sources[k])
                pos.append((float(own.stats.get("best_cosine", 0.0)), metrics.found_fraction(own, evidence) == 1.0))
                away = reconstruct(store, str(qa["question"]), budget, scope=other)
                neg.append(float(away.stats.get("best_cosine", 0.0)))
    rows = []
    for bar in BARS:
        given = [found for c, found in pos if c >= bar]
        rows.append(
            {
                "bar": bar,
                "relevant_given": round(100 * len(given) / len(pos), 1),
                "unrelated_given": round(100 * sum(c >= bar for c in neg) / len(neg), 1),
                "evidence_in_given": round(100 * sum(given) / max(len(given), 1), 1),
            }
        )
    return {
        "embedder": emb.model_id,
        "questions": len(pos),
        "budget": budget,
        "median_cosine_relevant": round(statistics.median(c for c, _ in pos), 3),
        "median_cosine_unrelated": round(statistics.median(neg), 3),
        "rows": rows,
    }
