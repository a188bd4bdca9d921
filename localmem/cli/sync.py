"""``localmem sync DIR`` (once, or ``--watch``), ``localmem sync status [DIR]``, and the
background sync of ``watch --sync DIR`` (``localmem.sync.background``; the MCP server's
``--sync`` is ``mcp_server.serve``'s)."""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from localmem.cli.common import Subparsers, interrupts, open_patient, print_json
from localmem.config import Settings
from localmem.errors import LocalmemError
from localmem.sync.background import syncing
from localmem.sync.keys import add_key_flags, add_sync_flags, keyring
from localmem.sync.run import PLAINTEXT_WARNING, Pass, status, sync_once, watch


def add_sync(sub: Subparsers) -> None:
    c = sub.add_parser(
        "sync",
        help="share this memory with your other devices through a folder a sync tool carries",
        description="Append this device's changes to DIR/<device-id>/ as immutable segment files and fold every "
        "other device's segments into this store. DIR is a folder that Syncthing, a cloud drive or an rclone mount "
        "carries between devices (docs/sync.md). `localmem sync status [DIR]` shows, per device, what was folded, "
        "the lag and anything refused (a folder named 'status': write ./status).",
    )
    c.add_argument("dir", nargs="+", type=Path, help="the sync folder (or: status [DIR])")
    c.add_argument("--watch", action="store_true", help="keep syncing every --interval seconds until Ctrl-C")
    c.add_argument("--interval", type=float, default=10.0, help="seconds between passes with --watch (default 10)")
    add_key_flags(c)
    c.add_argument("--json", action="store_true", help="print JSON (one object per pass)")
    c.set_defaults(func=cmd_sync)


def cmd_sync(args: argparse.Namespace, settings: Settings) -> int:
    dirs: list[Path] = args.dir
    if str(dirs[0]) == "status":
        if len(dirs) > 2:
            raise LocalmemError("sync status takes at most one folder")
        with open_patient(settings) as store:
            report = status(store, dirs[1] if len(dirs) == 2 else None)
        _show_status(report, args.json)
        return 0
    if len(dirs) != 1:
        raise LocalmemError("sync takes one folder (or: sync status [DIR])")
    root, keys = dirs[0], keyring(args)
    if not keys.encrypts:
        print(f"localmem sync: warning: {PLAINTEXT_WARNING.format(root=root)}", file=sys.stderr)
    with open_patient(settings) as store:
        if not args.watch:
            done = sync_once(store, root, keys)
            _show(done, args.json)
            return 1 if done.folded.refused else 0
        stop = threading.Event()
        try:
            with interrupts():
                watch(
                    store,
                    root,
                    keys,
                    args.interval,
                    stop,
                    lambda p: _show(p, args.json),
                    lambda line: print(f"localmem sync: {line}", file=sys.stderr, flush=True),
                )
        except KeyboardInterrupt:
            stop.set()
    return 0


def _show(done: Pass, as_json: bool) -> None:
    if as_json:
        print_json(done.to_dict())
        sys.stdout.flush()
        return
    f, e = done.folded, done.exported
    print(
        f"device {done.device}: exported {e.changes} changes in {e.segments} segments ({e.bytes:,} bytes); "
        f"folded {f.segments} segments ({f.applied.turns} new turns, {f.applied.forgotten} forgotten, "
        f"{f.applied.derived} derived, {f.applied.pending} waiting for their turn) in {done.seconds:.2f} s"
    )
    if e.rewritten or e.removed:
        print(f"  wrote {e.rewritten} of its own segments again (a key change or a forget), removed {e.removed}")
    for reason in f.incomplete:
        print(f"  still arriving: {reason}")
    for reason in f.refused:
        print(f"  refused: {reason}")


def _show_status(report: dict[str, object], as_json: bool) -> None:
    if as_json:
        print_json(report)
        return
    print(f"this device: {report['device']} (unexported changes: {report['unexported_changes']})")
    for d in report["devices"]:  # type: ignore[attr-defined]
        me = " (this device)" if d["this_device"] else ""
        print(
            f"  {d['device']}{me}: last segment folded {d['last_segment_folded']}, lag {d['lag_segments']} segments, "
            f"{d['bytes_folded']:,} bytes, {d['changes_folded']} changes"
        )
    for r in report["refused"]:  # type: ignore[attr-defined]
        print(f"  {'incomplete' if r['incomplete'] else 'REFUSED'}: {r['device']}/{r['name']}: {r['reason']}")
    print(
        f"derived changes waiting for their turn: {report['pending_derived']}; forgotten turns: {report['forgotten']}"
    )


def add_background_flags(c: argparse.ArgumentParser) -> None:
    add_sync_flags(c)


@contextmanager
def background(args: argparse.Namespace, settings: Settings) -> Iterator[None]:
    """``watch --sync DIR``: sync on a thread of its own while the body runs
    (``localmem.sync.background``; its log on stderr)."""
    root: Path | None = getattr(args, "sync", None)
    if root is None:
        yield
        return

    def say(line: str) -> None:
        print(f"localmem: sync: {line}", file=sys.stderr, flush=True)

    with syncing(lambda: open_patient(settings), root, keyring(args, "sync-"), args.sync_interval, say):
        yield
