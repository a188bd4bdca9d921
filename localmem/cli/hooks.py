"""``localmem hooks install | uninstall | status``: localmem's entries in a coding agent's
settings (``localmem.hooks.install``), and what the hooks did (``localmem.hooks.status``).
The entries run ``python -m localmem.hooks``, not this command.

``install`` carries the store's key file (``localmem --key-file FILE``, or
``$LOCALMEM_KEY_FILE``) into the entries as its path, and refuses, writing nothing, when the
store is encrypted and the key this command has does not open it (every hook would fail
``key missing``). For Codex it says that the entries must be trusted in Codex's ``/hooks``
view before Codex runs them; ``status`` says, per entry, whether they are.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from localmem.cli.common import Subparsers, print_json
from localmem.config import Settings
from localmem.errors import ConfigError, InputError
from localmem.hooks import install, status
from localmem.hooks.events import CLIENTS
from localmem.storage.engine import keys

CODEX_TRUST = (
    "Codex runs these only once you trust them: open codex, type /hooks, review localmem's entries and trust "
    "them (Codex keeps a hash of each, so an entry installed again with another --db, --key-file or interpreter "
    "must be trusted again). `localmem hooks status` says whether they are. "
    "`codex --dangerously-bypass-hook-trust` runs hooks unreviewed: for tests only, never for your own sessions."
)


def add_hooks(sub: Subparsers) -> None:
    c = sub.add_parser(
        "hooks",
        help="install localmem's hooks into Claude Code, Codex CLI or Gemini CLI; or remove them; or show them",
        description="Hooks make an agent's sessions memory by themselves: a session starts with what the project "
        "decided and left open, a prompt gets the memory that bears on it (only above a relevance bar), and each "
        "turn is stored when the agent stops. A hook never breaks the agent; `localmem doctor` shows what failed.",
    )
    hsub = c.add_subparsers(title="actions", metavar="ACTION")
    for name, helptext in (
        (
            "install",
            "merge the hook entries into the client's settings file (a backup first); `localmem --key-file FILE "
            "hooks install` puts the key file's path into each entry; Codex then asks you to trust them in /hooks",
        ),
        ("uninstall", "take localmem's hook entries out of the client's settings file (a backup first)"),
        (
            "status",
            "which hooks are installed and runnable (interpreter, key file, Codex's trust), and what they did "
            "(runs, replies, failures, the last error)",
        ),
    ):
        a = hsub.add_parser(name, help=helptext, description=helptext)
        a.add_argument(
            "--client",
            choices=CLIENTS,
            required=name != "status",
            help="the agent" + (" (default: all three)" if name == "status" else ""),
        )
        a.add_argument("--path", type=Path, help="the settings file (default: the client's own)")
        a.add_argument("--json", action="store_true", help="print JSON")
        a.set_defaults(func={"install": cmd_install, "uninstall": cmd_uninstall, "status": cmd_status}[name])


def cmd_install(args: argparse.Namespace, settings: Settings) -> int:
    db = Path(settings.db)
    key_file, notes = _key_for_hooks(db)
    target, backup = install.install(db, args.client, args.path, key_file)
    made, notes = _status_file(db, notes)
    found = install.inspect(args.client, target)
    if args.client == "codex":
        notes.append(CODEX_TRUST)
    if args.json:
        print_json(
            {
                **found.to_dict(),
                "backup": str(backup) if backup else None,
                "status_file": made,
                "key_file": str(key_file) if key_file else None,
                "notes": notes,
            }
        )
        return 0
    print(f"installed localmem's hooks into {target}" + (f" (backup: {backup})" if backup else ""))
    for event, cmd in found.events.items():
        print(f"  {event:<14} {cmd}")
    for note in notes:
        print(f"note: {note}")
    for p in found.problems:
        print(f"  problem: {p}", file=sys.stderr)
    print("restart the agent to load them; `localmem hooks status` shows what they do", file=sys.stderr)
    return 0


def _key_for_hooks(db: Path) -> tuple[Path | None, list[str]]:
    """The key file whose path the entries carry (``--key-file`` / ``$LOCALMEM_KEY_FILE``),
    and notes; InputError, before anything is written, when the store is encrypted and the
    key this process has does not open it."""
    named = os.environ.get(keys.KEY_FILE_ENV)
    key_file = Path(named).expanduser().resolve() if named else None
    notes: list[str] = []
    try:
        if key_file is not None:
            install.check_key(db, key_file)
        elif keys.is_encrypted(db) and not keys.key_opens(db):
            raise ConfigError(f"{db}: {keys.NEEDS_KEY}")
    except ConfigError as exc:
        raise InputError(
            f"{exc}; every hook would fail 'key missing', so nothing was written "
            "(`localmem --key-file FILE hooks install …` with the store's key file)"
        ) from exc
    if key_file is None and keys.is_encrypted(db) and os.environ.get(keys.KEY_ENV):
        notes.append(
            "the key came from $LOCALMEM_KEY, which the hooks see only if the agent's environment has it: "
            "`localmem --key-file FILE hooks install` writes the key file's path into the entries instead"
        )
    return key_file, notes


def _status_file(db: Path, notes: list[str]) -> tuple[str | None, list[str]]:
    """The hooks' status file made beside the store (full size: a full disk still takes a
    record); a note naming where it goes instead when that folder cannot be written."""
    if not db.parent.is_dir():
        return None, notes
    try:
        return status.create(db), notes
    except OSError as exc:
        where = status.fallback_path(db)
        return None, [
            *notes,
            f"{status.path_for(db)} cannot be made ({exc.strerror or exc}): the hooks record in {where}",
        ]


def cmd_uninstall(args: argparse.Namespace, settings: Settings) -> int:
    target, backup, removed = install.uninstall(args.client, args.path)
    if args.json:
        print_json(
            {"client": args.client, "path": str(target), "removed": removed, "backup": str(backup) if backup else None}
        )
        return 0
    if not removed:
        print(f"no localmem hooks in {target}")
    else:
        print(f"removed {removed} localmem hook entries from {target} (backup: {backup})")
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    clients = [args.client] if args.client else list(CLIENTS)
    found = [install.inspect(c, args.path if args.client else None) for c in clients]
    ran = status.read(settings.db)
    if args.json:
        print_json(
            {"clients": [f.to_dict() for f in found], "status": ran, "status_file": str(status.path_for(settings.db))}
        )
        return 0
    for f in found:
        where = "installed" if f.events else "not installed"
        print(f"{f.client:<12} {where} ({f.path})" + (": " + ", ".join(f.events) if f.events else ""))
        if f.trust:
            print("  codex trust: " + ", ".join(f"{event} {word}" for event, word in f.trust.items()))
        for p in f.problems:
            print(f"  problem: {p}")
    print(f"runs          {status.summary(ran)}")
    run = ran.get("last_run")
    if run:
        via = run.get("via", "in-process")  # a run the resident process answered says so (hooks.fast)
        if run.get("resident"):  # why it did not answer this one
            via += f" (resident: {run['resident']})"
        print(
            f"last run      {run.get('at')} {run.get('client')} {run.get('event')}: {run.get('outcome')}, {run.get('ms')} ms, {via}"
        )
    last = ran.get("last_error")
    if last:
        print(
            f"last error    {last.get('at')} {last.get('client')} {last.get('event')}: {last.get('kind')}: {last.get('message', '')}"
        )
    return 0
