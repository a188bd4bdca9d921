"""localmem as an agent's plugin: a Claude Code plugin, a Codex plugin and a Gemini CLI
extension, each bundling the hook entries and the MCP server, generated for this user.

A plugin's hook must name an interpreter that has localmem, the person's store and its
key file; a static plugin could only guess them (``python3`` on PATH: the usual reason a
hook silently does nothing). So the plugin is written per user, by ``localmem hooks plugin
--client C``, into ``<user data dir>/plugins/<client>`` (``--out`` moves it), with the same
commands ``hooks install`` writes (:func:`localmem.hooks.install.entry`) and the MCP entry
``mcp-config`` writes (given by the caller: the MCP package sits above this one). Writing it
again replaces what it wrote, nothing else.

===========  ==================================================  ==========================
client       files (under the folder)                            added by
===========  ==================================================  ==========================
claude-code  ``.claude-plugin/marketplace.json``, ``localmem/``:  ``claude plugin marketplace
             ``.claude-plugin/plugin.json``, ``hooks/hooks.json``,  add DIR``, then ``claude
             ``.mcp.json``, ``README.md``                        plugin install
                                                                 localmem@localmem``
codex        ``.agents/plugins/marketplace.json``, ``localmem/``: ``codex plugin marketplace
             ``.codex-plugin/plugin.json`` (naming                add DIR``, then ``codex
             ``./hooks/hooks.json`` and ``./.mcp.json``), the     plugin add
             same three files                                    localmem@localmem``
gemini       ``gemini-extension.json`` (its ``mcpServers``),     ``gemini extensions link
             ``hooks/hooks.json``, ``README.md``                  DIR``
copilot      ``.github/plugin/marketplace.json``, ``localmem/``:  ``copilot plugin marketplace
             ``plugin.json`` (naming ``hooks.json`` and           add DIR``, then ``copilot
             ``.mcp.json``), ``hooks.json`` (Copilot's own hooks  plugin install
             format), ``.mcp.json``, ``README.md``                localmem@localmem``
===========  ==================================================  ==========================

Claude Code and Codex copy a plugin into their own cache when it is added (a plugin written
again is picked up by their update command); Gemini's ``link`` and Copilot CLI's local
marketplace read the folder in place (Copilot 1.0.102: "loaded live … nothing was copied";
it calls a plugin installed from a bare folder, without a marketplace, deprecated). A
Copilot plugin's hooks file is the one its hooks folder reads (``{"version": 1, "hooks":
{<event>: [flat entry]}}``, ``hooks.install``); Copilot records an enabled plugin in
``~/.copilot/settings.json``'s ``enabledPlugins`` as Claude Code does, one installed from a
bare folder in ``config.json``'s ``installedPlugins``.
:func:`installed` says whether a client has localmem's plugin enabled, read from the
client's own files (Claude Code's ``enabledPlugins``, Codex's ``[plugins."localmem@…"]``,
Gemini's ``extensions/localmem``): with it enabled, settings entries too would run every
hook twice (``hooks install --all`` leaves that client's settings alone).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

import platformdirs

from localmem import __version__
from localmem.errors import InputError
from localmem.hooks import install
from localmem.hooks.events import CLIENT_EVENTS
from localmem.ingest.capture import agent_home
from localmem.util import private

NAME = "localmem"  # the plugin's, the marketplace's and the extension's name
CLIENTS = ("claude-code", "codex", "gemini", "copilot")
DESCRIPTION = (
    "Long-term memory for this agent, kept in one local SQLite file: each turn stored when the agent stops, "
    "a session started with what the project decided and left open, a prompt given the memory that bears on it."
)
README = """# localmem

This {what} was written by `localmem hooks plugin --client {client}` for one person's store:
its hooks run `{python} -m localmem.hooks` on `{db}`, and its MCP server is `localmem serve`
on the same store. Nothing leaves the machine.

Each hook stores the session's turns when the agent stops, starts a session with what the
project decided and left open, and gives a prompt the memory that bears on it. A hook never
breaks the agent: `localmem hooks status` and `localmem doctor` say what the hooks did.

