"""``localmem bench agent``: what localmem costs a real agent, per turn, on a large store.

The real Claude Code CLI (from npm) runs offline against a loopback stand-in of the
Messages API (``bench.agent_apis``), in a project folder, on a synthetic store of N turns
(``bench.synthetic``, as ``bench hooks`` builds it; the project folder is one of its four
projects, so its session starts and prompts find memory). Two homes: one whose Claude
Code settings have no hooks, one with localmem's entries installed by ``localmem hooks
install``. Two measures, each alternating between the homes so that drift in the
machine's load touches both sides alike:

- a turn in a running session: one ``claude -p --input-format stream-json`` process per
  home, each sent the same prompts one at a time; a turn is timed from the prompt written
  to the ``result`` read back (UserPromptSubmit and Stop run in it: what a person waits
  for at every turn of a session);
- a whole session: ``claude -p PROMPT``, start to exit (SessionStart, UserPromptSubmit,
  Stop and SessionEnd); the first, untimed, starts the resident daemon, as a person's
  first session of the day would.

Reported: each side's median and p95, and the added time: the median and p95 of the
paired differences; then how many Stops the background worker counted (their ingest is
done after the agent has moved on: ``hooks.background``).

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
from localmem.hooks import detach, status
from localmem.models.registry import default_embedder
from localmem.storage.bench import synthetic as bench_rows
from localmem.storage.engine import db

NPM = "@anthropic-ai/claude-code@2.1.337"
DROP = ("ANTHROPIC_", "CLAUDE_", "LOCALMEM_", "XDG_")  # the person's own setup would point the CLI elsewhere
REPLY = "Noted; I will keep that in mind for the next step."


def find_cli(given: Path | None, command: str = "claude", npm: str = NPM) -> Path:
    """The agent's ``command``: ``given``, else on PATH, else the repository's ``.ci/node``
    (``npm``: the package and version to install, named when it is absent)."""
    if given is not None:
        if not given.is_file():
            raise FileNotFoundError(f"{given}: no such file (the {command} command: npm install {npm})")
        return given
    found = shutil.which(command)
    if found:
        return Path(found)
    repo = Path(__file__).resolve().parents[2] / ".ci" / "node" / "node_modules" / ".bin" / command
    if repo.exists():
        return repo
    raise FileNotFoundError(f"no `{command}` command: npm install {npm}, then --cli PATH")


def run(
    cli: Path, work: Path, turns: int = 100_000, rounds: int = 20, embedder: str = "default", foreground: bool = False
) -> dict[str, Any]:
    """The bench (module docstring) with the CLI at ``cli``, its files in ``work``;
    ``foreground``: the ingest hooks run while the agent waits (``hooks.detach``'s switch),
    as before they were detached."""
    project, settings, built = build_store(work, turns, embedder)
    prompts = scale.queries_for(settings.db, 2 * rounds + 1)
    before = status.runs(settings.db, "stop")  # a store kept from an earlier run (--workdir) has its count
    with StandIn("anthropic", reply=REPLY) as api:
        bare, hooked = home_env(work / "home-bare", api.url), home_env(work / "home-hooked", api.url)
        if foreground:
            hooked[detach.FOREGROUND_ENV] = "1"
        _settings(bare, None)
        _settings(hooked, settings.db)
        _session(cli, project, hooked, prompts[0])  # untimed: starts the daemon, loads its mirrors
        sessions = [
            (_session(cli, project, bare, p), _session(cli, project, hooked, p)) for p in prompts[1 : rounds + 1]
        ]
        in_session = _turns(cli, project, bare, hooked, prompts[rounds + 1 :])
        stops = 2 + 2 * rounds  # each session's Stop; each turn's in the running session, its greeting too
        counted = status.wait_for_runs(settings.db, "stop", before + stops, 600.0, poll=0.1) - before
    out: dict[str, Any] = {
        "client": "claude-code",
        "cli": str(cli),
        "turns": turns,
        "build_s": round(built, 1),
        "rounds": rounds,
        "foreground": foreground,
        "stops_counted": counted,
        "stops": stops,
        "requests": len(api.requests),
    }
    out.update(turn=sides(in_session), session=sides(sessions))
    return out


def build_store(work: Path, turns: int, embedder: str) -> tuple[Path, Settings, float]:
    """(the project folder, the settings of a synthetic store of ``turns`` turns in ``work``
    whose projects include that folder, seconds its build took)."""
    project = work / "project"
    project.mkdir(parents=True, exist_ok=True)
    settings = Settings(db=work / f"agent-{turns}.db", embedder=embedder)
    built = synthetic.build(settings.db, turns, default_embedder(settings.embedder), settings)
    conn = db.connect(settings.db)
    try:
        bench_rows.spread_projects(conn, (str(project), "/home/dev/etl", "/home/dev/site", "/home/dev/infra"))
    finally:
        conn.close()
    return project, settings, built


def home_env(home: Path, url: str) -> dict[str, str]:
    """The environment of an agent in a private ``home`` whose Anthropic API is the stand-in at ``url``."""
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


def _settings(env: dict[str, str], store: Path | None) -> None:
    """The home's Claude Code settings: no hooks (``store`` None), or localmem's entries for
    ``store`` installed as a person would (``localmem hooks install``)."""
    settings = Path(env["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text("{}\n", "utf-8")
    if store is not None:
        install_hooks(env, store, "claude-code")


def install_hooks(env: dict[str, str], store: Path, client: str) -> None:
    """localmem's hooks for ``client`` and ``store`` in the home of ``env``, installed as a
    person would (``localmem hooks install``)."""
    argv = [sys.executable, "-m", "localmem", "--db", str(store), "hooks", "install", "--client", client]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"hooks install failed: {done.stderr.strip()}")


def _session(cli: Path, project: Path, env: dict[str, str], prompt: str) -> float:
    """One ``claude -p`` session: seconds from start to exit."""
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


def _turns(
    cli: Path, project: Path, bare: dict[str, str], hooked: dict[str, str], prompts: list[str]
) -> list[tuple[float, float]]:
    """Each prompt sent as the next turn of a running session in each home: (without, with) seconds."""
    argv = [str(cli), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]
    procs = [
        subprocess.Popen(
            argv,
            cwd=project,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for env in (bare, hooked)
    ]
    try:
        for proc in procs:  # the session's start (and its SessionStart hook), untimed
            _ask(proc, "Hello, let us begin.")
        return [(_ask(procs[0], p), _ask(procs[1], p)) for p in prompts]
    finally:
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=120)


def _ask(proc: subprocess.Popen[str], prompt: str) -> float:
    """One turn of a stream-json session: seconds from the prompt written to its result read."""
    assert proc.stdin is not None and proc.stdout is not None
    t0 = time.perf_counter()
    proc.stdin.write(json.dumps({"type": "user", "message": {"role": "user", "content": prompt}}) + "\n")
    proc.stdin.flush()
    while line := proc.stdout.readline():
        if json.loads(line).get("type") == "result":
            return time.perf_counter() - t0
    raise RuntimeError(f"claude ended its session (exit {proc.wait(timeout=60)}) before answering")


def sides(pairs: list[tuple[float, float]]) -> dict[str, dict[str, float]]:
    """(without, with) seconds, paired: each side's summary and that of the differences."""
    return {
        "without": _summary([a for a, _ in pairs]),
        "with": _summary([b for _, b in pairs]),
        "added": _summary([b - a for a, b in pairs]),
    }


def _summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return {"p50_ms": round(statistics.median(ms)), "p95_ms": round(p95), "max_ms": round(ms[-1])}


def report(r: dict[str, Any]) -> str:
    """The result as the table ``localmem bench agent`` prints."""
    title = (
        f"real Claude Code ({r['cli']}), a store of {r['turns']:,} synthetic turns; {r['rounds']} rounds of each, "
        "alternating a home without and one with localmem's hooks"
    )
    rows = (
        ("turn", "a turn in a running session (UserPromptSubmit, Stop)"),
        ("session", "a whole `claude -p` session (SessionStart, UserPromptSubmit, Stop, SessionEnd)"),
    )
    return table(r, title, rows, "Stops")


def table(r: dict[str, Any], title: str, rows: tuple[tuple[str, str], ...], stops: str) -> str:
    """``title``, then one line per measure (``rows``: its key in ``r``, its label) with each
    side's p50 / p95 and the added time, then what the background worker counted (``stops``:
    the client's name for the event)."""
    lines = [
        title + (" (ingest in the foreground)" if r.get("foreground") else ""),
        "| what | without localmem p50 / p95 | with its hooks p50 / p95 | added p50 / p95 / max |",
        "|---|---:|---:|---:|",
    ]
    for key, label in rows:
        a, b, d = r[key]["without"], r[key]["with"], r[key]["added"]
        lines.append(
            f"| {label} | {a['p50_ms']} / {a['p95_ms']} ms | {b['p50_ms']} / {b['p95_ms']} ms "
            f"| {d['p50_ms']} / {d['p95_ms']} / {d['max_ms']} ms |"
        )
    lines.append(
        f"({stops} counted by the background worker: {r['stops_counted']} of {r['stops']}; "
        f"model requests the stand-in answered: {r['requests']})"
    )
    return "\n".join(lines)


def as_json(r: dict[str, Any]) -> str:
    return json.dumps(r)
