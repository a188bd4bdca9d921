"""``localmem bench replicate`` and ``localmem bench encryption``: a live Litestream replica under
kill -9, and what encryption at rest costs.

Both stop by themselves and touch only a temporary folder (or ``--workdir``). Tables go to
stdout; ``--json`` adds the result as one JSON line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from localmem.bench import encryption, replicate
from localmem.bench.preamble import stderr_log, working_folder
from localmem.cli.common import print_result
from localmem.config import Settings
from localmem.errors import InputError
from localmem.models.registry import default_embedder


def add_replicate_parsers(bsub: Any) -> None:
    c = bsub.add_parser(
        "replicate",
        help="Litestream replicating while MCP remember + CLI ingest write; kill -9 rounds; restore after each",
        description="A store replicated by Litestream to a file:// replica while an MCP server (remember) and "
        "`localmem ingest` runs write; each round kills -9 Litestream, a writer or both, restores the replica "
        "and checks integrity and that every turn acknowledged more than --lag-bound seconds before the kill "
        "is in it.",
    )
    c.add_argument("--rounds", type=int, default=20, help="kill rounds (default 20)")
    c.add_argument("--seed", type=int, default=0, help="random seed for the kill times (default 0)")
    c.add_argument("--lag-bound", type=float, default=5.0, help="seconds of replication lag allowed (default 5)")
    c.add_argument("--workdir", type=Path, help="keep the store, replica and logs here (default: a temp dir)")
    c.add_argument(
        "--app-checkpoints",
        action="store_true",
        help="keep SQLite's auto-checkpoint on in the writers while Litestream replicates (localmem turns it "
        "off, as Litestream asks), to compare",
    )
    c.add_argument(
        "--snapshots",
        action="store_true",
        help="replicate with `localmem replicate --snapshots --interval 1` (online-backup snapshots) instead of "
        "Litestream, to compare",
    )
    c.add_argument(
        "--writers-only",
        action="store_true",
        help="the control run: kill only the writers, never Litestream",
    )
    c.add_argument(
        "--reset-after-crash",
        action="store_true",
        help="reset a killed Litestream's local state before restarting it (what localmem did before), to compare",
    )
    c.add_argument(
        "--litestream-debug", action="store_true", help="Litestream logs at debug level into WORKDIR/litestream.log"
    )
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run_replicate)

    c = bsub.add_parser(
        "encryption",
        help="ingest, reconstruct, open and backup costs of an encrypted store beside a plaintext one",
        description="The same synthetic store (bench latency's turns and queries) built plaintext and encrypted "
        "in one run; ingest turns/s, reconstruct p50/p95, size, connection open and backup time side by side.",
    )
    c.add_argument("--turns", default="2000", help="comma-separated store sizes (default 2000)")
    c.add_argument("--queries", type=int, default=50, help="queries per size (default 50)")
    c.add_argument("--workdir", type=Path, help="keep the stores here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run_encryption)


def _run_replicate(args: argparse.Namespace, settings: Settings) -> int:
    if args.rounds < 1 or args.lag_bound <= 0:
        raise InputError("--rounds must be at least 1 and --lag-bound positive")
    result = replicate.run(
        rounds=args.rounds,
        seed=args.seed,
        lag_bound=args.lag_bound,
        workdir=args.workdir,
        app_checkpoints=args.app_checkpoints,
        snapshots=args.snapshots,
        replicator_kills=not args.writers_only,
        debug_log=args.litestream_debug,
        reset=args.reset_after_crash,
    )
    replicate.print_report(result)
    if args.json:
        print(json.dumps(result))
    ok = result["lost_beyond_lag"] == 0 and result["final_lost"] == 0
    return 0 if ok and result["restores_integrity_ok"] == result["rounds"] else 1


def _run_encryption(args: argparse.Namespace, settings: Settings) -> int:
    try:
        sizes = [int(x) for x in args.turns.split(",") if x.strip()]
    except ValueError as exc:
        raise InputError(f"--turns must be comma-separated integers, got {args.turns!r}") from exc
    if not sizes or min(sizes) < 1 or args.queries < 1:
        raise InputError("--turns sizes and --queries must be positive")
    embedder = default_embedder(settings.embedder)
    with working_folder(args.workdir, "encryption") as work:
        result = encryption.run(sizes, work, embedder, settings, args.queries, stderr_log("encryption"))
    print_result(encryption.table(result), result, args.json)
    return 0
