"""``localmem bench agent --client opencode``: what localmem's OpenCode plugin costs a real
OpenCode turn, on a large store.

``bench.agent_cost``'s bench for the real OpenCode CLI (``opencode-ai``, from npm): the same
synthetic store (the project folder is one of its projects), the same loopback stand-in of
the Messages API, two homes alternated in every round: one without localmem, one with the
plugin that ``localmem hooks install --client opencode`` writes (``hooks.opencode``: it runs
the session start once per session and the prompt's recall before the main model request
and makes that request wait for them; ``session.idle`` runs the stop hook, which forks and
exits). Each home's ``opencode.json`` points the ``anthropic`` provider at the stand-in and
names its one model; ``OPENCODE_DISABLE_*`` keep it off the network (the recipe of
tests/helpers/opencode_cli.py, checked with ``opencode-ai`` 1.18.33). Three measures:

- a turn in a running session: one ``opencode serve`` per home (the server OpenCode's TUI
  and ``run --attach`` talk to), one session each, each prompt ``POST
  /session/{id}/message``, timed from the request sent to the assistant's message read back
  (the route and its body from the server's own ``GET /doc``; the plugin stays loaded, so
  this is the prompt's recall and the stop's fork: what a person waits for at every turn);
- a whole session: ``opencode run PROMPT`` (with ``$PWD`` the project, as a shell sets it:
  OpenCode takes its folder from it), start to exit: session start, prompt, stop; the
  first, untimed in each home, creates OpenCode's database and starts the resident daemon;
- the next turn as a new process: ``opencode run --continue PROMPT`` after each session (the
  plugin starts afresh in it, so it runs the session start again).

Reported in ``agent_cost``'s table, and how many stop hooks the background worker counted.
Nothing of localmem is faked; the model is the boundary.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from localmem.bench import agent_cost, scale
from localmem.bench.agent_apis import StandIn
from localmem.hooks import detach, status

NPM = "opencode-ai@1.18.33"
COMMAND = "opencode"
MODEL = "claude-standin"
DROP = ("OPENCODE_", "OPENAI_")  # besides agent_cost's: the person's own OpenCode setup
ROWS = (
    ("turn", "a turn in a running session (`opencode serve`: prompt, stop)"),
    ("session", "a whole `opencode run` session (session start, prompt, stop)"),
    ("next", "the next turn, `opencode run --continue` (session start again, prompt, stop)"),
)
TIMEOUT_S = 300
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


def find_cli(given: Path | None) -> Path:
    return agent_cost.find_cli(given, COMMAND, NPM)


def run(
    cli: Path, work: Path, turns: int = 100_000, rounds: int = 20, embedder: str = "default", foreground: bool = False
) -> dict[str, Any]:
    """The bench (module docstring) with the CLI at ``cli``, its files in ``work``;
    ``foreground``: the ingest hooks run while the agent waits (``hooks.detach``'s switch)."""
    project, settings, built = agent_cost.build_store(work, turns, embedder)
    prompts = iter(scale.queries_for(settings.db, 3 * rounds + 1))
    before = status.runs(settings.db, "stop")  # a store kept from an earlier run (--workdir) has its count
    with StandIn("anthropic", reply=agent_cost.REPLY) as api:
        bare, hooked = _env(work / "home-bare", api.url, project), _env(work / "home-hooked", api.url, project)
        if foreground:
            hooked[detach.FOREGROUND_ENV] = "1"
        agent_cost.install_hooks(hooked, settings.db, "opencode")
        first = next(prompts)  # untimed (reported apart): OpenCode's database made, the daemon started
        firsts = [_run(cli, project, env, first) for env in (bare, hooked)]
        sessions, following = [], []
        for _ in range(rounds):
            p, q = next(prompts), next(prompts)
            sessions.append((_run(cli, project, bare, p), _run(cli, project, hooked, p)))
            following.append((_run(cli, project, bare, q, "--continue"), _run(cli, project, hooked, q, "--continue")))
        with _served(cli, project, bare) as a, _served(cli, project, hooked) as b:
            for ask in (a, b):  # the session's first turn (and its title request), untimed
                ask("Hello, let us begin.")
            in_session = [(a(p), b(p)) for p in prompts]
        stops = 1 + 3 * rounds + 1  # the untimed session, each session and next turn, each served turn and its greeting
        counted = status.wait_for_runs(settings.db, "stop", before + stops, 600.0, poll=0.1) - before
    out: dict[str, Any] = {
        "client": "opencode",
        "cli": str(cli),
        "turns": turns,
        "build_s": round(built, 1),
        "rounds": rounds,
        "foreground": foreground,
        "stops_counted": counted,
        "stops": stops,
        "requests": len(api.requests),
        "first_ms": {"without": round(firsts[0] * 1000), "with": round(firsts[1] * 1000)},
    }
    out.update(turn=agent_cost.sides(in_session), session=agent_cost.sides(sessions), next=agent_cost.sides(following))
    return out


def config(url: str) -> dict[str, Any]:
    """``opencode.json`` for the stand-in at ``url``: its one model under the ``anthropic`` provider."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"anthropic/{MODEL}",
        "provider": {
            "anthropic": {
                "options": {"baseURL": f"{url}/v1", "apiKey": "sk-standin"},
                "models": {
                    MODEL: {"name": "Stand-in", "tool_call": True, "limit": {"context": 200000, "output": 8192}}
                },
            }
        },
    }


def _env(home: Path, url: str, project: Path) -> dict[str, str]:
    """``agent_cost``'s home, OpenCode's config written in it, the person's OpenCode variables
    left out, ``$PWD`` the project."""
    env = {k: v for k, v in agent_cost.home_env(home, url).items() if not k.startswith(DROP)}
    env.update(
        OPENCODE_DISABLE_MODELS_FETCH="1",
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_DISABLE_SHARE="1",
        PWD=str(project),
    )
    folder = Path(env["XDG_CONFIG_HOME"]) / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "opencode.json").write_text(json.dumps(config(url), indent=2), "utf-8")
    return env


def _run(cli: Path, project: Path, env: dict[str, str], prompt: str, *flags: str) -> float:
    """One ``opencode run`` process: seconds from start to exit."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(cli), "run", *flags, prompt],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    took = time.perf_counter() - t0
    if done.returncode != 0 or agent_cost.REPLY not in done.stdout:
        raise RuntimeError(f"opencode exited {done.returncode}: {done.stdout[-300:]} {done.stderr[-600:]}")
    return took


@contextmanager
def _served(cli: Path, project: Path, env: dict[str, str]) -> Iterator[Any]:
    """``opencode serve`` in the home of ``env`` with one new session in ``project``; yields
    ``ask(prompt) -> seconds`` (the turn, from the request sent to the reply read)."""
    log = Path(env["HOME"]) / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(cli), "serve", "--port", "0"], cwd=project, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )
    try:
        base = _listening(proc, log)
        where = "?directory=" + urllib.parse.quote(str(project))
        session = _post(f"{base}/session{where}", {})["id"]

        def ask(prompt: str) -> float:
            t0 = time.perf_counter()
            reply = _post(f"{base}/session/{session}/message{where}", {"parts": [{"type": "text", "text": prompt}]})
            took = time.perf_counter() - t0
            texts = [p.get("text", "") for p in reply.get("parts", []) if p.get("type") == "text"]
            if agent_cost.REPLY not in texts:
                raise RuntimeError(f"opencode serve answered {json.dumps(reply)[-600:]}")
            return took

        yield ask
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _listening(proc: subprocess.Popen[bytes], log: Path) -> str:
    """The server's address, from the line it prints once it listens."""
    end = time.monotonic() + TIMEOUT_S
    while time.monotonic() < end:
        if found := _LISTENING.search(log.read_text("utf-8", "replace")):
            return found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(
        f"opencode serve did not listen (exit {proc.poll()}): {log.read_text('utf-8', 'replace')[-600:]}"
    )


def _post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
        return json.loads(r.read())


def report(r: dict[str, Any]) -> str:
    """The result as the table ``localmem bench agent --client opencode`` prints."""
    title = (
        f"real OpenCode ({r['cli']}), a store of {r['turns']:,} synthetic turns; {r['rounds']} rounds of each, "
        "alternating a home without and one with localmem's plugin"
    )
    first = r["first_ms"]
    return agent_cost.table(r, title, ROWS, "stop hooks") + (
        f"\n(each home's first session, untimed above: {first['without']} ms without, {first['with']} ms with the "
        "plugin: OpenCode's database made; with it, OpenCode also installs the plugin package into its config folder "
        "and the daemon starts)"
    )