Write it again (another store, another interpreter) with the same command; remove it with
the agent's own command ({remove}).
"""
ADD = {
    "claude-code": "claude plugin marketplace add {dir} && claude plugin install {name}@{name}",
    "codex": "codex plugin marketplace add {dir} && codex plugin add {name}@{name}",
    "gemini": "gemini extensions link {dir}",
    "copilot": "copilot plugin marketplace add {dir} && copilot plugin install {name}@{name}",
}
REMOVE = {
    "claude-code": "claude plugin uninstall {name}@{name} && claude plugin marketplace remove {name}",
    "codex": "codex plugin remove {name}@{name} && codex plugin marketplace remove {name}",
    "gemini": "gemini extensions uninstall {name}",
    "copilot": "copilot plugin uninstall {name}@{name} && copilot plugin marketplace remove {name}",
}


def default_dir(client: str) -> Path:
    """Where ``hooks plugin`` writes the client's plugin: ``<user data dir>/plugins/<client>``."""
    _check(client)
    return Path(platformdirs.user_data_dir(NAME)) / "plugins" / client


def plugin_root(client: str, out: Path) -> Path:
    """The plugin's own folder in ``out``: the folder itself for a Gemini extension, the
    marketplace's ``localmem/`` for the others."""
    return out if client == "gemini" else out / NAME


def hooks_file(db: Path, client: str, key_file: Path | None = None) -> dict[str, Any]:
    """``hooks/hooks.json``: one entry per event, the commands ``hooks install`` writes."""
    hooks = {name: [install.entry(db, client, event, key_file)] for event, name in CLIENT_EVENTS[client].items()}
    return {"version": 1, "hooks": hooks} if client in install.FLAT else {"hooks": hooks}


def files(client: str, db: Path, mcp: dict[str, Any], key_file: Path | None = None) -> dict[str, str]:
    """Each file of the plugin, by its path relative to the output folder, as text."""
    _check(client)
    base = "" if client == "gemini" else NAME + "/"
    words = {
        "what": "extension" if client == "gemini" else "plugin",
        "client": client,
        "python": str(Path(sys.executable).absolute()),
        "db": str(db.expanduser().resolve()),
        "remove": REMOVE[client].format(name=NAME),
    }
    servers = {"mcpServers": {NAME: mcp}}
    out = {
        base + ("hooks.json" if client == "copilot" else "hooks/hooks.json"): _json(hooks_file(db, client, key_file)),
        base + "README.md": README.format(**words),
    }
    about = {"name": NAME, "version": __version__, "description": DESCRIPTION}
    author = {"name": "localmem"}
    listed = {"name": NAME, "source": "./" + NAME, "description": DESCRIPTION, "version": __version__}
    market = {"name": NAME, "owner": author, "description": "localmem, for this user's store", "plugins": [listed]}
    if client == "copilot":
        manifest = {**about, "author": author, "license": "MIT", "hooks": "hooks.json", "mcpServers": ".mcp.json"}
        out[base + "plugin.json"] = _json(manifest)
        out[base + ".mcp.json"] = _json(servers)
        out[".github/plugin/marketplace.json"] = _json(market)
        return out
    if client == "gemini":
        out["gemini-extension.json"] = _json({**about, **servers})
        return out
    out[base + ".mcp.json"] = _json(servers)
    if client == "claude-code":
        out[base + ".claude-plugin/plugin.json"] = _json({**about, "author": author, "license": "MIT"})
        out[".claude-plugin/marketplace.json"] = _json(market)
    else:  # Codex: the manifest names its hooks and servers; the marketplace entry is its own shape
        manifest = {
            **about,
            "author": author,
            "license": "MIT",
            "hooks": "./hooks/hooks.json",
            "mcpServers": "./.mcp.json",
        }
        out[base + ".codex-plugin/plugin.json"] = _json(manifest)
        entry = {
            "name": NAME,
            "source": {"source": "local", "path": "./" + NAME},
            "policy": {"installation": "AVAILABLE"},
            "category": "Productivity",
        }
        out[".agents/plugins/marketplace.json"] = _json({"name": NAME, "plugins": [entry]})
    return out


