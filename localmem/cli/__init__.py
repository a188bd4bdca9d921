"""The ``localmem`` command. Parses arguments, calls the library, prints results.

Library errors (``LocalmemError``) become one line on stderr and the class's exit code;
nothing here touches SQL or models directly. Storage names SQLite's failures (a full disk,
a read-only file or folder: ``StoreError``, exit 8); a database or file error that reaches
here unnamed is one line too (``edge_error``), never a traceback. Every subcommand has help text, and the
ones a script would read have ``--json``.

This module holds the top-level parser, the command table and the error handling. The
subcommands live by group in ``memory`` (ingest, watch, forget, backup, reindex, demo), ``capture``, ``redact``, ``hooks``, ``train``,
``query`` (query, recall), ``read`` (explore, answer), ``enrichment`` (worker, enrich),
``admin`` (stats, doctor, serve, mcp-config) and the others ``COMMANDS`` names, in the order
``localmem --help`` lists them. A command that loads its settings itself (``own_settings``:
``aider``, which runs aider even when localmem's config is broken) is handed ``None``.

Invariant: a command's module is imported only when that command runs (or its help is
asked for): ``COMMANDS`` holds each command's name and one-line help, and
:class:`LazyCommands` adds the command's real parser when argparse reaches it. So
``localmem --help`` and a query a resident process answers load neither numpy nor the model
(docs/architecture.md, "Start-up"); tests/cli/test_cli.py checks the table against the
modules' own help texts.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import apsw

from localmem import __version__
from localmem.cli import cable_flags, keyflags
from localmem.config import load_settings
from localmem.errors import LocalmemError, StoreCorrupt
from localmem.storage.engine import faults

__all__ = ["COMMANDS", "build_parser", "full_parser", "main", "undecodable"]


class Command(NamedTuple):
    name: str
    help: str
    module: str  # under localmem.cli
    add: str  # the function of that module that adds the command's parser


COMMANDS: tuple[Command, ...] = (  # the order of `localmem --help`: the everyday commands first
    Command("ingest", "ingest a chat log, a chat export or a benchmark file", "memory", "add_ingest"),
    Command(
        "capture",
        "store the coding agents' sessions (Claude Code, Codex CLI, Gemini CLI, VS Code chat, Copilot CLI, Cursor, "
        "OpenCode, aider) from their folders",
        "capture",
        "add_capture",
    ),
    Command(
        "watch",
        "ingest new and changed chat logs in a folder (or the coding agents' sessions) as they appear",
        "memory",
        "add_watch",
    ),
    Command("query", "reconstruct the past context that answers a question", "query", "add_query"),
    Command("recall", "hook entry point: a JSON question on stdin, the context on stdout", "query", "add_recall"),
    Command("worker", "run the enrichment worker in the foreground", "enrichment", "add_worker_parsers"),
    Command("enrich", "enrich every queued turn now, then exit", "enrichment", "add_worker_parsers"),
    Command("link", "build antecedent links without a model (CABLE, pair classifier)", "pairlink", "add_link"),
    Command("explore", "answer a question by letting the local model walk the memory (MRAgent)", "read", "add_explore"),
    Command("answer", "answer a question from memory with the local model", "read", "add_answer"),
    Command("stats", "what the store holds, layer by layer", "admin", "add_stats"),
    Command("doctor", "check the installation, the database and the models", "admin", "add_doctor"),
    Command("forget", "delete turns (with their cues, edges and vectors)", "memory", "add_forget"),
    Command("redact", "find and take out secrets and private spans that older versions stored", "redact", "add_redact"),
    Command(
        "export", "write sessions and turns as JSON Lines that `localmem ingest` reads back", "export", "add_export"
    ),
    Command("backup", "copy the database to a file, safely while it is in use", "memory", "add_backup"),
    Command(
        "backups", "list the rolling backups that localmem takes on its own (or take one now)", "backups", "add_backups"
    ),
    Command(
        "compact",
        "rebuild the file without its free pages (what forgotten turns and old vectors left behind)",
        "compact",
        "add_compact",
    ),
    Command(
        "encrypt", "encrypt the store in place (SQLite3 Multiple Ciphers); or change its key", "secure", "add_encrypt"
    ),
    Command("decrypt", "rewrite an encrypted store as plaintext", "secure", "add_decrypt"),
    Command(
        "replicate",
        "keep a live replica of the store (Litestream; encrypted snapshots for an encrypted store)",
        "replica",
        "add_replicate",
    ),
    Command(
        "restore",
        "put a backup back: a backup file, the newest rolling backup, an age backup or a replica",
        "replica",
        "add_restore",
    ),
    Command("reindex", "re-embed everything with the configured embedder", "memory", "add_reindex"),
    Command(
        "reembed",
        "embed every turn and cue again with another embedder, reads working throughout",
        "reembed",
        "add_reembed",
    ),
    Command(
        "models",
        "list the embedders localmem can use, and those found in Ollama's and LM Studio's folders",
        "models",
        "add_models",
    ),
    Command(
        "sync", "share this memory with your other devices through a folder a sync tool carries", "sync", "add_sync"
    ),
    Command("demo", "ingest the bundled sample conversation and answer a question from it", "memory", "add_demo"),
    Command("serve", "run the MCP server (stdio for desktop clients, or HTTP on 127.0.0.1)", "admin", "add_serve"),
    Command(
        "mcp-config",
        "print or install the MCP server entry for Claude Desktop, VS Code or Cursor",
        "admin",
        "add_mcp_config",
    ),
    Command(
        "hooks",
        "install localmem's hooks into Claude Code, Codex CLI, Gemini CLI, GitHub Copilot CLI, Cursor or OpenCode "
        "(one or every one found), or write localmem as their plugin; or remove them; or show them",
        "hooks",
        "add_hooks",
    ),
    Command(
        "aider",
        "run aider with this project's memory: recalled when it starts, its chat stored when it exits",
        "aider",
        "add_aider",
    ),
    Command(
        "ui",
        "browse the memory in a local web page: ask with a trace, find, timeline, what was injected, forget, redact",
        "ui",
        "add_ui",
    ),
    Command("bench", "benchmarks: recall on LoCoMo / LongMemEval, latency at scale", "bench", "add_bench_parser"),
    Command("train", "fine-tune the embedder on LongMemEval data (the train extra)", "train", "add_train_parser"),
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if bad := undecodable(args):
        # a byte that is not UTF-8 in argv arrives as a lone surrogate, which SQLite cannot store
        print(f"localmem: error: {bad} is not valid UTF-8 text", file=sys.stderr)
        return 2
    try:
        if getattr(args, "own_settings", False):  # `localmem aider`: a bad config must not stop aider (cli.aider)
            return int(args.func(args, None) or 0)
        keyflags.apply_key_file(args)
        settings = cable_flags.apply(args, load_settings(db=args.db, embedder=args.embedder))
        return int(args.func(args, settings) or 0)
    except LocalmemError as exc:
        _error(damaged(exc, args) or str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        print("localmem: interrupted", file=sys.stderr)
        return 130
    except (apsw.Error, OSError) as exc:  # the database file or a path given is unusable
        _error(edge_error(exc, args))
        return 1


# Every character str.splitlines() breaks at: a path or value quoted in an error may hold
# one, and the error must stay the one line scripts and hooks read.
_LINE_BREAKS = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in (*range(0x0A, 0x0E), 0x1C, 0x1D, 0x1E, 0x85)}
_LINE_BREAKS |= {0x2028: "\\u2028", 0x2029: "\\u2029"}


def _error(text: str) -> None:
    print(f"localmem: error: {text.translate(_LINE_BREAKS)}", file=sys.stderr)


def undecodable(args: argparse.Namespace) -> str | None:
    """The first argument (as its flag) whose text is not valid UTF-8, or None."""
    bad = [name for name, value in vars(args).items() if not _utf8(value)]
    return _flag(bad[0]) if bad else None


def _utf8(value: object) -> bool:
    if isinstance(value, list | tuple):
        return all(_utf8(v) for v in value)
    if isinstance(value, str | Path):
        try:
            str(value).encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def _flag(dest: str) -> str:
    return dest.upper() if dest in ("file", "path", "dir", "text") else "--" + dest.rstrip("_").replace("_", "-")


def edge_error(exc: apsw.Error | OSError, args: argparse.Namespace) -> str:
    """One line for a database or file error that reached the command line unnamed
    (storage names most of them: ``localmem.storage.engine.faults``)."""
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}"
    db = getattr(args, "db", None) or "the database"
    if found := damaged(exc, args):
        return found
    named = faults.translate(exc, db)
    return str(named) if named is not None else f"{db}: {exc}"


def damaged(exc: BaseException, args: argparse.Namespace) -> str | None:
    """A damaged store named as damaged, with the command that restores its newest backup
    (``recovery``); None for any other error."""
    if not isinstance(exc, StoreCorrupt | apsw.CorruptError):
        return None
    # lazy: the command table's dispatch point loads recovery (and the rolling backups) only for a damaged store
    from localmem.cli import recovery

    path = getattr(exc, "path", None) or getattr(args, "db", None)
    try:
        path = path or str(load_settings().db)
    except LocalmemError:  # a broken config file: the error being reported comes first
        path = None
    return recovery.explain(exc, path)


class LazyCommands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """argparse's subcommands, each a placeholder (name and help) until argparse reaches
    it; then the command's module is imported and its real parser takes the place."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, *rest: Any) -> None:
        values = rest[0]
        if values and values[0] in self._name_parser_map and values[0] not in loaded(self):
            load(self, values[0])
        super().__call__(parser, namespace, *rest)


