"""``localmem reembed``: move a store to another embedder while it stays readable.

The vectors are built into a second set of tables batch by batch (``storage/write/reembed``),
with progress and an ETA on stderr; reads (queries, a running ``serve``) keep using the
old set until one transaction switches them; a killed run continues where it stopped
when run again with the same ``--model``.
"""

from __future__ import annotations

import argparse
import sys

from localmem.cli.common import Subparsers, open_patient, print_json
from localmem.cli.compact import say, shrink
from localmem.config import Settings
from localmem.models.registry import default_embedder
from localmem.storage.write import reembed
from localmem.util.progress import Progress

HELP = "embed every turn and cue again with another embedder, reads working throughout"


def add_reembed(sub: Subparsers) -> None:
    c = sub.add_parser(
        "reembed",
        help=HELP,
        description="Embed every turn and cue again with another embedder (--model) into a second set of vector "
        "tables while reads keep using the current ones, then switch in one transaction and drop the old ones. "
        "Resumable: run it again after an interruption. Afterwards the store is read with the new embedder "
        "(an --embedder setting naming another one is refused).",
    )
    c.add_argument(
        "--model",
        help="the new embedder: 'default' (the packaged localmem-chat-minilm-l6), 'minilm' (the packaged "
        "all-MiniLM-L6-v2), an ONNX embedder folder, or a GGUF embedding "
        "model file (see `localmem models`); default: the configured embedder",
    )
    c.add_argument("--batch", type=int, default=reembed.BATCH, help=f"turns per transaction (default {reembed.BATCH})")
    c.add_argument("--discard", action="store_true", help="drop an unfinished reembed's tables instead, and stop")
    c.add_argument(
        "--compact",
        action="store_true",
        help="afterwards, rebuild the file without the old vectors' free pages (VACUUM: the file shrinks by about "
        "their size; needs that much free disk while it runs, and no other process using the store)",
    )
    c.add_argument("--json", action="store_true", help="print a JSON summary")
    c.add_argument("--quiet", action="store_true", help="no progress on stderr")
    c.add_argument(
        "--progress-every", type=float, metavar="SECONDS", help="progress (count, rate, ETA) on stderr at this interval"
    )
    c.set_defaults(func=cmd_reembed)


def cmd_reembed(args: argparse.Namespace, settings: Settings) -> int:
    with open_patient(settings, rebind=True) as store:
        if args.discard:
            dropped = reembed.discard(store)
            if args.json:
                print_json({"discarded": dropped})
            else:
                print(f"discarded the unfinished reembed to {dropped}" if dropped else "no reembed to discard")
            return 0
        target = default_embedder(args.model or settings.embedder)
        quiet = args.quiet or (args.json and args.progress_every is None)
        with Progress("reembed", None, unit="turns+cues", quiet=quiet, every=args.progress_every) as bar:
            base: list[int] = []  # what an earlier run left done: the bar counts this run's work

            def on_batch(done: int, total: int) -> None:
                if not base:
                    base.append(done)
                bar.total = total - base[0]
                if done - base[0] > bar.done:
                    bar.advance(done - base[0] - bar.done)

            report = reembed.reembed(store, target, batch=max(1, args.batch), on_batch=on_batch)
        shrunk = shrink(store, settings) if args.compact else None
    if args.json:
        print_json(report.as_dict() | ({"compact": shrunk} if shrunk is not None else {}))
    elif not report.switched:
        print(f"the store already uses {report.embedder}; nothing to do", file=sys.stderr)
    else:
        print(
            f"re-embedded {report.embedded} of {report.units} turns and extracted cues with {report.embedder} "
            f"({report.dim}-d) in {report.seconds:.1f} s ({report.rate:.1f}/s)"
            + (", resumed" if report.resumed else "")
            + f"; the store now uses it (was {report.previous})"
        )
    if shrunk is not None:
        say(shrunk, quiet=args.json, again="localmem reembed --compact")
    return 1 if shrunk is not None and not shrunk["done"] else 0