def write(client: str, out: Path, db: Path, mcp: dict[str, Any], key_file: Path | None = None) -> list[Path]:
    """Write the plugin into ``out`` (made 700; each file 600: they name the store and its
    key file), replacing what an earlier run wrote there; the files written."""
    made = files(client, db, mcp, key_file)
    out = out.expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise InputError("not a folder", path=str(out))
    if out.is_dir() and any(out.iterdir()) and not _ours(client, out):
        raise InputError("the folder holds something that is not localmem's plugin: name an empty one", path=str(out))
    private.make_private_dir(out)
    written = []
    for rel, text in made.items():
        path = out / rel
        private.make_private_dir(path.parent)
        tmp = path.with_name(path.name + ".tmp")
        private.write_file(tmp, text)
        os.replace(tmp, path)
        written.append(path)
    return written


def add_line(client: str, out: Path) -> str:
    """The one line that adds the plugin written in ``out`` to the client."""
    return ADD[client].format(dir=_quote(out), name=NAME)


def installed(client: str, home: Path | None = None, env: dict[str, str] | None = None) -> str | None:
    """Where the client has localmem's plugin enabled (a few words), or None (also for a
    client localmem writes no plugin for: Cursor, OpenCode, whose hooks need none)."""
    if client not in CLIENTS:
        return None
    home = home or Path.home()
    env = dict(os.environ) if env is None else env
    root = agent_home(client, env, home)
    if client in ("claude-code", "copilot"):
        try:
            data = json.loads((root / "settings.json").read_text("utf-8"))
        except (OSError, ValueError):
            data = {}
        enabled = data.get("enabledPlugins") if isinstance(data, dict) else None
        on = [k for k, v in (enabled or {}).items() if v is True and k.split("@")[0] == NAME]
        if on:
            return f"plugin {on[0]} enabled in {root / 'settings.json'}"
        return _copilot_direct(root) if client == "copilot" else None
    if client == "codex":
        try:
            table = tomllib.loads((root / "config.toml").read_text("utf-8"))
        except (OSError, ValueError):
            return None
        plugins = table.get("plugins")
        on = [
            k
            for k, v in (plugins if isinstance(plugins, dict) else {}).items()
            if k.split("@")[0] == NAME and isinstance(v, dict) and v.get("enabled", True) is not False
        ]
        return f"plugin {on[0]} enabled in {root / 'config.toml'}" if on else None
    if client == "gemini":
        ext = root / "extensions" / NAME
        return f"extension {NAME} in {ext}" if ext.is_dir() else None
    return None


def _copilot_direct(root: Path) -> str | None:
    """Copilot CLI's record of a plugin installed from a bare folder (``config.json``, whose
    ``//`` comment lines are not JSON), or None."""
    try:
        text = (root / "config.json").read_text("utf-8")
        data = json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))
    except (OSError, ValueError):
        return None
    plugins = data.get("installedPlugins") if isinstance(data, dict) else None
    for p in plugins if isinstance(plugins, list) else []:
        if isinstance(p, dict) and p.get("name") == NAME and p.get("enabled", True) is not False:
            return f"plugin {NAME} enabled in {root / 'config.json'}"
    return None


def _ours(client: str, out: Path) -> bool:
    """Whether ``out`` holds a plugin this module wrote (so writing again may replace it)."""
    manifest = "gemini-extension.json" if client == "gemini" else ".claude-plugin/marketplace.json"
    if client == "copilot":
        manifest = ".github/plugin/marketplace.json"
    if client == "codex":
        manifest = ".agents/plugins/marketplace.json"
    try:
        return bool(json.loads((out / manifest).read_text("utf-8")).get("name") == NAME)
    except (OSError, ValueError, AttributeError):
        return False


def _json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


def _quote(path: Path) -> str:
    return shlex.quote(str(path))


def _check(client: str) -> None:
    if client not in CLIENTS:
        raise InputError(f"no plugin for {client!r}: one of {', '.join(CLIENTS)}")
