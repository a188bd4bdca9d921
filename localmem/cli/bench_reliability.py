"""``localmem bench load`` and ``localmem bench crash``: real processes on one file.

Both stop by themselves and touch only a temporary folder (or ``--workdir``) and
local pipes. Tables go to stdout; ``--json`` adds the result as one JSON line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from localmem.bench import crash, load
from localmem.config import Settings
from localmem.errors import InputError


def add_reliability_parsers(bsub: Any) -> None:
    c = bsub.add_parser(
        "load",
        help="writers, readers, an ingest and a watcher on one file at once; lost/duplicated turns and failures",
        description="N MCP stdio servers calling remember, M calling reconstruct, one `localmem ingest` and one "
        "`localmem watch`, all on one database file for --seconds; then the file is checked.",
    )
    c.add_argument("--seconds", type=float, default=30.0, help="how long the clients run (default 30)")
    c.add_argument("--writers", type=int, default=4, help="MCP servers calling remember (default 4)")
    c.add_argument("--readers", type=int, default=2, help="MCP servers calling reconstruct (default 2)")
    c.add_argument("--ingest-turns", type=int, default=3000, help="turns in the ingested file (default 3000)")
    c.add_argument("--watch-files", type=int, default=5, help="files dropped into the watched folder (default 5)")
    c.add_argument("--workdir", type=Path, help="keep the database and files here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run_load)

    c = bsub.add_parser(
        "crash",
        help="kill -9 ingest, the worker and MCP servers at random points; acknowledged turns must survive",
        description="Rounds of: start a writer (ingest, an MCP server calling remember, or the enrichment "
        "worker), kill -9 it at a random moment, then check that every acknowledged turn is in the file, "
        "the file is intact, and the interrupted work resumes.",
    )
    c.add_argument("--rounds", type=int, default=50, help="kill rounds (default 50)")
    c.add_argument("--seed", type=int, default=0, help="random seed for the kill times (default 0)")
    c.add_argument("--workdir", type=Path, help="keep the database and files here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run_crash)


def _positive(value: float, flag: str) -> None:
    if value <= 0:
        raise InputError(f"{flag} must be positive, got {value}")


def _run_load(args: argparse.Namespace, settings: Settings) -> int:
    for flag in ("seconds", "writers", "ingest_turns"):
        _positive(getattr(args, flag), "--" + flag.replace("_", "-"))
    if args.readers < 0 or args.watch_files < 0:
        raise InputError("--readers and --watch-files must be 0 or more")
    result = load.run(
        seconds=args.seconds,
        writers=args.writers,
        readers=args.readers,
        ingest_turns=args.ingest_turns,
        watch_files=args.watch_files,
        workdir=args.workdir,
    )
    load.print_report(result)
    if args.json:
        print(json.dumps(result))
    o = result["overall"]
    return 0 if o["lost"] == 0 and o["duplicated"] == 0 and o["integrity_check"] == "ok" else 1


def _run_crash(args: argparse.Namespace, settings: Settings) -> int:
    _positive(args.rounds, "--rounds")
    result = crash.run(rounds=args.rounds, seed=args.seed, workdir=args.workdir)
    crash.print_report(result)
    if args.json:
        print(json.dumps(result))
    return 0 if result["acknowledged_lost"] == 0 and result["integrity_failures"] == 0 else 1
