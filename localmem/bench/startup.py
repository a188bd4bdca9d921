"""``localmem bench startup``: what a user waits for, from the shell to the process's exit.

Each case is a real ``localmem`` process (the console script next to this interpreter),
timed from start to exit: wall time, and its CPU time (user + system, from
``RUSAGE_CHILDREN``: less sensitive to a shared machine's load than wall time). The
cases run round-robin, one process each per round, so a change in the machine's load
touches them all alike; p50 / p95 are over ``runs`` rounds.

- ``help``: ``localmem --help``;
- ``query``: ``localmem query Q`` read in-process (no resident process of the store);
- ``query-server``: the same while ``localmem serve --transport socket`` holds the store
  (the fast entry: the command line sent raw, ``localmem.resident.quick``);
- ``query-server-full``: the same through the full CLI (``localmem.cli.main`` as the console
  script ran it before the fast entry: argparse, apsw and the settings loaded, then the
  context asked of the server, op ``context``), for the ratio in one run;
- ``recall`` / ``recall-server``: the hook entry point (``localmem recall``, a JSON payload on
  stdin), in-process and through the server;
- ``query-daemon``: what a user gets by default (``query.daemon_idle``), two rows:
  ``query-daemon-first``, the first query on a store no process serves (read in-process, then
  the daemon started: a fork and exec), and ``query-daemon-later``, the next query, answered
  by that daemon once it serves and has warmed up (its start-up, ``daemon_ready_p50_ms`` from
  the first query's exit, and its warm-up, ``daemon_warm_p50_ms``, are waited for untimed); the daemon is stopped after each round, so every round's
  first query finds none. ``served``: the later runs timed while that daemon answered on
  the socket;
- ``ingest``: ``localmem ingest`` of a one-turn JSONL file (a new turn each run: it is
  embedded and written);
- ``query-nocache``: ``query`` in-process with an empty model cache (a machine's first
  start: the embedding session is built and saved, ``localmem.models.onnx_cache``).

Every case but ``query-daemon`` runs with ``LOCALMEM_QUERY_DAEMON_IDLE=0``: an in-process
query or recall measures the in-process path and leaves no daemon behind.

The store (``--store``, else a copy of the bundled sample conversation in the workdir)
is read into the page cache first. Before timing, localmem's bytecode is compiled when
it is missing (an editable checkout run with ``PYTHONDONTWRITEBYTECODE`` has none; a wheel
install compiles at install time): ``compiled`` in the result says whether it was.
"""

from __future__ import annotations

import compileall
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import localmem
from localmem.bench import pagecache
from localmem.bench.startup_daemon import DAEMON_ROWS, Daemon, one_round
from localmem.resident import wire
from localmem.resident.listen import answers

CASES = (
    "help",
    "query",
    "query-server",
    "query-server-full",
    "recall",
    "recall-server",
    "query-daemon",
    "ingest",
    "query-nocache",
)
# The console script as it was before the fast entry (pip's template: re, then the CLI's main).
FULL_CLI = "import re, sys; from localmem.cli import main; sys.exit(main())"
QUESTIONS = (
    "Which shoes did Maya switch to?",
    "Who goes to Lisbon with Maya?",
    "What did the physio say about the knee?",
    "When is the product launch?",
)
COLUMNS = ["case", "runs", "p50_ms", "p95_ms", "mean_ms", "cpu_p50_ms", "served"]


def command() -> list[str]:
    """How a user starts localmem here: the console script beside this interpreter."""
    script = Path(sys.executable).with_name("localmem")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "localmem"]


def compile_package() -> bool:
    """Compile localmem's bytecode where it is missing; True when anything was written."""
    root = Path(localmem.__file__).parent
    stale = [p for p in root.rglob("*.py") if not _has_pyc(p)]
    if stale:
        compileall.compile_dir(str(root), quiet=1)
    return bool(stale)


def _has_pyc(py: Path) -> bool:
    tag = sys.implementation.cache_tag
    return (py.parent / "__pycache__" / f"{py.stem}.{tag}.pyc").exists()


