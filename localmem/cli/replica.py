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
from localmem.storage.copies import replica, restore, rolling
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
        help="put a backup back: a backup file, the newest rolling backup, an age backup or a replica",
        description="Restore the store (--db, or PATH) from SOURCE: a file `localmem backup` wrote (or a rolling "
        "backup: --latest takes the newest), an age-encrypted backup (.age, with --age-identity), or a replica URL "
        "(file:///…, sftp://…, s3://…; --from URL is the same), as of the newest replicated transaction or of "
        "--timestamp. The copy is checked with integrity_check before it is put in place. An existing store is "
        "replaced only with --force, never while another process has it open (a daemon a query or hook left is "
        "stopped first; a `localmem serve` or MCP server you started must be stopped by you), and it is first "
        "copied beside itself (.NAME.before-restore-TIME), which the output names. A damaged newest Litestream "
        "state is replaced by the newest clean earlier one (--no-fallback refuses instead). Never copy a backup "
        "over a store by hand while anything may have it open.",
    )
    c.add_argument("source", nargs="?", metavar="SOURCE", help="a backup file, an .age backup or a replica URL")
    c.add_argument("path", nargs="?", type=Path, metavar="PATH", help="the store to write (default: --db's store)")
    c.add_argument(
        "--from", dest="url", metavar="URL", help="the replica or backup (then PATH may be the first argument)"
    )
    c.add_argument("--latest", action="store_true", help="the newest rolling backup of the store (`localmem backups`)")
    c.add_argument("--timestamp", metavar="T", help="point in time to restore (default: the newest)")
    c.add_argument("--force", action="store_true", help="replace PATH if it exists")
    c.add_argument(
        "--no-fallback",
        action="store_true",
        help="refuse a damaged restore instead of restoring the newest clean earlier transaction",
    )
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=cmd_restore)


def restore_target(args: argparse.Namespace, settings: Settings) -> tuple[str, Path]:
    """(source, store to write) from ``restore``'s arguments: ``SOURCE [PATH]``, ``--from URL
    [PATH]`` or ``--latest [PATH]``; PATH defaults to the store ``--db`` names."""
    given = [a for a in (args.source, args.path) if a is not None]
    if sum(x is not None and x is not False for x in (args.url, args.latest or None)) > 1:
        raise InputError("give one of SOURCE, --from URL or --latest")
    if args.url is not None or args.latest:
        if len(given) > 1:
            raise InputError("with --from or --latest, give at most the store's PATH")
        out = Path(given[0]) if given else Path(settings.db)
        if args.url is not None:
            return str(args.url), out
        return _latest(out), out
    if not given:
        raise InputError("nothing to restore from: give a backup file or replica URL, or --latest")
    return str(given[0]), (Path(given[1]) if len(given) > 1 else Path(settings.db))


def _latest(store: Path) -> str:
    newest = rolling.latest(store)
    if newest is None:
        raise InputError("no rolling backup of this store yet (`localmem backups` lists them)", path=str(store))
    return str(newest)


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
    source, out = restore_target(args, settings)
    if args.force and out.exists():
        stop_daemon(out)  # one a query or hook left: the store is replaced
    result = restore.restore(source, out, timestamp=args.timestamp, force=args.force, fallback=not args.no_fallback)
    back = result.get("fell_back")
    if isinstance(back, dict):
        print(
            f"warning: the newest replicated state (TXID {back['damaged_txid']}) failed its integrity check "
            f"({back['damage']}); restored the newest clean earlier one instead: TXID {back['txid']} of "
            f"{back['at']}, {back['transactions_back']} transaction(s) back. The damaged file is kept at "
            f"{back['kept_at']}.",
            file=sys.stderr,
        )
    if args.json:
        print_json(result)
        return 0
    print(f"restored {result['turns']} turns into {result['path']} from {result['from']}")
    kept = result.get("replaced")
    if isinstance(kept, dict):
        held = "a damaged store" if kept.get("damaged") else f"{kept['turns']} turns in {kept['sessions']} sessions"
        print(
            f"it replaced {held}, kept at {kept['kept_at']} "
            f"(`localmem restore {kept['kept_at']} --force` puts it back; delete it when you no longer need it)"
        )
    return 0
