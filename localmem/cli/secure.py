"""``localmem encrypt`` / ``decrypt``: encryption at rest.

The key never comes from a command-line value (argv shows in the process list): it is
``$LOCALMEM_KEY``, a key file (``--key-file``, mode 600: ``localmem.cli.keyflags``) or the OS
keyring (``localmem.storage.engine.keys``). The conversion itself is
``localmem.storage.copies.convert.convert``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from localmem.cli.common import Subparsers, print_json
from localmem.config import Settings
from localmem.errors import ConfigError
from localmem.resident import daemon
from localmem.storage.copies import convert
from localmem.storage.engine.keys import NEEDS_KEY, is_encrypted, read_key_file, resolve_key

KEY_HELP = "the store's encryption key is read from $LOCALMEM_KEY, --key-file or the OS keyring, never from argv"


def add_encrypt(sub: Subparsers) -> None:
    c = sub.add_parser(
        "encrypt",
        help="encrypt the store in place (SQLite3 Multiple Ciphers); or change its key",
        description="Rewrite the store encrypted with the key from $LOCALMEM_KEY / --key-file / the OS keyring "
        "(ChaCha20-Poly1305). A new file is written, checked (integrity_check, counts) and renamed over the store; "
        "a kill leaves the old store intact and the command can simply be run again. Stop serve, watch, worker "
        "and ui first (a resident daemon a query or hook left is stopped for you). With --new-key-file an encrypted store is re-encrypted with that file's key.",
    )
    c.add_argument("--new-key-file", type=Path, metavar="FILE", help="re-encrypt an encrypted store with this key")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=cmd_encrypt)


def add_decrypt(sub: Subparsers) -> None:
    c = sub.add_parser(
        "decrypt",
        help="rewrite an encrypted store as plaintext",
        description="The reverse of `localmem encrypt`, as safely: a checked new file renamed over the store.",
    )
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=cmd_decrypt)


def cmd_encrypt(args: argparse.Namespace, settings: Settings) -> int:
    path = Path(settings.db)
    stop_daemon(path)
    if args.new_key_file is not None:
        old = resolve_key(path)
        if old is None or not is_encrypted(path):
            raise ConfigError(f"{path}: --new-key-file changes the key of an encrypted store; {NEEDS_KEY}")
        report = convert.convert(path, old_key=old, new_key=read_key_file(args.new_key_file))
    else:
        key = resolve_key(path)
        if key is None:
            raise ConfigError(f"no key to encrypt with; set LOCALMEM_KEY or --key-file ({KEY_HELP})")
        report = convert.convert(path, old_key=None, new_key=key)
    return _say(args, report, "encrypted", settings)


def cmd_decrypt(args: argparse.Namespace, settings: Settings) -> int:
    path = Path(settings.db)
    if not is_encrypted(path):
        raise ConfigError(f"{path} is not encrypted")
    stop_daemon(path)
    key = resolve_key(path)
    if key is None:
        raise ConfigError(f"{path}: {NEEDS_KEY}")
    return _say(args, convert.convert(path, old_key=key, new_key=None), "decrypted", settings)


def stop_daemon(path: Path) -> None:
    """The store's idle daemon (one a query or hook left) stopped first, and said: rewriting
    or replacing the store needs it alone (``resident.daemon.stop_for``; the next query
    starts a new one). ``encrypt``, ``decrypt`` and ``restore --force`` call it."""
    pid = daemon.stop_for(path)
    if pid is not None:
        print(f"localmem: stopped the store's resident daemon (pid {pid}) first", file=sys.stderr)


def _say(args: argparse.Namespace, report: convert.ConvertReport, what: str, settings: Settings) -> int:
    if args.json:
        print_json(report.to_dict())
    else:
        print(f"{what} {report.path}: {report.turns} turns, {report.sessions} sessions, {report.bytes} bytes")
    if report.litestream_reset or settings.replica:
        where = settings.replica or "its replica"
        before = "in plaintext " if what == "encrypted" else ""
        print(
            f"localmem: Litestream's local copy of the old file was removed; {where} still holds the history "
            f"from before this {what[:-1]} {before}and is not added to: `localmem replicate` now starts a new one "
            "(give it a new --to, or purge the old replica's files: docs/security.md, 'What forget cannot reach')",
            file=sys.stderr,
        )
    if what == "encrypted":
        print(
            "localmem: the old file's blocks may stay on the disk until overwritten; see docs/security.md",
            file=sys.stderr,
        )
    return 0
