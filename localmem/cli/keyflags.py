"""The global ``--key-file`` and ``--age-identity`` flags: where the store's key and the age
identity come from, checked once and passed on by environment.

The key never comes from a command-line value (argv shows in the process list): it is
``$LOCALMEM_KEY``, a key file (``--key-file``, mode 600) or the OS keyring
(``localmem.storage.engine.keys``). ``--key-file`` is put in ``$LOCALMEM_KEY_FILE`` so that every
process this one starts (the worker, the MCP server) opens the store with it too. Light (no
numpy, no store): every command parses these flags.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from localmem.storage.engine.keys import AGE_IDENTITY_ENV, KEY_FILE_ENV, read_key_file


def add_key_file_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--key-file",
        type=Path,
        metavar="FILE",
        help="file holding the store's encryption key (mode 600); else $LOCALMEM_KEY or the OS keyring",
    )
    p.add_argument(
        "--age-identity",
        type=Path,
        metavar="FILE",
        help="age identity (mode 600) to read age-encrypted exports and backups; else $LOCALMEM_AGE_IDENTITY",
    )


def apply_key_file(args: argparse.Namespace) -> None:
    """Check ``--key-file`` / ``--age-identity`` now (one clear line if unusable) and pass them on by environment."""
    for flag, env in (("key_file", KEY_FILE_ENV), ("age_identity", AGE_IDENTITY_ENV)):
        path: Path | None = getattr(args, flag, None)
        if path is not None:
            read_key_file(path)
            os.environ[env] = str(path.resolve())
