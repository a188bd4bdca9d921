"""``localmem bench scale`` and ``localmem bench ingest``: latency and memory on large
synthetic stores, and ingest throughput with its time per stage. Tables go to stdout;
``--json`` adds the result as one JSON line (the last line)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from localmem.bench import ingest_bench, pagecache, scale
from localmem.bench.preamble import stderr_log, working_folder
from localmem.cli.common import print_result
from localmem.config import Settings
from localmem.errors import InputError
from localmem.models.registry import default_embedder


def add_scale_parsers(bsub: Any) -> None:
    c = bsub.add_parser(
        "scale",
        help="reconstruct p50/p95, RSS of a fresh query process and size on synthetic stores of N turns",
        description="Build a synthetic store per size with bulk SQL (no model; see docs/benchmarks.md#scale), then "
        "time reconstruct (query embedding included) in a fresh process and report its peak memory.",
    )
    c.add_argument("--turns", default="10000,100000", help="comma-separated store sizes (default 10000,100000)")
    c.add_argument("--queries", type=int, default=100, help="timed queries per size (default 100)")
    c.add_argument("--budget", type=int, default=2000, help="token budget of each reconstruct (default 2000)")
    c.add_argument(
        "--memory-cap-mb",
        type=int,
        default=0,
        help="address-space limit of the query process, so a store too big for memory fails there (default none)",
    )
    c.add_argument(
        "--cache",
        default="warm,cold",
        help="page-cache states to serve each size in, in order, one row each: warm (store file read into the "
        "OS page cache first), cold (its pages evicted first), as-is (left as found) (default warm,cold)",
    )
    c.add_argument(
        "--no-mcp",
        action="store_true",
        help="skip mcp_idle_mb: the resident memory of a fresh MCP server (stdio) after it answered 5 "
        "reconstruct calls and sat idle 3 s, measured once per size",
    )
    c.add_argument("--workdir", type=Path, help="keep the synthetic stores here and reuse them (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run_scale)

    c = bsub.add_parser(
        "ingest",
        help="ingest turns/s against the embedding model alone, and the share of time per stage",
        description="Ingest FILE into a fresh store with the real write path, timing parse, prepare/hash, embed, "
        "SQL write, mirror refresh and semantic edges; then embed the same turn texts with the model alone.",
    )
    c.add_argument("--data", type=Path, required=True, help="a chat log or benchmark file")
    c.add_argument("--format", help="the file's format (default: detected)")
    c.add_argument("--question", help="LongMemEval: ingest only this question's haystack (default: the first)")
    c.add_argument("--workdir", type=Path, help="put the store here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run_ingest)


def _run_scale(args: argparse.Namespace, settings: Settings) -> int:
    try:
        sizes = [int(x) for x in args.turns.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--turns must be comma-separated integers, got {args.turns!r}") from None
    if not sizes or any(n < 2 for n in sizes):
        raise InputError(f"--turns must be integers of 2 or more, got {args.turns!r}")
    for flag in ("queries", "budget"):
        if getattr(args, flag) <= 0:
            raise InputError(f"--{flag} must be positive, got {getattr(args, flag)}")
    if args.memory_cap_mb < 0:
        raise InputError(f"--memory-cap-mb must be 0 or more, got {args.memory_cap_mb}")
    modes = _cache_modes(args.cache)
    with working_folder(args.workdir, "scale") as workdir:
        result = scale.run(
            sizes,
            workdir,
            default_embedder(settings.embedder),
            settings,
            args.queries,
            stderr_log("scale"),
            budget=args.budget,
            memory_cap_mb=args.memory_cap_mb,
            cache=modes,
            mcp=not args.no_mcp,
        )
    print_result(scale.table(result), result, args.json)
    return 0


def _cache_modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    if not modes or (bad := [m for m in modes if m not in pagecache.MODES]):
        got = f"unknown mode {bad[0]!r}" if modes else "no mode"
        raise InputError(f"--cache must be a comma list of {', '.join(pagecache.MODES)}; {got} in {text!r}")
    if "cold" in modes and not pagecache.can_evict():
        raise InputError("--cache cold needs posix_fadvise to evict the store from the page cache (Linux)")
    return modes


def _run_ingest(args: argparse.Namespace, settings: Settings) -> int:
    if not args.data.is_file():
        raise InputError("no such file", path=str(args.data))
    with working_folder(args.workdir, "ingest") as workdir:
        result = ingest_bench.run(
            args.data,
            workdir,
            default_embedder(settings.embedder),
            settings,
            fmt=args.format,
            question=args.question,
            log=stderr_log("ingest"),
        )
    print_result(ingest_bench.table(result), result, args.json)
    return 0
