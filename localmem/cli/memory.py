"""The commands that put turns into memory or take them out: ingest, watch, forget, reindex, backup, demo.

Each ``add_*`` function adds one subcommand to the parser; ``localmem.cli.build_parser`` calls
them in the order ``localmem --help`` lists the commands. Ingesting the same file twice writes
nothing new; the demo uses a throwaway database unless ``--db`` was given.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from localmem.cli import sync
from localmem.cli.capture import add_agent_flags, agent_locations
from localmem.cli.common import Subparsers, interrupts, open_patient, open_store, print_json, say_waiting
from localmem.cli.enrichment import watch_worker
from localmem.config import Settings
from localmem.errors import InputError
from localmem.ingest import FORMATS, detect, runner
from localmem.ingest.watch import Watcher, stop_on_signals
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.copies import age
from localmem.storage.copies.backup import backup
from localmem.storage.engine.retry import Patience
from localmem.util.progress import Progress

DEMO_QUESTION = "When is Maya's half marathon, and what has she changed in her training?"


def add_ingest(sub: Subparsers) -> None:
    c = sub.add_parser(
        "ingest",
        help="ingest a chat log, a chat export or a benchmark file",
        description="Ingest a chat log (format detected). Re-ingesting writes nothing new; a grown log writes "
        "only what is new; an interrupted ingest continues where it stopped.",
    )
    c.add_argument("file", type=Path, help="the file to ingest")
    c.add_argument("--format", choices=list(FORMATS), help="file format (default: detect)")
    c.add_argument("--question", help="LongMemEval: ingest only this question's haystack")
    c.add_argument("--sample", help="LoCoMo: ingest only this sample_id")
    c.add_argument(
        "--skip-bad", action="store_true", help="step over bad conversations/lines and report them, instead of refusing"
    )
    c.add_argument(
        "--json", action="store_true", help="print a JSON summary (and no progress, unless --progress-every)"
    )
    c.add_argument("--quiet", action="store_true", help="no progress on stderr")
    c.add_argument(
        "--progress-every",
        type=float,
        metavar="SECONDS",
        help="progress (turns, rate, ETA) on stderr at this interval, also with --json or when stderr is not a "
        "terminal (default: redrawn on a terminal; to a log, every 10 s growing to 60 s on long imports)",
    )
    c.set_defaults(func=cmd_ingest)


def add_watch(sub: Subparsers) -> None:
    c = sub.add_parser(
        "watch",
        help="ingest new and changed chat logs in a folder (or the coding agents' sessions) as they appear",
        description="Watch a folder: ingest files once they stop changing, catch up on start with files changed "
        "meanwhile. Renames are not ingested again; deleting a file keeps its memories. With no folder: follow "
        "the coding agents' session logs (the folders `localmem capture` reads, VS Code's chat sessions "
        "included), each read as it grows, every turn once, in order; an agent's folder that does not exist yet "
        "is watched from the moment it appears. Stop with Ctrl-C.",
    )
    c.add_argument("dir", type=Path, nargs="?", help="the folder to watch (default: the coding agents' folders)")
    c.add_argument("--recursive", action="store_true", help="watch sub-folders too")
    c.add_argument(
        "--settle",
        type=float,
        help="seconds a file must stay unchanged before it is read (default 2; an agent's log: read this long "
        "after its first change, default 0.5)",
    )
    c.add_argument(
        "--final-after",
        type=float,
        default=30.0,
        help="an agent's log quiet this many seconds is read to its end, a step still open included (default 30)",
    )
    add_agent_flags(c)
    c.add_argument("--json", action="store_true", help="print one JSON object per event on stdout")
    sync.add_background_flags(c)
    c.set_defaults(func=cmd_watch)


def add_forget(sub: Subparsers) -> None:
    c = sub.add_parser("forget", help="delete turns (with their cues, edges and vectors)")
    c.add_argument("--turn", type=int, action="append", default=[], help="a turn id (repeatable)")
    c.add_argument("--session", help="every turn of this session key")
    c.add_argument("--before", help="every turn before this time")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=cmd_forget)


def add_reindex(sub: Subparsers) -> None:
    c = sub.add_parser("reindex", help="re-embed everything with the configured embedder")
    c.set_defaults(func=cmd_reindex)


def add_backup(sub: Subparsers) -> None:
    c = sub.add_parser(
        "backup",
        help="copy the database to a file, safely while it is in use",
        description="Write a consistent copy of the database (SQLite's online backup: one snapshot, while other "
        "processes go on writing), checked with integrity_check. To restore: `localmem restore BACKUP --force` (checked first; the store it replaces is kept "
        "beside it). Never copy a backup over a store by hand while anything may have it open.",
    )
    c.add_argument("path", type=Path, help="the backup file to write")
    c.add_argument("--force", action="store_true", help="replace the file if it exists")
    c.add_argument(
        "--encrypt-to",
        action="append",
        metavar="RECIPIENT",
        help="age-encrypt the backup to this recipient (age1…, ssh-ed25519 …, or a file of them); repeatable",
    )
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=cmd_backup)


def cmd_backup(args: argparse.Namespace, settings: Settings) -> int:
    if getattr(args, "encrypt_to", None):
        recips = age.recipients(args.encrypt_to)
        if not Path(settings.db).is_file():
            raise InputError("no database yet; nothing to back up", path=str(settings.db))
        out = age.backup_encrypted(Path(settings.db), args.path, recips, force=args.force)
        if args.json:
            print_json(out)
        else:
            print(f"backed up {out['turns']} turns in {out['sessions']} sessions to {out['path']} (age-encrypted)")
        return 0
    report = backup(Path(settings.db), args.path, force=args.force, patience=Patience(say_waiting))
    if args.json:
        print_json(report.to_dict())
    else:
        print(f"backed up {report.turns} turns in {report.sessions} sessions to {report.path} ({report.bytes:,} bytes)")
    return 0


def add_demo(sub: Subparsers) -> None:
    c = sub.add_parser("demo", help="ingest the bundled sample conversation and answer a question from it")
    c.add_argument("--question", default=DEMO_QUESTION, help="the question to reconstruct context for")
    c.add_argument("--budget", type=int, default=300, help="token budget (default 300)")
    c.set_defaults(func=cmd_demo)


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    if not args.file.is_file():
        raise InputError("no such file", path=str(args.file))
    if age.is_age(args.file):  # an age-encrypted export: read it decrypted, from memory only
        fd, plain = age.decrypt_to_memory(args.file, age.identities())
        try:
            return _ingest(argparse.Namespace(**{**vars(args), "file": plain}), settings)
        finally:
            os.close(fd)
    return _ingest(args, settings)


def _ingest(args: argparse.Namespace, settings: Settings) -> int:
    fmt = args.format or detect(args.file)  # before the model loads: a wrong file fails fast
    opts = {"question": args.question, "sample": args.sample}
    every = getattr(args, "progress_every", None)
    if every is not None and every <= 0:
        raise InputError(f"--progress-every must be positive, got {every}")
    quiet = getattr(args, "quiet", False) or (args.json and every is None)
    with open_patient(settings) as store, interrupts():
        plan = runner.start(store, args.file, fmt, skip_bad=getattr(args, "skip_bad", False), **opts)
        left = plan.stat.size - plan.start.offset
        if plan.start.index and not quiet:
            done = 100 * plan.start.offset / max(plan.stat.size, 1)
            say(f"resuming {args.file} after unit {plan.start.index} ({done:.0f}% of the file already stored)")
        try:
            with Progress("checking", left, unit="MB", scale=1e6, quiet=quiet, every=every) as check:
                runner.check(plan, progress=check.advance)
        except KeyboardInterrupt:
            return interrupted(args.file, "while checking the file, before this run stored anything")
        bar = Progress("ingest", plan.turns, unit="turns", quiet=quiet, every=every)
        try:
            with bar:
                report = runner.run(store, plan, progress=bar.advance)
        except KeyboardInterrupt:
            return interrupted(args.file, f"after {bar.done:,} of {plan.turns:,} turns; those are stored")
    if args.json:
        print_json(report.to_dict())
    else:
        print(report.line())
        for err in report.errors:
            print(f"  skipped bad unit: {err['error']}", file=sys.stderr)
    return 0


def interrupted(path: Path, when: str) -> int:
    say(f"interrupted {when}. Run the same command again to continue where it stopped: localmem ingest {path}")
    return 130


def say(text: str) -> None:
    print(f"localmem: {text}", file=sys.stderr, flush=True)


def cmd_watch(args: argparse.Namespace, settings: Settings) -> int:
    def show(event: dict[str, Any]) -> None:
        if args.json:
            print_json(event)
            sys.stdout.flush()
        else:
            print(f"localmem watch: {event['message']}", file=sys.stderr)

    if args.dir is not None and (args.only or args.dir_):
        raise InputError("--only and --dir choose agents' folders; give them without a folder to watch")
    with open_patient(settings) as store:
        store.patience = None  # the watcher backs off on its own and keeps watching
        opts: dict[str, Any] = {"on_event": show, "final_after": args.final_after}
        if args.settle is not None:
            opts["settle"] = args.settle
        if args.dir is None:
            watcher = Watcher.agents(store, agent_locations(args), **opts)
        else:
            watcher = Watcher(store, args.dir, recursive=args.recursive, **opts)
        with sync.background(args, settings):
            watcher.run(stop_on_signals(), worker=watch_worker(settings))
    return 0


def cmd_forget(args: argparse.Namespace, settings: Settings) -> int:
    with open_patient(settings) as store:
        n = store.forget(turn_ids=args.turn, session=args.session, before=args.before)
    if args.json:
        print_json({"deleted_turns": n})
    else:
        print(f"forgot {n} turns")
    return 0


def cmd_reindex(args: argparse.Namespace, settings: Settings) -> int:

    with open_patient(settings, rebind=True) as store:
        n = store.reindex()
    print(f"re-embedded {n} turns with {store.embedder.model_id}")
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    sample = resources.files("localmem") / "data" / "sample_conversation.jsonl"
    db = settings.db if args.db else Path(tempfile.mkdtemp(prefix="localmem-demo-")) / "demo.db"
    with resources.as_file(sample) as path:
        print(f"$ localmem --db {db} ingest {path.name}")
        ns = argparse.Namespace(file=path, format="jsonl", question=None, sample=None, json=False)
        cmd_ingest(ns, settings.with_overrides(db=db))
    print(f'\n$ localmem --db {db} query "{args.question}" --budget {args.budget}\n')
    with open_store(settings.with_overrides(db=db)) as store:
        ctx = reconstruct(store, args.question, args.budget)
    print(ctx.text)
    print(
        f"\n[{ctx.tokens} of {args.budget} tokens; turns: "
        + ", ".join(f"{t.turn_id} ({t.reason})" for t in ctx.turns)
        + "]"
    )
    return 0
