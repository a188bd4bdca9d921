"""The commands about the installation rather than the memories: stats, doctor, serve, mcp-config.

Each ``add_*`` function adds one subcommand to the parser; ``localmem.cli.build_parser`` calls
them in the order ``localmem --help`` lists the commands. ``stats`` refuses to create a
database; ``doctor`` exits 1 when any check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from localmem.cli import cable_flags
from localmem.cli.common import Subparsers, open_store, print_json
from localmem.cli.doctor import run_checks
from localmem.cli.doctor_mcp import model_line
from localmem.cli.served import Planner
from localmem.config import Settings
from localmem.enrichment.layers import layer_stats
from localmem.errors import InputError
from localmem.hooks import status as hook_status
from localmem.models.llm import model_layer_status, resolve_model_path
from localmem.storage.engine.keys import KEY_ENV, KEY_FILE_ENV, is_encrypted, read_key_file
from localmem.sync.keys import add_sync_flags, keyring
from mcp_server import clientconfig
from mcp_server.serve import add_arguments, run_from_args


def add_stats(sub: Subparsers) -> None:
    c = sub.add_parser("stats", help="what the store holds, layer by layer")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=cmd_stats)


def add_doctor(sub: Subparsers) -> None:
    c = sub.add_parser("doctor", help="check the installation, the database and the models")
    c.add_argument("--model", help="GGUF chat model to check (default: $LOCALMEM_MODEL, the config file, else SmolLM2)")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=cmd_doctor)


def add_serve(sub: Subparsers) -> None:
    c = sub.add_parser(
        "serve",
        help="run the MCP server (stdio for desktop clients, or HTTP on 127.0.0.1)",
        description="Run localmem's MCP server. stdio (default) is what desktop clients start; --transport http "
        "serves streamable HTTP on 127.0.0.1 (another --host needs --token). Either also answers `localmem query` "
        "and `localmem recall` of the same store on a local socket (--no-socket: not); --transport socket serves "
        "only that socket, without MCP. Logs go to stderr.",
    )

    add_arguments(c)
    cable_flags.add_read_flags(c)
    c.add_argument(
        "--cable", action="store_true", help="the background worker also builds antecedent links (off by default)"
    )
    c.set_defaults(func=cmd_serve)


def add_mcp_config(sub: Subparsers) -> None:
    c = sub.add_parser(
        "mcp-config",
        help="print or install the MCP server entry for Claude Desktop, VS Code or Cursor",
        description="Print the client configuration that starts this server (absolute interpreter and database "
        "paths); --install merges it into the client's config file after a backup.",
    )
    c.add_argument(
        "--client",
        choices=["claude-desktop", "vscode", "cursor"],
        default="claude-desktop",
        help="the client (default claude-desktop)",
    )
    c.add_argument("--install", action="store_true", help="merge into the client's config file (backup first)")
    c.add_argument("--path", type=Path, help="the config file to install into (default: the client's own)")
    c.add_argument(
        "--model",
        help="GGUF chat model the server answers and enriches with (default: $LOCALMEM_MODEL or the config file; "
        "none: no answer tool)",
    )
    c.add_argument(
        "--key-file",
        dest="entry_key_file",
        type=Path,
        metavar="FILE",
        help="the store's key file (mode 600), put in the entry as LOCALMEM_KEY_FILE (default: $LOCALMEM_KEY_FILE)",
    )
    add_sync_flags(c)
    c.set_defaults(func=cmd_mcp_config)


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.db.exists():
        raise InputError("no database yet; ingest something first", path=str(settings.db))

    with open_store(settings) as store:
        stats = store.stats()
        stats["enrichment"] = layer_stats(store)
        stats["enrichment"]["antecedent"]["construction_enabled"] = settings.cable.enabled
    stats["encrypted"] = is_encrypted(settings.db)
    stats["model_layer"] = model_layer_status()
    stats["hooks"] = hook_status.read(settings.db)
    if args.json:
        print_json(stats)
        return 0
    print(f"database      {stats['db']} ({stats['bytes'] / 1e6:.1f} MB, schema v{stats['schema_version']})")
    print(f"encrypted     {'yes (SQLite3 Multiple Ciphers)' if stats['encrypted'] else 'no (localmem encrypt)'}")
    print(f"embedder      {stats['embedder']} ({stats['embedder_dim']}-d)")
    print(f"sessions      {stats['sessions']}")
    print(f"turns         {stats['turns']}  ({stats['first_turn']} .. {stats['last_turn']})")
    print("cues          " + ", ".join(f"{k} {v}" for k, v in stats["cues"].items()))
    print("edges         " + ", ".join(f"{k} {v}" for k, v in stats["edges"].items()))
    layers = "statement cues, temporal + semantic edges (model-free)"
    if stats["cues"]["triple"] or stats["cues"]["keyword"]:
        layers += "; extracted cues"
    if stats["edges"]["antecedent"]:
        layers += "; antecedent links"
    print(f"layers        {layers}")
    ml = stats["model_layer"]
    print(f"model layer   {ml['detail']}")
    e = stats["enrichment"]
    print(
        f"enrichment    {e['enriched_turns']} of {e['turns']} turns ({e['enriched_pct']}%), "
        f"{e['turns_with_extracted_cues']} with extracted cues, {e['low_information_turns']} low-information; "
        f"cues kept {e['cues_kept']}, rejected {e['cues_rejected']} ({100 * e['rejected_cue_rate']:.0f}%); "
        f"tags {e['tags']}"
    )
    print("memory types  " + ", ".join(f"{k} {v}" for k, v in e["memory_types"].items()))
    print("jobs          " + ", ".join(f"{k} {v}" for k, v in e["jobs"].items()))
    print("topic jobs    " + ", ".join(f"{k} {v}" for k, v in e["topic_jobs"].items()))
    used = {k: v for k, v in e["model_calls"].items() if v["parsed"] or v["unparsed"]}
    print(
        "model calls   "
        + (", ".join(f"{k} {v['parsed']} parsed / {v['unparsed']} unparsed" for k, v in used.items()) or "none")
    )
    for f in e["recent_reply_failures"]:
        print(f"  refused {f['purpose']} reply ({f['at']}): {f['status']}: {f['reply']!r}")
    a = e["antecedent"]
    print(
        f"antecedents   {a['turns_processed']} turns processed ({a['turns_skipped']} skipped), {a['jobs_waiting']} "
        f"waiting; {a['edges']} edges, per turn: {a['edges_per_turn']} edges, {a['candidates_per_turn']} "
        f"candidates, {a['calls_per_turn']} model calls"
        + ("" if settings.cable.enabled else " (construction off: `localmem enrich --cable` builds them)")
    )
    for p in e["parked"]:
        print(f"  parked {p['kind']} job {p['job']} (turn {p['turn_id']}, {p['attempts']} attempts): {p['error']}")
    print(f"hooks         {hook_status.summary(stats['hooks'])}")
    if err := stats["hooks"].get("last_error"):
        print(
            f"  last hook error {err.get('at')} ({err.get('client')} {err.get('event')}): {err.get('kind')}: {err.get('message', '')}"
        )
    return 0


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    checks = run_checks(settings.with_overrides(model=args.model))
    if args.json:
        print_json(checks)
    else:
        for c in checks:
            level = "FAIL" if not c["ok"] else "warn" if c["warn"] else "ok"
            print(f"[{level:>4}] {c['name']}: {c['detail']}")
    return 0 if all(c["ok"] for c in checks) else 1


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    return run_from_args(args, settings, cli=Planner())  # the socket answers raw `query` / `recall` lines too


def cmd_mcp_config(args: argparse.Namespace, settings: Settings) -> int:
    settings = settings.with_overrides(model=args.model)
    if settings.model:
        resolve_model_path(settings.model)  # a missing or non-GGUF file is refused before it is written
    models = model_line(settings.model)
    extras = _entry_extras(args)
    if args.install:
        target, backup = clientconfig.install(settings, args.client, args.path, extras)
        print(f"installed the localmem server into {target}" + (f" (backup: {backup})" if backup else ""))
        print(f"{models}\nrestart the client to load it; `localmem doctor` checks the entry", file=sys.stderr)
        return 0
    print(json.dumps(clientconfig.snippet(settings, args.client, extras), indent=2))
    print(f"# {models}", file=sys.stderr)
    print(f"# merge into {clientconfig.config_path(args.client)}, or run with --install", file=sys.stderr)
    return 0


def _entry_extras(args: argparse.Namespace) -> clientconfig.Extras:
    """The key file and ``--sync`` flags the entry carries, each checked now (mode 600,
    readable) so that what is written works."""
    named = args.entry_key_file or os.environ.get(KEY_FILE_ENV)
    key_file = Path(named) if named else None
    if key_file is not None:
        read_key_file(key_file)
    elif os.environ.get(KEY_ENV):
        print(
            f"localmem: ${KEY_ENV} is not written into a client's config; give --key-file FILE for an encrypted store",
            file=sys.stderr,
        )
    if args.sync is None:
        return clientconfig.Extras(key_file)
    keyring(args, "sync-")  # the sync key files, checked as the server will read them
    flags: list[str] = []
    if args.sync_interval != 30.0:
        flags += ["--sync-interval", str(args.sync_interval)]
    if args.sync_passphrase_file is not None:
        flags += ["--sync-passphrase-file", str(args.sync_passphrase_file.resolve())]
    for f in args.sync_identity:
        flags += ["--sync-identity", str(f.resolve())]
    for r in args.sync_recipient:
        flags += ["--sync-recipient", r]
    return clientconfig.Extras(key_file, args.sync, tuple(flags))
