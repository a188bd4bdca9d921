"""``localmem bench ...`` argument parsing and printing (tables to stdout, ``--json``
prints one JSON object as the last line)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from localmem.config import Settings
from localmem.errors import InputError

DEFAULT_METHODS = "bm25,dense,rrf,recent,localmem"


def add_bench_parser(sub: Any) -> None:
    bench = sub.add_parser("bench", help="benchmarks: recall on LoCoMo / LongMemEval, latency at scale")
    bsub = bench.add_subparsers(title="benchmarks", metavar="BENCHMARK")

    for name, helptext, budgets in (
        ("locomo", "evidence recall per category at token budgets (LoCoMo JSON)", "500,1000,2000,4000"),
        ("longmemeval", "evidence recall at budgets and session recall@5 per question type", "500,1000,2000"),
    ):
        c = bsub.add_parser(name, help=helptext, description=helptext)
        c.add_argument("--data", type=Path, required=True, help="the benchmark JSON file")
        c.add_argument("--budgets", default=budgets, help=f"comma-separated token budgets (default {budgets})")
        c.add_argument("--methods", default=DEFAULT_METHODS, help=f"comma-separated (default {DEFAULT_METHODS})")
        c.add_argument("--limit", type=int, help="only the first N conversations / questions")
        c.add_argument("--workdir", type=Path, help="keep the per-conversation stores here (default: a temp dir)")
        c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
        c.set_defaults(func=_run, bench=name)

    c = bsub.add_parser("fit", help="refit the reconstruct scorer; leave-one-conversation-out recall (LoCoMo JSON)")
    c.add_argument("--data", type=Path, required=True, help="LoCoMo JSON with two or more conversations")
    c.add_argument("--budgets", default="500,1000,2000,4000", help="comma-separated token budgets")
    c.add_argument("--limit", type=int, help="only the first N conversations")
    c.add_argument("--workdir", type=Path, help="keep the per-conversation stores here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run, bench="fit")

    c = bsub.add_parser("latency", help="reconstruct p50/p95 and ingest turns/s on synthetic stores")
    c.add_argument("--turns", default="10000", help="comma-separated store sizes (default 10000)")
    c.add_argument("--queries", type=int, default=100, help="queries per size (default 100)")
    c.add_argument("--workdir", type=Path, help="keep the synthetic stores here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run, bench="latency")


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{what} must be comma-separated integers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise InputError(f"{what} must be positive integers, got {text!r}")
    return values


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from localmem.bench import fit, latency, locomo, longmemeval
    from localmem.bench.metrics import METHODS
    from localmem.models import default_embedder

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"localmem-bench-{args.bench}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    embedder = default_embedder(settings.embedder)

    def log(msg: str) -> None:
        print(f"[bench {args.bench}] {msg}", file=sys.stderr)

    result: dict[str, Any]
    if args.bench == "latency":
        result = latency.run(_ints(args.turns, "--turns"), workdir, embedder, settings, args.queries, log)
        print(latency.table(result))
    elif args.bench == "fit":
        if not args.data.is_file():
            raise InputError("no such file", path=str(args.data))
        result = fit.run(args.data, _ints(args.budgets, "--budgets"), workdir, embedder, settings, args.limit, log)
        print(fit.table(result))
    else:
        if not args.data.is_file():
            raise InputError("no such file", path=str(args.data))
        methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        unknown = [m for m in methods if m not in METHODS]
        if unknown:
            raise InputError(f"unknown method(s) {', '.join(unknown)}; known: {', '.join(METHODS)}")
        mod = locomo if args.bench == "locomo" else longmemeval
        result = mod.run(
            args.data, _ints(args.budgets, "--budgets"), methods, workdir, embedder, settings, args.limit, log
        )
        print(mod.table(result))
    if args.json:
        print(json.dumps(result))
    return 0
