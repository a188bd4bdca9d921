"""``localmem replicate`` and ``localmem restore``: a live replica of the store and getting it back.

``replicate`` runs Litestream for a plaintext store (config written from the ``replica``
setting or ``--to``), or, for an encrypted store that Litestream cannot read, takes
encrypted snapshots on a schedule (``localmem.storage.copies.replica``). ``restore`` rebuilds a store
from either kind of replica, optionally as of a point in time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from localmem.cli.common import Subparsers, interrupts, print_json
from localmem.cli.secure import stop_daemon
from localmem.config import Settings
from localmem.errors import ConfigError, InputError
from localmem.storage.copies import replica, restore
from localmem.storage.engine import checkpoints, keys


def add_replicate(sub: Subparsers) -> None:
    c = sub.add_parser(
        "replicate",
        help="keep a live replica of the store (Litestream; encrypted snapshots for an encrypted store)",
        description="Run Litestream for the store, streaming every transaction to the replica within about a "
        "second (file:///…, sftp://…, s3://…; from --to or the `replica` setting), until interrupted. Other "
        "localmem processes keep writing meanwhile. An encrypted store cannot go through Litestream (it cannot "
        "read SQLite3MC pages): it gets an encrypted snapshot (online backup, the store's key) every --interval "
        "seconds in which it changed, into a file:// folder.",
    )
    c.add_argument("--to", metavar="URL", help="the replica URL (default: the `replica` setting, $LOCALMEM_REPLICA)")
    c.add_argument("--once", action="store_true", help="replicate once and exit")
    c.add_argument(
        "--snapshots",
        action="store_true",
        help="a plaintext store too: snapshots (SQLite's online backup) into a file:// folder instead of "
        "Litestream; nothing depends on Litestream's open replica defect, the lag is --interval",
    )
    c.add_argument("--interval", type=float, default=60.0, help="snapshots: seconds between them (default 60)")
    c.add_argument("--keep", type=int, default=48, help="snapshots: how many are kept (default 48)")
    c.add_argument(
        "--release",
        action="store_true",
        help="give up the replica: after a Litestream that was killed, localmem leaves checkpoints to it until "
        "`replicate` runs again; --release lets the store checkpoint itself again (the replica is then stale)",
    )
    c.add_argument(
        "--config-dir",
        type=Path,
        help="where the Litestream config is written (default: beside the store, in .localmem-replica/)",
    )
    c.set_defaults(func=cmd_replicate)


def add_restore(sub: Subparsers) -> None:
    c = sub.add_parser(
        "restore",
        help="rebuild a store from a replica (Litestream or encrypted snapshots), optionally as of a time",
        description="Restore the replica at --from into PATH (which must not exist, unless --force), as of the "
        "newest replicated transaction or of --timestamp (ISO 8601, UTC unless it says otherwise); the result is "
        "checked with integrity_check before it is put in place; if the newest state fails it (a known Litestream "
        "0.5 defect), the newest earlier transaction that passes is restored instead and you are told how far "
        "back that is (--no-fallback refuses instead). Also reads age-encrypted backups (.age files "
        "written by `localmem backup --encrypt-to`) when given one as --from.",
    )
    c.add_argument("--from", dest="source", required=True, metavar="URL", help="file:///…, sftp://…, s3://…")
    c.add_argument("--timestamp", metavar="T", help="point in time to restore (default: the newest)")
    c.add_argument("--force", action="store_true", help="replace PATH if it exists")
    c.add_argument(
        "--no-fallback",
        action="store_true",
        help="refuse a damaged restore instead of restoring the newest clean earlier transaction",
    )
    c.add_argument("--json", action="store_true", help="print JSON")
    c.add_argument("path", type=Path, help="the store file to write")
    c.set_defaults(func=cmd_restore)


def cmd_replicate(args: argparse.Namespace, settings: Settings) -> int:
    if args.release:
        if checkpoints.live(settings.db):
            raise ConfigError(f"Litestream replicates {settings.db} now; stop it first")
        held = checkpoints.release(Path(settings.db))
        print("released: the store checkpoints itself again" if held else "no replica held this store")
        return 0
    url = args.to or settings.replica
    if not url:
        raise ConfigError('no replica given: --to URL, or `replica = "file:///…"` in the config file')
    replica.check_url(url)
    db = Path(settings.db)
    if not db.is_file():
        raise InputError("no database yet; nothing to replicate", path=str(db))
    if args.interval <= 0 or args.keep < 1:
        raise InputError("--interval must be positive and --keep at least 1")
    if keys.is_encrypted(db) or args.snapshots:
        if not args.snapshots:
            print(
                "localmem: the store is encrypted and Litestream cannot read it: taking encrypted snapshots instead",
                file=sys.stderr,
            )
        with interrupts():
            return replica.snapshot_loop(
                db, url, interval=args.interval, keep=args.keep, once=args.once, say=lambda m: print(m, flush=True)
            )
    folder = args.config_dir or db.parent / ".localmem-replica"
    with interrupts():
        return replica.run_litestream(db, url, folder, once=args.once)


def cmd_restore(args: argparse.Namespace, settings: Settings) -> int:
    if args.force and Path(args.path).exists():
        stop_daemon(Path(args.path))  # one a query or hook left: the store is replaced
    out = restore.restore(
        args.source, args.path, timestamp=args.timestamp, force=args.force, fallback=not args.no_fallback
    )
    back = out.get("fell_back")
    if isinstance(back, dict):
        print(
            f"warning: the newest replicated state (TXID {back['damaged_txid']}) failed its integrity check "
            f"({back['damage']}); restored the newest clean earlier one instead: TXID {back['txid']} of "
            f"{back['at']}, {back['transactions_back']} transaction(s) back. The damaged file is kept at "
            f"{back['kept_at']}.",
            file=sys.stderr,
        )
    if args.json:
        print_json(out)
    else:
        print(f"restored {out['turns']} turns into {out['path']} from {out['from']}")
    return 0
