"""The doctor's check of one MCP client's localmem entry (``mcp_entry``: the config file that
``mcp-config --install`` wrote, its interpreter, database, key file, sync folder and keys
and model), and the two outcomes every doctor check raises (``Warn``, ``Fail``;
``cli.doctor`` runs the checks and reports them)."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path

from localmem.config import default_db_path
from localmem.errors import ConfigError
from localmem.models.llm import embedded_model_warning, is_embedded_model
from localmem.storage.engine.keys import KEY_FILE_ENV, read_key_file
from localmem.sync.keys import load_keyring
from mcp_server import clientconfig

IMPORT_TIMEOUT_S = 60


class Warn(Exception):
    """Raised by a check that works but needs the user's attention."""


class Fail(Exception):
    """Raised by a check that found something broken; the message says how to fix it."""


def model_line(model: str | None, who: str = "the server") -> str:
    """Which model answers, for ``doctor`` and ``mcp-config`` (None: the MCP server has none)."""
    if model is None:
        return f"{who} has no model, so it offers no answer tool and enriches nothing in the background"
    if is_embedded_model(model):
        return f"{who} " + str(embedded_model_warning(model)).replace("answered by", "answers with", 1)
    return f"{who} answers with {model}"


def _flag(args: list[str], name: str) -> str | None:
    """The value of ``--name X`` or ``--name=X`` in an argument list."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a[len(name) + 1 :]
    return None


def mcp_entry(client: str, path: Path | None = None) -> str:
    """Check the localmem entry of one client's config file (see the module docstring)."""
    target = path or clientconfig.config_path(client)
    fix = f"fix: `localmem mcp-config --client {client} --install` from the environment localmem is installed in"
    try:
        entry = clientconfig.installed_entry(client, target)
    except Exception as exc:
        raise Fail(f"{exc}; {fix}") from exc
    if entry is None:
        return f"not set up ({target} has no localmem entry; `localmem mcp-config --client {client} --install` adds it)"
    command = entry.get("command")
    args = entry.get("args") or []
    env = entry.get("env") or {}
    if not isinstance(command, str) or not command or not isinstance(args, list) or not isinstance(env, dict):
        raise Fail(f"{target}: the localmem entry has no usable 'command'/'args'; {fix}")
    args = [str(a) for a in args]
    notes: list[str] = [f"{target}"]
    exe = _executable(command, fix)
    module = _flag(args, "-m")
    if module is not None:
        _can_import(exe, module, {str(k): str(v) for k, v in env.items()}, fix)
        notes.append(f"{exe} imports {module}")
    else:
        notes.append(f"runs {exe}")
    db = _flag(args, "--db") or env.get("LOCALMEM_DB")
    notes.append(_entry_db(db, fix))
    if module is not None and db is not None and Path(db).expanduser().is_file():
        notes.append(_entry_opens(exe, db, args, {str(k): str(v) for k, v in env.items()}, fix))
    if (folder := _flag(args, "--sync")) is not None:
        notes.append(_entry_sync(Path(folder), args, fix))
    model = _flag(args, "--model") or env.get("LOCALMEM_MODEL")
    if model is not None and not is_embedded_model(model) and not Path(model).expanduser().is_file():
        raise Fail(f"its model {model} does not exist; {fix} (with --model PATH)")
    notes.append(model_line(model))
    hints = []
    if model is None or is_embedded_model(model):
        hints.append(f"`localmem mcp-config --client {client} --model PATH.gguf --install` sets one")
    if clientconfig.is_legacy(args):
        hints.append(
            f"an entry of an earlier version (`-m {clientconfig.LEGACY_MODULE}`): it works, but `localmem query` "
            f"is not answered through its server's socket; `localmem mcp-config --client {client} --install` "
            "refreshes it"
        )
    if hints:
        raise Warn("; ".join(notes) + "".join(f" ({hint})" for hint in hints))
    return "; ".join(notes)


def _executable(command: str, fix: str) -> str:
    if not os.path.isabs(command):
        found = shutil.which(command)
        if found is None:
            raise Fail(f"its command {command!r} is not on PATH (and a client may not have this shell's PATH); {fix}")
        return found
    if not Path(command).is_file() or not os.access(command, os.X_OK):
        raise Fail(f"its interpreter {command} does not exist (a virtual environment moved or deleted?); {fix}")
    return command


def _can_import(exe: str, module: str, env: dict[str, str], fix: str) -> None:
    code = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 3)"
    try:
        proc = subprocess.run(
            [exe, "-c", code],
            # as a client would start it: the entry's env, none of this shell's PYTHON* settings, and
            # not this folder (`-c` puts the working folder on sys.path)
            env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}, **env},
            cwd=Path.home(),
            capture_output=True,
            timeout=IMPORT_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Fail(f"its interpreter {exe} does not run ({exc}); {fix}") from exc
    if proc.returncode != 0:
        raise Fail(f"{exe} cannot import {module} (localmem is not installed there); {fix}")


def _entry_opens(exe: str, db: str, args: list[str], env: dict[str, str], fix: str) -> str:
    """Open the entry's store as its server will (its interpreter, env and key file); a
    key file it names must be usable (mode 600) even while the store is plaintext."""
    key_file = _flag(args, "--key-file")
    for named in (key_file, env.get(KEY_FILE_ENV)):
        if named:
            try:
                read_key_file(named)
            except ConfigError as exc:
                raise Fail(f"the entry's {exc}; {fix} (with --key-file FILE)") from exc
    cmd = [exe, "-m", "localmem", "--db", db, *(["--key-file", key_file] if key_file else []), "stats", "--json"]
    try:
        proc = subprocess.run(
            cmd,
            env={**{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LOCALMEM_"))}, **env},
            cwd=Path.home(),
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Fail(f"its interpreter {exe} could not open the store ({exc}); {fix}") from exc
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        hint = "an encrypted store needs `--key-file FILE` on mcp-config" if "encrypted" in why else "see the message"
        raise Fail(f"the entry cannot open its store: {why}; {fix} ({hint})")
    return "the entry opens its store"


def _entry_sync(folder: Path, args: list[str], fix: str) -> str:
    """The entry's ``--sync`` folder and key files, as its server will read them."""
    identities = [Path(a) for f, a in itertools.pairwise(args) if f == "--sync-identity"]
    passphrase = _flag(args, "--sync-passphrase-file")
    recipients = [a for f, a in itertools.pairwise(args) if f == "--sync-recipient"]
    try:
        keys = load_keyring(Path(passphrase) if passphrase else None, identities, recipients, None)
    except Exception as exc:
        raise Fail(f"its sync key cannot be used: {exc}; {fix}") from exc
    how = "encrypted" if keys.encrypts else "in plaintext (no sync key)"
    if not folder.is_dir():
        raise Warn(f"syncs {how} with {folder}, which does not exist yet (the server waits for it)")
    return f"syncs {how} with {folder}"


def _entry_db(db: str | None, fix: str) -> str:
    if db is None:
        return f"database: none given, the server's default ({default_db_path()} unless its config file says otherwise)"
    path = Path(db).expanduser()
    if not path.is_absolute():
        raise Fail(f"its database {db} is a relative path (the client's working folder decides where it is); {fix}")
    if path.is_file():
        return f"database {path} ({path.stat().st_size / 1e6:.1f} MB)"
    if path.exists():
        raise Fail(f"its database {path} is not a file; {fix} (with --db PATH)")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK):
        raise Fail(f"its database {path} cannot be created (no writable folder above it); {fix} (with --db PATH)")
    return f"database {path} does not exist yet (the server creates it on first use)"
