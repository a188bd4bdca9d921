"""Client set-up: the server entry for Claude Desktop, VS Code and Cursor, with ABSOLUTE
paths to the interpreter and the database (a relative command is the most common
reason a client cannot start a server), printed or merged into the client's file.

The entry runs ``python -m localmem --db DB serve [--model M] [--sync DIR ...]``: the same
MCP server as ``python -m mcp_server`` (which entries written before said, and which keep
working: :func:`is_legacy` tells them apart for ``doctor``), started through the CLI so
that its resident socket also answers the fast entry of ``localmem query`` / ``recall``
(op ``cli``: the CLI's planner, which the MCP package, below the CLI, cannot hand it).

Merging keeps every other entry, writes a timestamped backup of the old file first,
and refuses a file that is not valid JSON rather than overwrite it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localmem.config import Settings
from localmem.errors import InputError
from localmem.storage.engine.keys import KEY_FILE_ENV
from localmem.util import private

CLIENTS = ("claude-desktop", "vscode", "cursor")
SERVER_NAME = "localmem"


@dataclass(frozen=True)
class Extras:
    """What an entry carries besides the database and model: the store's key file (as
    ``LOCALMEM_KEY_FILE`` in its ``env``: a path, never the key) and ``--sync DIR`` with
    its key flags (paths made absolute)."""

    key_file: Path | None = None
    sync: Path | None = None
    sync_args: tuple[str, ...] = ()


MODULE = "localmem"  # what the entry runs (``-m localmem ... serve``)
LEGACY_MODULE = "mcp_server"  # what entries written before ran: the same server without the CLI's planner


def server_entry(settings: Settings, client: str, extras: Extras = Extras()) -> dict[str, Any]:
    """The entry that starts the server on ``settings.db`` (module docstring): the global
    ``--db`` before ``serve``, the server's own options after it."""
    args = ["-m", MODULE, "--db", str(Path(settings.db).expanduser().resolve()), "serve"]
    if settings.model:
        model = settings.model if settings.model == "default" else str(Path(settings.model).expanduser().resolve())
        args += ["--model", model]
    if extras.sync is not None:
        args += ["--sync", str(extras.sync.expanduser().resolve()), *extras.sync_args]
    entry: dict[str, Any] = {"command": str(Path(sys.executable).absolute()), "args": args}
    if extras.key_file is not None:
        entry["env"] = {KEY_FILE_ENV: str(extras.key_file.expanduser().resolve())}
    if client == "vscode":
        entry = {"type": "stdio", **entry}
    return entry


def is_legacy(args: list[str]) -> bool:
    """Whether an entry's arguments run ``python -m mcp_server`` (written before the entry
    went through the CLI): it serves MCP and hooks as before, but a ``localmem query``
    is not answered by its socket's fast entry."""
    return args[:2] == ["-m", LEGACY_MODULE]


def snippet(settings: Settings, client: str, extras: Extras = Extras()) -> dict[str, Any]:
    """The JSON a client's config file needs (VS Code keys servers by ``servers``)."""
    key = "servers" if client == "vscode" else "mcpServers"
    return {key: {SERVER_NAME: server_entry(settings, client, extras)}}


def config_path(client: str) -> Path:
    """Where the client reads its servers from (VS Code: this workspace's .vscode/mcp.json)."""
    home = Path.home()
    if client == "claude-desktop":
        if sys.platform == "darwin":
            return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
        if sys.platform == "win32":
            return (
                Path(os.environ.get("APPDATA", home / "AppData" / "Roaming")) / "Claude" / "claude_desktop_config.json"
            )
        return Path(os.environ.get("XDG_CONFIG_HOME", home / ".config")) / "Claude" / "claude_desktop_config.json"
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if client == "vscode":
        return Path.cwd() / ".vscode" / "mcp.json"
    raise InputError(f"unknown client {client!r}: one of {', '.join(CLIENTS)}")


def installed_entry(client: str, path: Path | None = None) -> dict[str, Any] | None:
    """The localmem entry in the client's config file; None when the file or the entry
    is absent. A file that is not a JSON object, or an entry that is not one, raises."""
    target = path or config_path(client)
    if not target.exists():
        return None
    try:
        data = json.loads(target.read_text("utf-8") or "{}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read it as JSON ({exc})", path=str(target)) from exc
    key = "servers" if client == "vscode" else "mcpServers"
    section = data.get(key) if isinstance(data, dict) else None
    entry = section.get(SERVER_NAME) if isinstance(section, dict) else None
    if entry is not None and not isinstance(entry, dict):
        raise InputError(f"'{key}.{SERVER_NAME}' is not a JSON object", path=str(target))
    return entry


def install(
    settings: Settings, client: str, path: Path | None = None, extras: Extras = Extras()
) -> tuple[Path, Path | None]:
    """Merge the entry into the client's config file; returns (file, backup or None)."""
    target = path or config_path(client)
    data: dict[str, Any] = {}
    backup: Path | None = None
    if target.exists():
        try:
            loaded = json.loads(target.read_text("utf-8") or "{}")
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"cannot read it as JSON ({exc}); fix or move it first", path=str(target)) from exc
        if not isinstance(loaded, dict):
            raise InputError("expected a JSON object at the top", path=str(target))
        data = loaded
        backup = target.with_name(f"{target.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.copy2(target, backup)
    for key, servers in snippet(settings, client, extras).items():
        section = data.setdefault(key, {})
        if not isinstance(section, dict):
            raise InputError(f"'{key}' is not a JSON object", path=str(target))
        section.update(servers)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    private.write_file(tmp, json.dumps(data, indent=2) + "\n")  # 600: it names the store (and a key file)
    os.replace(tmp, target)
    return target, backup