class _Collect:
    """What a module's ``add_*`` function is handed in place of the subparsers action:
    its ``add_parser`` makes the real parser and puts it in the placeholder's place (the
    help line stays the table's)."""

    def __init__(self, action: LazyCommands) -> None:
        self.action = action
        self.helps: dict[str, str | None] = {}

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        self.helps[name] = kwargs.pop("help", None)
        kwargs.setdefault("prog", f"{self.action._prog_prefix} {name}")
        real: argparse.ArgumentParser = self.action._parser_class(**kwargs)
        self.action._name_parser_map[name] = real
        return real


def load(action: LazyCommands, name: str) -> dict[str, str | None]:
    """Put the real parser of command ``name`` (and of any sibling its module adds with
    it) in place; the help texts the module gave, by command."""
    command = next(c for c in COMMANDS if c.name == name)
    # lazy: the command table's dispatch; a command's module is imported when it runs
    module = importlib.import_module(f"localmem.cli.{command.module}")
    collect = _Collect(action)
    getattr(module, command.add)(collect)
    loaded(action).update(collect.helps)
    return collect.helps


def loaded(action: LazyCommands) -> set[str]:
    """The commands whose real parser is in place."""
    done: set[str] = action.__dict__.setdefault("_localmem_loaded", set())
    return done


