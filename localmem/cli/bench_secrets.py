"""``localmem bench secrets``: the secrets guard's catch rate per form and its false
positives on chat and code (``localmem.bench.secrets_bench``). The table goes to stdout;
``--json`` adds the result as one JSON line (the last line)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from localmem.bench import secrets_bench
from localmem.config import Settings
from localmem.errors import InputError


def add_secrets_bench_parser(bsub: Any) -> None:
    c = bsub.add_parser(
        "secrets",
        help="the secrets guard: synthetic secrets caught per form, false positives on chat turns and code",
        description="Run the secrets guard over a synthetic corpus (every kind of secret in the forms people paste: "
        ".env, YAML, INI, code, tool JSON, shell, URLs, .netrc/.pgpass, CSV, headers, prose, wrapped, URL-encoded, "
        "base64) and count what it catches per form; then count the LoCoMo / LongMemEval turns and the code snippets "
        "it changes (false positives). Touches no store.",
    )
    c.add_argument("--locomo", type=Path, help="a LoCoMo JSON file: its turns are counted for false positives")
    c.add_argument("--longmemeval", type=Path, help="a LongMemEval JSON file (.json or .json.gz), the same")
    c.add_argument("--seed", type=int, default=50, help="the corpus's and snippets' random seed (default 50)")
    c.add_argument("--per-kind", type=int, default=2, help="corpus items per kind and form (default 2)")
    c.add_argument("--snippets", type=int, default=300, help="code snippets drawn (default 300)")
    c.add_argument(
        "--code", type=Path, help="run the guard of this source tree instead (an older checkout, to compare)"
    )
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    if args.per_kind < 1 or args.snippets < 0:
        raise InputError("--per-kind must be 1 or more and --snippets 0 or more")
    for path in (args.locomo, args.longmemeval):
        if path is not None and not path.is_file():
            raise InputError("no such file", path=str(path))
    result = secrets_bench.run(
        seed=args.seed,
        per_kind=args.per_kind,
        locomo=args.locomo,
        longmemeval=args.longmemeval,
        code=args.code,
        snippets=args.snippets,
    )
    secrets_bench.print_report(result)
    if args.json:
        print(json.dumps(result))
    return 0
