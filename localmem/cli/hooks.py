"""``localmem hooks install | uninstall | status | plugin``: localmem's entries in a coding
agent's settings (``localmem.hooks.install``; ``--all``: every agent found,
``localmem.hooks.agents``), localmem as the agent's plugin (``localmem.hooks.plugins``), and
what the hooks did (``localmem.hooks.status``). The entries run ``python -m localmem.hooks``,
not this command.

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
from localmem.hooks import agents, codex_list, install, plugins, status
from localmem.hooks.events import CLIENTS
from localmem.storage.engine import keys
from mcp_server import clientconfig

CODEX_TRUST = (
    "Codex runs these only once you trust them: open codex, type /hooks, review localmem's entries and trust "
    "them (Codex keeps a hash of each, so an entry installed again with another --db, --key-file or interpreter "
    "must be trusted again). `localmem hooks status` says whether they are. "
    "`codex --dangerously-bypass-hook-trust` runs hooks unreviewed: for tests only, never for your own sessions."
)


def add_hooks(sub: Subparsers) -> None:
    c = sub.add_parser(
        "hooks",
        help="install localmem's hooks into Claude Code, Codex CLI, Gemini CLI, GitHub Copilot CLI, Cursor or "
        "OpenCode (one or every one found), "
        "or write localmem as their plugin; or remove them; or show them",
        description="Hooks make an agent's sessions memory by themselves: a session starts with what the project "
        "decided and left open, a prompt gets the memory that bears on it (only above a relevance bar), and each "
        "turn is stored when the agent stops. A hook never breaks the agent; `localmem doctor` shows what failed.",
    )
    hsub = c.add_subparsers(title="actions", metavar="ACTION")
    for name, helptext in (
        (
            "install",
            "merge the hook entries into the client's settings file (a backup first), or with --all into every "
            "agent found on this machine (its folder or its command), leaving alone one that has localmem's plugin; "
            "`localmem --key-file FILE hooks install` puts the key file's path into each entry; Codex then asks "
            "you to trust them in /hooks",
        ),
        (
            "uninstall",
            "take localmem's hook entries out of the client's settings file (a backup first); --all: out of "
            "every agent, each file `install --all` wrote given back byte for byte",
        ),
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
            help="the agent" + (" (default: all six)" if name == "status" else " (or --all)"),
        )
        if name != "status":
            a.add_argument("--all", action="store_true", help="every agent found on this machine")
        a.add_argument(
            "--path",
            type=Path,
            help="the settings file (default: the client's own; copilot: ~/.copilot/hooks/localmem.json; cursor: "
            "~/.cursor/hooks.json; opencode: localmem's plugin file, ~/.config/opencode/plugin/localmem.js)",
        )
        a.add_argument("--json", action="store_true", help="print JSON")
        a.set_defaults(func={"install": cmd_install, "uninstall": cmd_uninstall, "status": cmd_status}[name])
    helptext = (
        "write localmem as the agent's plugin (Claude Code, Codex, Copilot CLI) or extension (Gemini CLI): the hook entries "
        "and the MCP server on this store, for this interpreter; prints the one line that adds it"
    )
    p = hsub.add_parser("plugin", help=helptext, description=helptext)
    p.add_argument("--client", choices=plugins.CLIENTS, required=True, help="the agent")
    p.add_argument("--out", type=Path, help="the folder to write (default: <user data dir>/plugins/CLIENT)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_plugin)


def _one_or_all(args: argparse.Namespace) -> None:
    if args.all and (args.client or args.path):
        raise InputError("--all installs into every agent found: leave out --client and --path")
    if not args.all and not args.client:
        raise InputError(
            "name the agent (--client claude-code, codex, gemini, copilot, cursor or opencode) or give --all"
        )


def cmd_install(args: argparse.Namespace, settings: Settings) -> int:
    _one_or_all(args)
    db = Path(settings.db)
    key_file, notes = _key_for_hooks(db)
    if args.all:
        return _install_all(args, db, key_file, notes)
    target, backup = install.install(db, args.client, args.path, key_file)
    made, notes = _status_file(db, notes)
    found = install.inspect(args.client, target)
    if args.client == "codex":
        notes.append(CODEX_TRUST)
    if plugin := plugins.installed(args.client):
        notes.append(f"localmem's {plugin} runs the same hooks: each runs twice now; remove one of the two")
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


def _install_all(args: argparse.Namespace, db: Path, key_file: Path | None, notes: list[str]) -> int:
    done = agents.install_all(db, key_file)
    made, notes = _status_file(db, notes)
    if any(d.action == "installed" and d.client == "claude-code" for d in done) and agents.vscode_found():
        notes.append(agents.VSCODE_NOTE)
    record = str(agents.record_path())
    if args.json:
        print_json({"agents": [d.to_dict() for d in done], "record": record, "status_file": made, "notes": notes})
        return 0
    _print_done(done)
    if any(d.action == "installed" for d in done):
        print(f"the files' old bytes are kept in {record}: `localmem hooks uninstall --all` puts them back")
    for note in notes:
        print(f"note: {note}")
    return 0


def _print_done(done: list[agents.Done]) -> None:
    for d in done:
        print(f"{d.client:<12} {d.action}" + (f" {d.path}" if d.path else "") + (f": {d.why}" if d.why else ""))
        for todo in d.todo:
            print(f"  to do: {todo}")


def cmd_plugin(args: argparse.Namespace, settings: Settings) -> int:
    db = Path(settings.db)
    key_file, notes = _key_for_hooks(db)
    extras = clientconfig.Extras(key_file=key_file)
    mcp = clientconfig.server_entry(settings, "claude-desktop", extras)  # the same stdio entry every client takes
    out = (args.out or plugins.default_dir(args.client)).expanduser().resolve()
    written = plugins.write(args.client, out, db, mcp, key_file)
    made, notes = _status_file(db, notes)
    line = plugins.add_line(args.client, out)
    if args.client == "codex":
        notes.append(CODEX_TRUST)
    if install.inspect(args.client).events:
        notes.append(
            f"localmem's entries are in {install.settings_path(args.client)} too: once the plugin is added each "
            f"hook would run twice; `localmem hooks uninstall --client {args.client}` takes them out"
        )
    if args.json:
        print_json(
            {
                "client": args.client,
                "folder": str(out),
                "files": [str(p) for p in written],
                "add": line,
                "status_file": made,
                "notes": notes,
            }
        )
        return 0
    print(f"wrote localmem's {'extension' if args.client == 'gemini' else 'plugin'} for {args.client} in {out}")
    print(f"add it with: {line}")
    for note in notes:
        print(f"note: {note}")
    return 0


def _codex_plugin_trust(trust: dict[str, str]) -> list[str]:
    """Fill ``trust`` with Codex's own word on the plugin's hooks (``hooks.codex_list``);
    the problems to report."""
    words, why = codex_list.plugin_trust(os.getcwd())
    trust.update(words)
    if why:
        return [f"cannot tell whether Codex trusts the plugin's hooks: {why}"]
    untrusted = [f"{event} {word}" for event, word in words.items() if word != install.TRUSTED]
    if untrusted:
        return [
            "Codex runs a plugin's hook only once you trust it in its /hooks view (open codex, type /hooks, "
            "review and trust localmem's entries): " + ", ".join(untrusted)
        ]
    return []


def cmd_uninstall(args: argparse.Namespace, settings: Settings) -> int:
    _one_or_all(args)
    if args.all:
        done = agents.uninstall_all()
        if args.json:
            print_json({"agents": [d.to_dict() for d in done]})
        else:
            _print_done(done)
        return 0
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
    on_machine = agents.found()
    plugin = {c: plugins.installed(c) for c in clients}
    for f in found:
        if f.events and plugin[f.client]:
            f.problems.append(
                f"localmem's {plugin[f.client]} runs the same hooks: each runs twice; "
                f"`localmem hooks uninstall --client {f.client}` takes the settings entries out"
            )
        if f.client == "codex" and plugin[f.client] and not f.events:
            f.problems.extend(_codex_plugin_trust(f.trust))
    ran = status.read(settings.db)
    if args.json:
        rows = [{**f.to_dict(), "plugin": plugin[f.client], "found": on_machine.get(f.client)} for f in found]
        print_json({"clients": rows, "status": ran, "status_file": str(status.path_for(settings.db))})
        return 0
    for f in found:
        where = "installed" if f.events else "not installed"
        if not f.events and plugin[f.client]:
            where = "by its plugin"
        elif not f.events and f.client not in on_machine:
            where = "not on this machine"
        print(f"{f.client:<12} {where} ({f.path})" + (": " + ", ".join(f.events) if f.events else ""))
        if plugin[f.client]:
            print(f"  plugin: localmem's {plugin[f.client]}")
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
