"""``localmem bench startup``: process wall time of query, recall (the hook entry point),
ingest of one turn and --help, in-process and through a resident server. The table goes
to stdout; ``--json`` adds the result as one JSON line (the last line)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from localmem.bench import startup
from localmem.config import Settings
from localmem.errors import InputError


def add_startup_parser(bsub: Any) -> None:
    c = bsub.add_parser(
        "startup",
        help="process wall time of query, recall, ingest and --help, in-process and through a resident server",
        description="Start real localmem processes round-robin and time each from start to exit (p50/p95 wall, "
        "p50 CPU): --help, query and recall in-process and through `serve --transport socket`, ingest of one "
        "turn, and query with an empty model cache. See docs/benchmarks.md, Start-up.",
    )
    c.add_argument("--runs", type=int, default=20, help="rounds; each runs every case once (default 20)")
    c.add_argument("--store", type=Path, help="an existing store to query (default: the bundled sample, ingested)")
    c.add_argument(
        "--cases",
        default=",".join(startup.CASES),
        help=f"comma-separated, in order (default {','.join(startup.CASES)})",
    )
    c.add_argument("--workdir", type=Path, help="where the sample store and scratch files go (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run_startup)


def _run_startup(args: argparse.Namespace, settings: Settings) -> int:
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if not cases or any(c not in startup.CASES for c in cases):
        raise InputError(f"--cases: choose from {', '.join(startup.CASES)}")
    if args.runs < 1:
        raise InputError("--runs must be at least 1")
    if args.store is not None and not args.store.is_file():
        raise InputError("no such store", path=str(args.store))
    if "ingest" in cases and args.store is not None:
        raise InputError("--store with the ingest case would write into that store; leave ingest out (--cases)")
    workdir: Path = args.workdir or Path(tempfile.mkdtemp(prefix="localmem-bench-startup-"))
    result = startup.run(
        workdir,
        runs=args.runs,
        store=args.store,
        cases=cases,
        log=lambda msg: print(f"[bench startup] {msg}", file=sys.stderr),
    )
    print(startup.table(result))
    if args.json:
        print(json.dumps(result))
    return 0
