"""``localmem bench ui``: the memory browser's first page, search latency and reach on a
store (``localmem.ui.bench``). The table goes to stdout; ``--json`` adds the result as one
JSON line (the last line)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from localmem.config import Settings
from localmem.errors import InputError
from localmem.ui import bench


def add_ui_parser(bsub: Any) -> None:
    c = bsub.add_parser(
        "ui",
        help="the web view on a store (--db): first page, search p50/p95, every session reachable",
        description="Serve the store given by --db with the web view's real server and time its pages over HTTP: "
        "the first page (Timeline, Find), search on queries made from the store's own turns (with and without "
        "filters), and page the Timeline to its end to check every session is reachable. Read-only.",
    )
    c.add_argument("--queries", type=int, default=100, help="search queries timed (default 100)")
    c.add_argument("--repeats", type=int, default=20, help="warm first-page loads timed (default 20)")
    c.add_argument("--seed", type=int, default=7, help="the queries' random seed (default 7)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.db.is_file():
        raise InputError(f"{settings.db}: no store there (give one with --db)")
    if args.queries < 1 or args.repeats < 1:
        raise InputError("--queries and --repeats must be 1 or more")
    result = bench.run(
        settings, args.queries, args.repeats, args.seed, log=lambda m: print(f"[bench ui] {m}", file=sys.stderr)
    )
    print(bench.table(result))
    if args.json:
        print(json.dumps(result))
    return 0