def build_parser(parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``localmem`` parser; a command's own parser is added when it is reached. Every
    parser of the tree is a ``parser_class`` (a resident process's never prints or exits:
    ``localmem.cli.served``)."""
    p = parser_class(
        prog="localmem",
        description="Local-first long-term memory for LLM assistants: one SQLite file, no cloud.",
    )
    p.add_argument("--version", action="version", version=f"localmem {__version__}")
    p.add_argument("--db", help="database file (default: $LOCALMEM_DB or the user data dir)")
    p.add_argument(
        "--embedder",
        help="embedding model: 'default' (localmem-chat-minilm-l6, trained for memory), 'minilm', a .gguf file or "
        "an ONNX embedder folder "
        "(default: $LOCALMEM_EMBEDDER or config)",
    )
    keyflags.add_key_file_flag(p)
    sub = p.add_subparsers(title="commands", metavar="COMMAND", action=LazyCommands)
    for command in COMMANDS:
        sub.add_parser(command.name, help=command.help, add_help=False)
    return p


def full_parser() -> argparse.ArgumentParser:
    """The parser with every command's real parser in place (docs and tests walk it)."""
    p = build_parser()
    action = next(a for a in p._actions if isinstance(a, LazyCommands))
    for command in COMMANDS:
        load(action, command.name)
    return p
