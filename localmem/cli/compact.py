"""``localmem compact``: give the store's free pages back to the disk.

After a forget, a redaction by hand in the web view or a reembed, the file keeps the freed
pages, and they still hold the old bytes (forgotten text, old vectors, a stale mirror
snapshot) until SQLite reuses them. ``compact`` rebuilds the file without them
(``storage/engine/compact``: ``VACUUM``, then the WAL emptied). ``reembed --compact`` uses
the same :func:`shrink`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from localmem.cli.common import Subparsers, open_store, print_json
from localmem.config import Settings
from localmem.errors import InputError
from localmem.storage.engine import compact
from localmem.storage.write.store import Store

HELP = "rebuild the file without its free pages (what forgotten turns and old vectors left behind)"


def add_compact(sub: Subparsers) -> None:
    c = sub.add_parser(
        "compact",
        help=HELP,
        description="Rebuild the database file without its free pages (VACUUM) and empty its WAL. A forget, a "
        "redaction by hand or a reembed frees pages that still hold the old bytes until SQLite reuses them; this "
        "takes them out and gives the space back. It needs about the store's size free on disk while it runs, and "
        "no other process writing to the store: when one is, the file is left as it was and the exit code is 1.",
    )
    c.add_argument("--json", action="store_true", help="print {done, why, bytes_before, bytes_after}")
    c.set_defaults(func=cmd_compact)


def cmd_compact(args: argparse.Namespace, settings: Settings) -> int:
    if not Path(settings.db).is_file():
        raise InputError("no database yet; nothing to compact", path=str(settings.db))
    with open_store(settings) as store:
        shrunk = shrink(store, settings)
    if args.json:
        print_json(shrunk)
    say(shrunk, quiet=args.json, again="localmem compact")
    return 0 if shrunk["done"] else 1


def shrink(store: Store, settings: Settings) -> dict[str, Any]:
    """VACUUM the store: the file's size before and after, or why not."""
    db = Path(settings.db)
    before = db.stat().st_size
    why = compact.rebuild(store.conn)
    return {"done": not why, "why": why, "bytes_before": before, "bytes_after": db.stat().st_size}


def say(shrunk: dict[str, Any], *, quiet: bool, again: str) -> None:
    """One line: the sizes on stdout (unless ``quiet``), or the refusal on stderr (always)."""
    if shrunk["done"]:
        if not quiet:
            print(f"compacted the file: {_mb(shrunk['bytes_before'])} -> {_mb(shrunk['bytes_after'])}")
        return
    print(
        f"localmem: could not compact the file ({shrunk['why']}); it was left as it was. "
        f"Stop the other localmem processes using the store and run `{again}` again",
        file=sys.stderr,
    )


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"
