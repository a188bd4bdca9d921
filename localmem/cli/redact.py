"""``localmem redact --scan``: find the secrets and private spans older versions stored (or
that today's guard catches and an older one missed) and take them out
(``localmem.storage.write.redaction``); ``--dry-run`` only counts them, by kind, and names
the turns. Never prints a secret: kinds, counts and turn ids only."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from localmem.cli.common import Subparsers, interrupts, open_patient, print_json
from localmem.config import Settings
from localmem.errors import InputError
from localmem.storage.write import redaction
from localmem.util.progress import Progress

TURNS_SHOWN = 20  # turn ids printed (--json: all)
OUT_OF_REACH = (
    "sync segments already written (immutable; the next `localmem sync` carries the forgets and the rewritten turns)",
    "replicas and backups made before now (make new ones; delete the old ones)",
    "exports written before now",
    "other devices' stores, until they fold those forgets",
)


def add_redact(sub: Subparsers) -> None:
    c = sub.add_parser(
        "redact",
        help="find and take out secrets and private spans that older versions stored",
        description="Scan every turn, session field, edge reason, topic label, model reply and journal row for "
        "secrets (replaced by [secret: kind]) and <private> spans (dropped), rewrite what holds any, then rebuild "
        "the file so no copy of the old text is left in it. Finds what older versions stored and what an older "
        "guard missed. --dry-run only counts (by kind, with the turn ids; never the secrets). Stop other localmem "
        "processes first, or the file cannot be rebuilt.",
    )
    c.add_argument("--scan", action="store_true", required=True, help="scan the whole store (required)")
    c.add_argument(
        "--dry-run",
        action="store_true",
        help="count what would be redacted, by place and kind, and name the turns; change nothing",
    )
    c.add_argument("--json", action="store_true", help="print JSON")
    c.add_argument("--quiet", action="store_true", help="no progress on stderr")
    c.set_defaults(func=cmd_redact)


def cmd_redact(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.db.exists():
        raise InputError("no database yet; nothing to redact", path=str(settings.db))
    quiet = args.quiet or args.json
    with open_patient(settings) as store, interrupts():
        with Progress("scan", store.stats()["turns"], unit="turns", quiet=quiet) as bar:
            found = redaction.scan(store.conn, progress=bar.advance)
        done: dict[str, Any] | None = None
        if not args.dry_run and (found.places or found.turns):
            with Progress("redact", len(found.turns), unit="turns", quiet=quiet) as bar:
                done = redaction.apply(store, found, progress=bar.advance).to_dict()
    report = {**found.to_dict(), "turn_ids": list(found.turns)}
    result = {"dry_run": args.dry_run, "found": report, "applied": done, "out_of_reach": list(OUT_OF_REACH)}
    if args.json:
        print_json(result)
        return 0
    places = ", ".join(f"{n} {p}" for p, n in sorted(found.places.items())) or "nothing"
    print(
        f"scanned {found.scanned['turns']} turns and {sum(found.scanned.values()) - found.scanned['turns']} other rows: found {places}"
    )
    for kind, n in found.kinds.most_common():
        print(f"  {kind:<24} {n}")
    if found.turns:
        shown = ", ".join(str(t) for t in found.turns[:TURNS_SHOWN])
        more = (
            f" and {len(found.turns) - TURNS_SHOWN} more (--json lists all)" if len(found.turns) > TURNS_SHOWN else ""
        )
        print(f"turns: {shown}{more}")
    if args.dry_run:
        print("dry run: nothing changed")
        return 0
    if done is not None:
        print(
            f"rewrote {done['turns_rewritten']} turns, forgot {done['turns_forgotten']} left empty, redacted "
            + ", ".join(f"{n} {p}" for p, n in done["in_place"].items())
            + (", " if done["in_place"] else "")
            + f"{done['journal_rows']} journal rows"
        )
        if not done["vacuumed"]:
            print(
                f"could not rebuild the file ({done['not_vacuumed']}): stop other localmem processes and run it again",
                file=sys.stderr,
            )
    print("not reached: " + "; ".join(OUT_OF_REACH), file=sys.stderr)
    return 0
