"""``localmem backups``: the store's rolling backups (``storage/copies/rolling``), newest
first, with the time each was taken, its size, turns and whether it is encrypted, and what
they take on disk together; ``--now`` takes one at once (the processes that hold the store
take them on their own, daily by default: ``[backups]``).

Listing reads the folder and each backup's record, never the store: it works without the
store's key and while any process holds the store.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from localmem.cli.common import Subparsers, print_json
from localmem.config import Settings
from localmem.storage.copies import rolling

HELP = "list the rolling backups that localmem takes on its own (or take one now)"


def add_backups(sub: Subparsers) -> None:
    c = sub.add_parser(
        "backups",
        help=HELP,
        description="List the store's rolling backups, newest first: when each was taken (UTC), its size, its "
        "turns and whether it is encrypted (with the store's key, as the store is), and their total disk cost. A "
        "process that holds the store (the daemon a query or hook starts, the MCP server, `localmem serve`) takes "
        "one when the newest is older than backups.interval_hours (24), keeps backups.keep (7) and deletes older "
        "ones; backups.enabled = false turns that off. They live in a private folder per store under the user data "
        "dir (printed here); `localmem restore` puts one back (docs/security.md, Rolling backups).",
    )
    c.add_argument("--now", action="store_true", help="take one now (whether or not one is due), then prune")
    c.add_argument("--json", action="store_true", help="print {folder, enabled, total_bytes, backups: [...]}")
    c.set_defaults(func=cmd_backups)


def cmd_backups(args: argparse.Namespace, settings: Settings) -> int:
    store = Path(settings.db)
    code = 0
    if args.now:
        done = rolling.tick(store, settings.backups, datetime.now(UTC), force=True)
        if done.skipped is not None:
            print(f"localmem: no backup taken: {done.skipped}", file=sys.stderr)
            code = 1
    have = rolling.list_backups(store)
    total = rolling.total_bytes(have)
    where = rolling.folder(store)
    if args.json:
        print_json(
            {
                "folder": str(where),
                "enabled": settings.backups.enabled,
                "keep": settings.backups.keep,
                "interval_hours": settings.backups.interval_hours,
                "total_bytes": total,
                "backups": [b.to_dict() for b in have],
            }
        )
        return code
    state = "on" if settings.backups.enabled else "off (backups.enabled = false)"
    print(f"backups of {store}: {state}, folder {where}")
    for b in have:
        turns = "?" if b.turns is None else f"{b.turns:,}"
        enc = {True: "encrypted", False: "plaintext", None: "?"}[b.encrypted]
        print(f"  {b.taken:%Y-%m-%d %H:%M:%S}Z  {b.bytes / rolling.MB:9.1f} MB  {turns:>9} turns  {enc}")
    print(f"{len(have)} backups, {total / rolling.MB:.1f} MB in all")
    return code
