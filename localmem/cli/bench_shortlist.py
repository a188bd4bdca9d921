"""``localmem bench shortlist``: recall of the exact top-k that the dense lists' Hamming
shortlist keeps, on a real store (``bench.shortlist``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from localmem.bench import shortlist
from localmem.cli.common import positive_ints
from localmem.config import Settings
from localmem.errors import InputError
from localmem.models.registry import default_embedder


def add_shortlist_parser(bsub: Any) -> None:
    c = bsub.add_parser(
        "shortlist",
        help="recall of the exact top-k kept by the dense lists' Hamming shortlist, on a real store",
        description="Each question of a LongMemEval JSON asked of the store's turn and statement-cue vectors "
        "through the read path's shortlist and by brute force; recall@k of the exact top-k, per list.",
    )
    c.add_argument("--store", type=Path, required=True, help="the store to read (e.g. DIR/lme-merged.db)")
    c.add_argument("--data", type=Path, required=True, help="the LongMemEval JSON whose questions are the queries")
    c.add_argument("--k", default="10,30", help="comma-separated k (default 10,30; the pool takes 30 per list)")
    c.add_argument("--limit", type=int, help="only the first N questions")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=run_shortlist)


def run_shortlist(args: argparse.Namespace, settings: Settings) -> int:
    for path in (args.store, args.data):
        if not path.is_file():
            raise InputError("no such file", path=str(path))
    ks = tuple(positive_ints(args.k, "--k"))
    result = shortlist.run(args.store, args.data, default_embedder(settings.embedder), ks=ks, limit=args.limit)
    shortlist.print_report(result)
    if args.json:
        print(json.dumps(result))
    return 0
