"""The ``localmem`` command. Parses arguments, calls the library, prints results.

Library errors (``LocalmemError``) become one line on stderr and the class's exit code;
nothing here touches SQL or models directly. Storage names SQLite's failures (a full disk,
a read-only file or folder: ``StoreError``, exit 8); a database or file error that reaches
here unnamed is one line too (``edge_error``), never a traceback. Every subcommand has help text, and the
ones a script would read have ``--json``.

This module holds the top-level parser and the error handling; the subcommands live by
group in ``memory`` (ingest, watch, forget, backup, reindex, demo), ``read`` (query, explore,
answer), ``enrichment`` (worker, enrich) and ``admin`` (stats, doctor, serve, mcp-config);
``bench`` comes from ``localmem.cli.bench``. ``build_parser`` adds them in the order
``localmem --help`` lists them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import apsw

from localmem import __version__
from localmem.cli import (
    admin,
    cable_flags,
    capture,
    enrichment,
    export,
    hooks,
    memory,
    pairlink,
    read,
    redact,
    replica,
    secure,
    sync,
    ui,
)
from localmem.cli.bench import add_bench_parser
from localmem.cli.enrichment import watch_worker as _watch_worker  # the name tests import
from localmem.cli.memory import DEMO_QUESTION
from localmem.cli.train import add_train_parser
from localmem.config import load_settings
from localmem.errors import LocalmemError
from localmem.storage.engine import faults

__all__ = ["DEMO_QUESTION", "_watch_worker", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if undecodable := [name for name, value in vars(args).items() if not _utf8(value)]:
        # a byte that is not UTF-8 in argv arrives as a lone surrogate, which SQLite cannot store
        print(f"localmem: error: {_flag(undecodable[0])} is not valid UTF-8 text", file=sys.stderr)
        return 2
    try:
        secure.apply_key_file(args)
        settings = cable_flags.apply(args, load_settings(db=args.db, embedder=args.embedder))
        return int(args.func(args, settings) or 0)
    except LocalmemError as exc:
        print(f"localmem: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("localmem: interrupted", file=sys.stderr)
        return 130
    except (apsw.Error, OSError) as exc:  # the database file or a path given is unusable
        print(f"localmem: error: {edge_error(exc, args)}", file=sys.stderr)
        return 1


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
    named = faults.translate(exc, db)
    return str(named) if named is not None else f"{db}: {exc}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="localmem",
        description="Local-first long-term memory for LLM assistants: one SQLite file, no cloud.",
    )
    p.add_argument("--version", action="version", version=f"localmem {__version__}")
    p.add_argument("--db", help="database file (default: $LOCALMEM_DB or the user data dir)")
    p.add_argument(
        "--embedder",
        help="embedding model: 'default' (MiniLM ONNX), a .gguf file or an ONNX embedder folder "
        "(default: $LOCALMEM_EMBEDDER or config)",
    )
    secure.add_key_file_flag(p)
    sub = p.add_subparsers(title="commands", metavar="COMMAND")

    # the order of `localmem --help`: the everyday commands first, groups interleaved
    for add in (
        memory.add_ingest,
        capture.add_capture,
        memory.add_watch,
        read.add_query,
        enrichment.add_worker_parsers,
        pairlink.add_link,
        read.add_explore,
        read.add_answer,
        admin.add_stats,
        admin.add_doctor,
        memory.add_forget,
        redact.add_redact,
        export.add_export,
        memory.add_backup,
        secure.add_encrypt,
        secure.add_decrypt,
        replica.add_replicate,
        replica.add_restore,
        memory.add_reindex,
        sync.add_sync,
        memory.add_demo,
        admin.add_serve,
        admin.add_mcp_config,
        hooks.add_hooks,
        ui.add_ui,
        add_bench_parser,
        add_train_parser,
    ):
        add(sub)
    return p