def run(
    workdir: Path,
    *,
    runs: int = 20,
    store: Path | None = None,
    cases: Sequence[str] = CASES,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    compiled = compile_package()
    cmd = command()
    db = store or workdir / "startup.db"
    base_env = {k: v for k, v in os.environ.items() if k not in ("LOCALMEM_DB",)}
    base_env["LOCALMEM_QUERY_DAEMON_IDLE"] = "0"  # the in-process cases stay in-process, leave nothing behind
    # Three runtime dirs: the server and the "-server" cases meet in one; the in-process
    # cases look for the store's socket in another, empty one, so they read in-process; the
    # query-daemon case's own daemon serves in the third.
    # Short paths under the temp dir: a socket path must stay under ~100 bytes.
    run_root = Path(tempfile.mkdtemp(prefix="lm-"))
    run_dirs = {"server": run_root / "s", "alone": run_root / "a", "daemon": run_root / "d"}
    for d in run_dirs.values():
        d.mkdir(mode=0o700)
    envs = {k: {**base_env, "XDG_RUNTIME_DIR": str(d)} for k, d in run_dirs.items()}
    envs["daemon"]["LOCALMEM_QUERY_DAEMON_IDLE"] = "600"
    daemon = Daemon(db, run_dirs["daemon"])
    names = [row for case in cases for row in (DAEMON_ROWS if case == "query-daemon" else (case,))]
    if store is None and not db.exists():
        sample = Path(localmem.__file__).parent / "data" / "sample_conversation.jsonl"
        _check(subprocess.run([*cmd, "--db", str(db), "ingest", str(sample)], capture_output=True, env=base_env))
    pagecache.warm(db)
    times: dict[str, list[float]] = {c: [] for c in names}
    cpus: dict[str, list[float]] = {c: [] for c in names}
    served: dict[str, int] = {c: 0 for c in names}
    ready: list[float] = []
    warm: list[float] = []
    server = _Server(cmd, db, envs["server"], workdir / "server.log") if any("-server" in c for c in cases) else None
    try:
        if server is not None:
            server.start()
        for r in range(runs):
            for case in cases:
                if case == "query-daemon":
                    one_round(daemon, cmd, QUESTIONS, r, envs["daemon"], _timed, times, cpus, served, ready, warm)
                    continue
                env = envs["server" if "-server" in case else "alone"]
                argv, stdin, env = _case(case, cmd, db, r, workdir, env)
                wall, cpu, out = _timed(argv, stdin, env)
                times[case].append(wall)
                cpus[case].append(cpu)
                if case.startswith("recall") and json.loads(out).get("via") == "resident":
                    served[case] += 1
            log(f"round {r + 1}/{runs}")
    finally:
        if server is not None:
            server.stop()
        daemon.stop()
        for p in [*workdir.glob("cache-*"), run_root]:
            shutil.rmtree(p, ignore_errors=True)
    rows = []
    for case in names:
        t = sorted(times[case])
        rows.append(
            {
                "case": case,
                "runs": len(t),
                "p50_ms": round(statistics.median(t), 1),
                "p95_ms": round(t[min(len(t) - 1, round(0.95 * (len(t) - 1)))], 1),
                "mean_ms": round(statistics.fmean(t), 1),
                "cpu_p50_ms": round(statistics.median(cpus[case]), 1),
                "served": served[case] if case.startswith("recall") or case == DAEMON_ROWS[1] else None,
            }
        )
    return {
        "benchmark": "startup",
        "store": str(db),
        "compiled": compiled,
        "command": " ".join(cmd),
        "load": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "rows": rows,
        "daemon_ready_p50_ms": round(statistics.median(ready), 1) if ready else None,
        "daemon_warm_p50_ms": round(statistics.median(warm), 1) if warm else None,
    }


def _case(
    case: str, cmd: list[str], db: Path, r: int, workdir: Path, env: dict[str, str]
) -> tuple[list[str], str | None, dict[str, str]]:
    q = QUESTIONS[r % len(QUESTIONS)]
    if case == "help":
        return [*cmd, "--help"], None, env
    if case == "query-server-full":
        return [sys.executable, "-c", FULL_CLI, "--db", str(db), "query", q], None, env
    if case.startswith("query"):
        args = [*cmd, "--db", str(db), "query", q]
        if case == "query-nocache":
            fresh = Path(tempfile.mkdtemp(prefix="cache-", dir=workdir))
            return args, None, {**env, "XDG_CACHE_HOME": str(fresh)}
        return args, None, env
    if case.startswith("recall"):
        return [*cmd, "--db", str(db), "recall", "--json"], json.dumps({"prompt": q}), env
    if case == "ingest":
        one = workdir / "one-turn.jsonl"
        line = {"speaker": "User", "text": f"Startup bench note {r} at {time.time_ns()}: remember the blue umbrella."}
        one.write_text(json.dumps(line) + "\n", "utf-8")
        return [*cmd, "--db", str(db), "ingest", str(one)], None, env
    raise ValueError(f"unknown case {case!r}")


def _timed(argv: list[str], stdin: str | None, env: dict[str, str]) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=600)
    wall = 1000 * (time.perf_counter() - t0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    _check(proc)
    cpu = 1000 * ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return wall, cpu, proc.stdout


def _check(proc: subprocess.CompletedProcess[Any]) -> None:
    if proc.returncode != 0:
        err = proc.stderr.decode() if isinstance(proc.stderr, bytes) else proc.stderr
        raise RuntimeError(f"{' '.join(map(str, proc.args))} exited {proc.returncode}: {err}")


class _Server:
    """``localmem serve --transport socket`` on the store, for the ``-server`` cases."""

    def __init__(self, cmd: list[str], db: Path, env: dict[str, str], log: Path) -> None:
        self.argv = [*cmd, "--db", str(db), "serve", "--transport", "socket"]
        self.log = log
        self.env = env
        self.db = db
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 300.0) -> None:
        with open(self.log, "wb") as err:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=subprocess.DEVNULL, stderr=err)
        path = wire.socket_path(self.db, Path(self.env["XDG_RUNTIME_DIR"]) / "localmem")
        if path is None:
            raise RuntimeError(f"no socket path for {self.db} (too long)")
        deadline = time.monotonic() + timeout
        while not answers(path):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the resident server did not start: {self.log.read_text('utf-8', 'replace')}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def table(result: dict[str, Any]) -> str:
    lines = [
        f"startup ({result['command']}; store {result['store']}; bytecode compiled now: {result['compiled']}; "
        f"load {result['load']}; wall ms from start to exit, cpu = user + system of the process)",
        " | ".join(f"{c:>17}" for c in COLUMNS),
        "-" * (20 * len(COLUMNS)),
    ]
    for r in result["rows"]:
        lines.append(" | ".join(f"{'-' if r[c] is None else r[c]!s:>17}" for c in COLUMNS))
    if result.get("daemon_ready_p50_ms") is not None:
        lines.append(
            f"query-daemon: the daemon served {result['daemon_ready_p50_ms']} ms and was warm "
            f"{result.get('daemon_warm_p50_ms')} ms (p50s) after the first query exited"
        )
    return "\n".join(lines)
