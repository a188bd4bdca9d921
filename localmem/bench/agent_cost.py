"""``localmem bench agent``: what localmem costs a real agent, per turn, on a large store.

The real Claude Code CLI (``claude -p``, from npm) runs offline against a loopback stand-in
of the Messages API (``bench.agent_apis``), in a temporary home and a project folder, on a
synthetic store of N turns (``bench.synthetic``, as ``bench hooks`` builds it; the
project folder is one of its four projects, so its session starts and prompts find
memory). Each round runs one turn without localmem and one with its hooks installed by
``localmem hooks install`` (the two settings files swapped in turn, so drift in the
machine's load touches both alike), each timed from the CLI's start to its exit: what a
person waits for. A turn with hooks runs SessionStart, UserPromptSubmit, Stop and
SessionEnd (``-p`` is a whole session); the first, untimed, starts the resident daemon, as
a person's first turn of the day would.

Reported: each side's median and p95, and the added time per turn: the median and p95 of
the paired differences; then how many of the turns' Stops the background worker counted
(their ingest is done after the agent has moved on: ``hooks.background``).

Nothing here fakes localmem: the hooks are the installed entries, the store a real one; the
model is the boundary (the stand-in answers one fixed sentence).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from localmem.bench import scale, synthetic
from localmem.bench.agent_apis import StandIn
from localmem.config import Settings
from localmem.hooks import status
from localmem.models.registry import default_embedder
from localmem.storage.bench import synthetic as bench_rows
from localmem.storage.engine import db

NPM = "@anthropic-ai/claude-code@2.1.337"
DROP = ("ANTHROPIC_", "CLAUDE_", "LOCALMEM_", "XDG_")  # the person's own setup would point the CLI elsewhere
REPLY = "Noted; I will keep that in mind for the next step."


def find_cli(given: Path | None) -> Path:
    """The ``claude`` command: ``given``, else on PATH, else the repository's ``.ci/node``."""
    if given is not None:
        if not given.is_file():
            raise FileNotFoundError(f"{given}: no such file (the claude command: npm install {NPM})")
        return given
    found = shutil.which("claude")
    if found:
        return Path(found)
    repo = Path(__file__).resolve().parents[2] / ".ci" / "node" / "node_modules" / ".bin" / "claude"
    if repo.exists():
        return repo
    raise FileNotFoundError(f"no `claude` command: npm install {NPM}, then --cli PATH")


def run(cli: Path, work: Path, turns: int = 100_000, rounds: int = 20, embedder: str = "default") -> dict[str, Any]:
    """The bench (module docstring) with the CLI at ``cli``, its files in ``work``."""
    home, project = work / "home", work / "project"
    project.mkdir(parents=True, exist_ok=True)
    settings = Settings(db=work / f"agent-{turns}.db", embedder=embedder)
    built = synthetic.build(settings.db, turns, default_embedder(settings.embedder), settings)
    conn = db.connect(settings.db)
    try:
        bench_rows.spread_projects(conn, (str(project), "/home/dev/etl", "/home/dev/site", "/home/dev/infra"))
    finally:
        conn.close()
    prompts = scale.queries_for(settings.db, rounds + 1)
    with StandIn("anthropic", reply=REPLY) as api:
        env = _env(home, api.url)
        bare, hooked = _settings_files(home, settings.db, env)
        without: list[float] = []
        with_: list[float] = []
        _turn(cli, project, env, hooked, prompts[0])  # untimed: starts the daemon, loads its mirrors
        for i in range(rounds):
            without.append(_turn(cli, project, env, bare, prompts[i + 1]))
            with_.append(_turn(cli, project, env, hooked, prompts[i + 1]))
        counted = _wait_ingests(settings.db, rounds + 1)
    diffs = [b - a for a, b in zip(without, with_, strict=True)]
    return {
        "client": "claude-code",
        "cli": str(cli),
        "turns": turns,
        "build_s": round(built, 1),
        "rounds": rounds,
        "without": _summary(without),
        "with": _summary(with_),
        "added": _summary(diffs),
        "stops_counted": counted,
        "requests": len(api.requests),
    }


def _env(home: Path, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROP)}
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CONFIG_HOME=str(home / ".config"),
        ANTHROPIC_BASE_URL=url,
        ANTHROPIC_API_KEY="sk-ant-standin",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        LOCALMEM_QUERY_DAEMON_IDLE="0",
        NO_COLOR="1",
    )
    if "XDG_CACHE_HOME" in os.environ:  # the embedding model's cache: the person's, not a cold one
        env["XDG_CACHE_HOME"] = os.environ["XDG_CACHE_HOME"]
    return env


def _settings_files(home: Path, store: Path, env: dict[str, str]) -> tuple[bytes, bytes]:
    """Claude Code's settings without and with localmem's hook entries (``hooks install``)."""
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    bare = b"{}\n"
    settings.write_bytes(bare)
    argv = [sys.executable, "-m", "localmem", "--db", str(store), "hooks", "install", "--client", "claude-code"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"hooks install failed: {done.stderr.strip()}")
    return bare, settings.read_bytes()


def _turn(cli: Path, project: Path, env: dict[str, str], settings: bytes, prompt: str) -> float:
    """One ``claude -p`` turn with ``settings`` in place: seconds from start to exit."""
    (Path(env["HOME"]) / ".claude" / "settings.json").write_bytes(settings)
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(cli), "-p", prompt],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    took = time.perf_counter() - t0
    if done.returncode != 0 or REPLY not in done.stdout:
        raise RuntimeError(f"claude exited {done.returncode}: {done.stdout[-300:]} {done.stderr[-600:]}")
    return took


def _wait_ingests(store: Path, stops: int, timeout: float = 600.0) -> int:
    """Stops counted once every timed turn's background ingest is done (or the timeout)."""
    end = time.monotonic() + timeout
    while (n := _runs(store, "stop")) < stops and time.monotonic() < end:
        time.sleep(0.1)
    return n


def _runs(store: Path, event: str) -> int:
    runs: int = status.read(store).get("events", {}).get(event, {}).get("runs", 0)
    return runs


def _summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return {"p50_ms": round(statistics.median(ms)), "p95_ms": round(p95), "max_ms": round(ms[-1])}


def report(r: dict[str, Any]) -> str:
    """The result as the table ``localmem bench agent`` prints."""
    lines = [
        f"real Claude Code ({r['cli']}), a store of {r['turns']:,} synthetic turns; {r['rounds']} rounds, "
        "each a `claude -p` turn without and with localmem's hooks, start to exit",
        "| | p50 | p95 | max |",
        "|---|---:|---:|---:|",
    ]
    for key, label in (("without", "without localmem"), ("with", "with localmem's hooks"), ("added", "added per turn")):
        s = r[key]
        lines.append(f"| {label} | {s['p50_ms']} ms | {s['p95_ms']} ms | {s['max_ms']} ms |")
    lines.append(
        f"(Stops counted by the background worker: {r['stops_counted']} of {r['rounds'] + 1}; "
        f"model requests the stand-in answered: {r['requests']})"
    )
    return "\n".join(lines)


def as_json(r: dict[str, Any]) -> str:
    return json.dumps(r)
