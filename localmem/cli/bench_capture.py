"""``localmem bench watch`` (a transcript appended to while ``watch`` follows it),
``localmem bench hooks`` (the agents' hooks as processes on a large store) and
``localmem bench projects`` (project scope on a two-project fixture). Tables to stdout;
``--json`` adds the result as one JSON line."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from localmem.bench import watch_bench
from localmem.config import Settings


def add_capture_bench_parsers(bsub: Any) -> None:
    c = bsub.add_parser(
        "watch",
        help="a Claude Code transcript appended to ~N times while `localmem watch` follows it: every turn once, in order",
        description="Start `localmem watch` (the agents' folders mode) as a process, append records to a transcript "
        "(some written in two pieces), then compare what it stored with one complete read of the file.",
    )
    c.add_argument("--appends", type=int, default=1000, help="writes to the transcript (default 1000)")
    c.add_argument("--interval", type=float, default=0.01, help="seconds between writes (default 0.01)")
    c.add_argument("--final-after", type=float, default=2.0, help="the watcher's --final-after (default 2)")
    c.add_argument("--workdir", type=Path, help="keep the transcript and the store here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=cmd_bench_watch)


def cmd_bench_watch(args: argparse.Namespace, settings: Settings) -> int:
    work = args.workdir or Path(tempfile.mkdtemp(prefix="localmem-bench-watch-"))
    work.mkdir(parents=True, exist_ok=True)
    r = watch_bench.run(work, args.appends, args.interval, args.final_after)
    print(
        "| writes | records | turns expected | stored | missing | duplicated | out of order | reads | appending | lag after last write |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {r['appends']} | {r['records']} | {r['turns_expected']} | {r['turns_stored']} | {r['missing']} | "
        f"{r['duplicated']} | {r['out_of_order']} | {r['reads']} | {r['append_s']} s | {r['lag_s']} s "
        f"(final-after {r['final_after_s']} s) |"
    )
    if args.json:
        print(json.dumps(r))
    ok = not (r["missing"] or r["duplicated"] or r["out_of_order"] or r["unexpected"])
    return 0 if ok else 1
