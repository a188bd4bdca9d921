"""``localmem capture``: store the coding agents' session logs from where the agents keep
them (Claude Code, Codex CLI, Gemini CLI, VS Code's chat, Copilot CLI, Cursor, OpenCode, aider;
``localmem.ingest.capture``), once; ``localmem
watch`` with no folder then follows them. Both take ``--only CLIENT`` and ``--dir
CLIENT=PATH``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from localmem.cli.common import Subparsers, interrupts, open_patient, print_json
from localmem.config import Settings
from localmem.errors import InputError
from localmem.ingest import capture
from localmem.util.progress import Progress


def add_agent_flags(c: argparse.ArgumentParser) -> None:
    c.add_argument(
        "--only",
        action="append",
        choices=capture.CLIENTS,
        metavar="CLIENT",
        help=f"only this agent's logs ({', '.join(capture.CLIENTS)}); repeatable (default: all)",
    )
    c.add_argument(
        "--dir",
        dest="dir_",
        action="append",
        default=[],
        metavar="CLIENT=PATH",
        help="read this agent's logs from PATH instead of its default folder (e.g. codex=/data/codex/sessions)",
    )


def agent_locations(args: argparse.Namespace) -> list[capture.Location]:
    folders: dict[str, Path] = {}
    for item in args.dir_:
        client, sep, path = item.partition("=")
        if not sep or not path:
            raise InputError(f"--dir {item!r}: expected CLIENT=PATH")
        folders[client] = Path(path)
    return capture.locations(args.only or (), folders)


def add_capture(sub: Subparsers) -> None:
    c = sub.add_parser(
        "capture",
        help="store the coding agents' sessions (Claude Code, Codex CLI, Gemini CLI, VS Code chat, Copilot CLI, Cursor, "
        "OpenCode, aider) from their folders",
        description="Read every session log the agents keep (~/.claude/projects, $CODEX_HOME or ~/.codex/sessions, "
        "~/.gemini/tmp, VS Code's chatSessions under its User folder, $COPILOT_HOME or ~/.copilot/session-state, "
        "~/.cursor/projects, OpenCode's database in $XDG_DATA_HOME or ~/.local/share/opencode (read-only); aider's .aider.chat.history.md only when asked: --dir aider=FOLDER of repositories) "
        "and store what is not stored yet. Resumable and idempotent: run it again any time; "
        "`localmem watch` (no folder) keeps up from then on. Secrets are redacted before anything is stored. "
        "A log written in the last 2 minutes is read up to the step its agent is still in; capture names such logs "
        "and the time from which it reads them whole (--json: held).",
    )
    add_agent_flags(c)
    c.add_argument("--json", action="store_true", help="print a JSON summary (and no progress)")
    c.add_argument("--quiet", action="store_true", help="no progress on stderr")
    c.add_argument(
        "--progress-every",
        type=float,
        metavar="SECONDS",
        help="progress (MB, rate, ETA) on stderr at this interval, also with --json or when stderr is not a terminal",
    )
    c.set_defaults(func=cmd_capture)


def cmd_capture(args: argparse.Namespace, settings: Settings) -> int:
    locs = agent_locations(args)
    every = args.progress_every
    if every is not None and every <= 0:
        raise InputError(f"--progress-every must be positive, got {every}")
    quiet = args.quiet or (args.json and every is None)
    with open_patient(settings) as store, interrupts():
        bar = Progress("capture", None, unit="MB", scale=1e6, quiet=quiet, every=every)

        def total(n: int) -> None:
            bar.total = n

        try:
            with bar:
                report = capture.backfill(store, locs, progress=bar.advance, on_total=total)
        except KeyboardInterrupt:
            print("localmem: interrupted; what was read is stored, run it again to continue", file=sys.stderr)
            return 130
    if args.json:
        print_json(report.to_dict())
        return 0
    for loc in report.locations:
        print(f"  {loc['client']:<12} {loc['folder']}", file=sys.stderr)
    print(report.line())
    for err in report.errors[:10]:
        print(f"  skipped {err['file']}: {err['error']}", file=sys.stderr)
    return 0
