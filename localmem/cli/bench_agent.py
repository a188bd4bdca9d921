"""``localmem bench agent``: a real agent's CLI timed without and with localmem's hooks
(Claude Code: ``bench.agent_cost``; OpenCode and its plugin: ``bench.agent_cost_opencode``)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from localmem.bench import agent_cost, agent_cost_opencode
from localmem.config import Settings
from localmem.errors import InputError

BENCHES = {"claude-code": agent_cost, "opencode": agent_cost_opencode}


def add_agent_bench_parser(bsub: Any) -> None:
    c = bsub.add_parser(
        "agent",
        help="what localmem adds to a real agent's turn: `claude -p` (or `opencode run`) against a loopback "
        "stand-in, with and without the hooks, on a large store",
        description="Run the real Claude Code CLI (--client opencode: the real OpenCode CLI) offline (a loopback "
        "stand-in of its model API) in a temporary home, on a synthetic store of --turns turns, alternating turns "
        "without and with localmem's hooks (installed by `localmem hooks install`), each timed; prints each side's "
        "p50/p95 and the added time per turn. Needs the CLI: npm install "
        + agent_cost.NPM
        + " (OpenCode: "
        + agent_cost_opencode.NPM
        + "), or --cli PATH.",
    )
    c.add_argument(
        "--client",
        choices=sorted(BENCHES),
        default="claude-code",
        help="the agent (default claude-code; opencode: `opencode run`, `run --continue` and a served session's turn)",
    )
    c.add_argument("--cli", type=Path, help="the agent's command (default: on PATH, else .ci/node's)")
    c.add_argument("--turns", type=int, default=100_000, help="synthetic store size (default 100000)")
    c.add_argument("--rounds", type=int, default=20, help="turns timed on each side (default 20)")
    c.add_argument(
        "--foreground-ingest",
        action="store_true",
        help="the Stop, PreCompact and SessionEnd hooks ingest while the agent waits (LOCALMEM_HOOK_FOREGROUND=1): "
        "the cost before they were detached",
    )
    c.add_argument("--workdir", type=Path, help="keep the store and the home here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=cmd_bench_agent)


def cmd_bench_agent(args: argparse.Namespace, settings: Settings) -> int:
    bench = BENCHES[args.client]
    try:
        cli = bench.find_cli(args.cli)
    except FileNotFoundError as exc:
        raise InputError(str(exc)) from exc
    if args.rounds < 1 or args.turns < 1:
        raise InputError("--rounds and --turns must be 1 or more")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="localmem-bench-agent-"))
    work.mkdir(parents=True, exist_ok=True)
    r = bench.run(cli, work, args.turns, args.rounds, embedder=settings.embedder, foreground=args.foreground_ingest)
    print(bench.report(r))
    if args.json:
        print(agent_cost.as_json(r))
    return 0
