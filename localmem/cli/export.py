"""``localmem export``: the store's sessions and turns as JSON Lines, to stdout or a file.

The output is what ``localmem ingest`` reads back (format ``localmem``, detected); see
``localmem.ingest.export``. With ``--out`` the file appears only once it is complete
(written beside it, mode 600 whatever the umask, then renamed). A reader that stops
early (``| head``) ends the export quietly. Refuses to create a database that does not
exist.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from localmem.cli.common import Subparsers, open_store
from localmem.config import Settings
from localmem.errors import InputError
from localmem.ingest.export import ExportReport, export
from localmem.storage.copies import age
from localmem.storage.engine.db import Conn
from localmem.util import private


def add_export(sub: Subparsers) -> None:
    c = sub.add_parser(
        "export",
        help="write sessions and turns as JSON Lines that `localmem ingest` reads back",
        description="Export turns with their speakers, roles, times, native ids and session keys, sources and "
        "titles, one JSON object per line (stdout unless --out). `localmem ingest FILE` reads it back: into an "
        "empty store it reproduces every turn; into the store it came from it writes nothing. Extracted layers "
        "(cues, tags, facts, topics, links) are not exported: the enrichment worker rebuilds them.",
    )
    c.add_argument("--session", metavar="KEY", help="only the session(s) with this key")
    c.add_argument("--since", metavar="T", help="only turns said at or after this time (untimed turns are left out)")
    c.add_argument(
        "--format", choices=["jsonl"], default="jsonl", help="output format (default jsonl: one turn per line)"
    )
    c.add_argument("--out", type=Path, metavar="FILE", help="write to FILE instead of stdout")
    c.add_argument(
        "--encrypt-to",
        action="append",
        metavar="RECIPIENT",
        help="age-encrypt the output to this recipient (age1…, ssh-ed25519 …, or a file of them); repeatable; "
        "`localmem ingest` reads it back with --age-identity",
    )
    c.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.db.exists():
        raise InputError("no database yet; nothing to export", path=str(settings.db))
    recips = age.recipients(args.encrypt_to) if getattr(args, "encrypt_to", None) else None
    # rebind: no vector is read, so a store built with another embedder exports too
    with open_store(settings, rebind=True) as store:
        if recips is not None:
            report = _encrypted(store.conn, args.out, recips, args.session, args.since)
        elif args.out is None:
            try:
                report = export(store.conn, sys.stdout.buffer, session=args.session, since=args.since)
                sys.stdout.buffer.flush()
            except BrokenPipeError:
                # the reader went away (`| head`): stop quietly, without a second error at exit
                with contextlib.suppress(OSError):
                    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                return 0
        else:
            report = _to_file(store.conn, args.out, args.session, args.since)
    where = str(args.out) if args.out else "stdout"
    print(f"exported {report.turns} turns of {report.sessions} sessions to {where}", file=sys.stderr)
    return 0


def _encrypted(conn: Conn, out: Path | None, recips: list[Any], session: str | None, since: str | None) -> ExportReport:
    """The export streamed through age: no plaintext reaches the disk (nor the terminal)."""
    if out is None:
        if sys.stdout.isatty():
            raise InputError("age output is binary: give --out FILE or redirect stdout", path="stdout")
        with age.encrypting(sys.stdout.buffer, recips) as plain:
            report = export(conn, plain, session=session, since=since)
        sys.stdout.buffer.flush()
        return report
    with age.encrypted_file(out, recips) as plain:
        return export(conn, plain, session=session, since=since)


def _to_file(conn: Conn, out: Path, session: str | None, since: str | None) -> ExportReport:
    tmp = out.with_name(f".{out.name}.part")
    try:
        with private.open_private(tmp, "wb") as fh:  # 600 whatever the umask: the export is the memory in plaintext
            report = export(conn, fh, session=session, since=since)
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write: {exc}", path=str(out)) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return report
