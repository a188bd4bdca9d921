"""``localmem bench load``, ``crash`` and ``neighbours``: real processes on one file.

Both stop by themselves and touch only a temporary folder (or ``--workdir``) and
local pipes. Tables go to stdout; ``--json`` adds the result as one JSON line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from localmem.bench import crash, load, neighbours
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

    c = bsub.add_parser(
        "neighbours",
        help="a daemon, an MCP server, other SQLite clients, a restore and kill -9 on one store; what survives",
        description="Rounds on a fresh store each: a resident daemon and an MCP server hold it while Python's "
        "sqlite3 and Debian's sqlite3 shell open, read, write and close it, turns are written and queried, every "
        "second round restores a plain backup with the daemon running, and one process is killed -9; then the "
        "file is checked: integrity, acknowledged turns lost, rolled-back turns resurrected or still answered.",
    )
    c.add_argument("--rounds", type=int, default=8, help="rounds (default 8)")
    c.add_argument(
        "--restore-every", type=int, default=2, help="every Nth round restores a backup (default 2; 0: none)"
    )
    c.add_argument("--seed", type=int, default=0, help="random seed for what is killed and the texts (default 0)")
    c.add_argument(
        "--code", type=Path, help="run every localmem process from this source tree (an older checkout, to compare)"
    )
    c.add_argument("--workdir", type=Path, help="keep the stores and files here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run_neighbours)


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


def _run_neighbours(args: argparse.Namespace, settings: Settings) -> int:
    _positive(args.rounds, "--rounds")
    if args.code is not None and not (args.code / "localmem" / "__init__.py").is_file():
        raise InputError("--code: no localmem package in that folder", path=str(args.code))
    result = neighbours.run(
        rounds=args.rounds, restore_every=args.restore_every, seed=args.seed, workdir=args.workdir, code=args.code
    )
    neighbours.print_report(result)
    if args.json:
        print(json.dumps(result))
    bad = result["rounds_damaged"] + result["lost"] + result["resurrected"] + result["stale_answers"]
    return 0 if bad == 0 else 1
