"""``localmem bench import``: a big ChatGPT export (generated) imported by the real
``localmem ingest`` in a subprocess, killed part-way and resumed; time, turns/s, peak
RSS and the resume check. The table goes to stdout; ``--json`` adds the result as one
JSON line (the last line). Exit 1 when a check fails (turns missing or stored twice,
or no resume); an import stopped at ``--time-limit`` is reported as incomplete."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from localmem.bench import import_bench
from localmem.bench.preamble import stderr_log, working_folder
from localmem.cli.common import print_result
from localmem.config import Settings
from localmem.errors import InputError


def add_import_parser(bsub: Any) -> None:
    c = bsub.add_parser(
        "import",
        help="import a generated ChatGPT export of N messages with the real CLI: time, RSS, resume after SIGKILL",
        description="Write a realistic ChatGPT conversations.json of N messages (streamed; see docs/benchmarks.md"
        "#big-export-import), import it with `localmem ingest` in a subprocess, kill it with SIGKILL part-way, "
        "import again, and check that it resumed and stored every turn once.",
    )
    c.add_argument("--messages", type=int, default=100_000, help="messages in the export (default 100000)")
    c.add_argument(
        "--kill-at",
        type=float,
        default=0.5,
        help="SIGKILL the importer once this share of the turns is stored, then resume (0: one uninterrupted "
        "import; default 0.5)",
    )
    c.add_argument("--seed", type=int, default=0, help="seed of the generated export (default 0)")
    c.add_argument(
        "--progress-every", type=float, default=30.0, help="seconds between the importer's progress lines (default 30)"
    )
    c.add_argument(
        "--time-limit",
        type=float,
        metavar="SECONDS",
        help="stop the import (SIGTERM, handled as Ctrl-C) after this many seconds of importing and report what it reached, with "
        "its last rate and ETA (default: no limit)",
    )
    c.add_argument("--workdir", type=Path, help="keep the export and the store here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run_import)


def _run_import(args: argparse.Namespace, settings: Settings) -> int:
    if args.messages < 1:
        raise InputError(f"--messages must be 1 or more, got {args.messages}")
    if not 0 <= args.kill_at < 1:
        raise InputError(f"--kill-at must be at least 0 and below 1, got {args.kill_at}")
    if args.progress_every <= 0:
        raise InputError(f"--progress-every must be positive, got {args.progress_every}")
    if args.time_limit is not None and args.time_limit <= 0:
        raise InputError(f"--time-limit must be positive, got {args.time_limit}")
    with working_folder(args.workdir, "import") as workdir:
        result = import_bench.run(
            args.messages,
            workdir,
            kill_at=args.kill_at,
            seed=args.seed,
            importer=[sys.executable, "-m", "localmem.cli", "--embedder", settings.embedder],
            progress_every=args.progress_every,
            time_limit=args.time_limit,
            log=stderr_log("import"),
        )
    print_result(import_bench.table(result), result, args.json)
    return 0 if result["ok"] else 1
