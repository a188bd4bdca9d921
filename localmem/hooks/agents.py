"""``hooks install --all`` and ``uninstall --all``: every agent found on the machine gets
localmem's hooks once, and gives them back byte for byte.

An agent is found by its folder (``~/.claude``, ``$CODEX_HOME`` or ``~/.codex``,
``~/.gemini``, ``$COPILOT_HOME`` or ``~/.copilot``, ``~/.cursor``, ``~/.config/opencode``
under ``$XDG_CONFIG_HOME``) or its command on PATH (``claude``, ``codex``, ``gemini``,
``copilot``, ``cursor-agent``, ``opencode``). Copilot CLI's file is localmem's own hooks file in its
hooks folder, OpenCode's localmem's own plugin file (``install.settings_path``): one that did
not exist is removed again, with the folders made for it. Each gets the
entries of ``hooks install`` in its settings file, the route all three read hooks from
without a command of theirs to run, and the one that can be undone exactly: adding a plugin
goes through the client's own command, and Claude Code 2.1.337's ``plugin uninstall`` then
``marketplace remove`` leave ``"enabledPlugins": {}`` and ``"extraKnownMarketplaces": {}``
in ``settings.json`` and its plugin cache and lists behind (checked). A client that has
localmem's plugin enabled (:func:`localmem.hooks.plugins.installed`) is left alone: its
plugin already runs the hooks, and settings entries too would run each one twice.

What was there is kept in a record of this user's own, ``<user state dir>/hooks-installed.json``
(mode 600; its path is in every answer), not beside each file: per file, its bytes before
(none: it did not exist), its mode, the SHA-256 of what ``install`` wrote, and the folders
made for it. ``uninstall --all`` gives a file still as written its old bytes and mode back
(or removes it and the folders made for it); a file changed since (the person, or the agent,
wrote to it) keeps those changes and loses only localmem's entries (``install.uninstall``,
a backup beside it first), and the answer says so. Installing again keeps the first record
of a file's old bytes.

Cursor runs ``~/.claude/settings.json``'s hooks too when its third-party skills are on; a
Cursor payload at a Claude Code entry does nothing (``hooks.events``), so Cursor is served
once, by its own entries in ``~/.cursor/hooks.json``.
VS Code's agent reads ``~/.claude/settings.json``'s hooks too; the entries then run with
VS Code's payload, which ``events.parse`` tells apart (it stores none of VS Code's
transcript: ``localmem capture`` and ``watch`` read VS Code's chats from their own files).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from localmem.errors import InputError
from localmem.hooks import install, opencode, plugins
from localmem.hooks.events import CLIENTS
from localmem.ingest.capture import agent_home, default_root
from localmem.util import private

COMMANDS = {
    "claude-code": "claude",
    "codex": "codex",
    "gemini": "gemini",
    "copilot": "copilot",
    "cursor": "cursor-agent",
    "opencode": "opencode",
}
# What the person must still do once the entries are in (said after each install)
TODO = {
    "claude-code": "restart Claude Code (a running session read its settings when it started)",
    "codex": "open codex, type /hooks, review localmem's entries and trust them (Codex runs none until then)",
    "gemini": "restart Gemini CLI (a running session read its settings when it started)",
    "copilot": "start a new Copilot CLI session (a running one read its hooks when it started)",
    "cursor": "restart Cursor or open a new agent session; for recall while you work, also run "
    "`localmem mcp-config --client cursor --install` (Cursor's hooks cannot add context to a prompt)",
    "opencode": "start a new OpenCode session (a running one loaded its plugins when it started)",
}
RECORD_VERSION = 1
VSCODE_NOTE = (
    "VS Code is here too: its agent runs the hooks in ~/.claude/settings.json as well, and gets recall from "
    "them; its chats are stored by `localmem capture` / `localmem watch` from VS Code's own files, never by "
    "these hooks (no conversation is stored twice)"
)


@dataclass
class Done:
    """What ``--all`` did for one client: ``action`` is ``installed``, ``removed``,
    ``restored``, ``left`` (its plugin runs the hooks), ``kept`` (changed since: only
    localmem's entries taken out), ``none`` (nothing to take out) or ``not found``."""

    client: str
    action: str
    path: str = ""
    why: str = ""
    todo: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"client": self.client, "action": self.action, "path": self.path, "why": self.why, "todo": self.todo}


def record_path() -> Path:
    return Path(platformdirs.user_state_dir("localmem")) / "hooks-installed.json"


def found(home: Path | None = None, env: dict[str, str] | None = None) -> dict[str, str]:
    """The agents on this machine: client -> how it was found (its folder, or its command)."""
    home = home or Path.home()
    env = dict(os.environ) if env is None else env
    out: dict[str, str] = {}
    for client in CLIENTS:
        folder = _folder(client, env, home)
        cmd = shutil.which(COMMANDS[client], path=env.get("PATH", ""))
        if folder.is_dir():
            out[client] = f"its folder {folder}"
        elif cmd:
            out[client] = f"its command {cmd}"
    return out


def _folder(client: str, env: dict[str, str], home: Path) -> Path:
    """The folder that says the agent is here (module docstring)."""
    return opencode.config_dir(env, home) if client == "opencode" else agent_home(client, env, home)


def vscode_found(home: Path | None = None, env: dict[str, str] | None = None) -> bool:
    """Whether VS Code's ``User`` folder is on this machine (its agent reads Claude Code's hooks)."""
    env = dict(os.environ) if env is None else env
    return default_root("vscode", env, home or Path.home()).is_dir()


def install_all(
    db: Path, key_file: Path | None = None, home: Path | None = None, env: dict[str, str] | None = None
) -> list[Done]:
    """Install into every agent found (module docstring); one :class:`Done` per client."""
    home = home or Path.home()
    env = dict(os.environ) if env is None else env
    agents = found(home, env)
    record = _load_record()
    done: list[Done] = []
    for client in CLIENTS:
        if client not in agents:
            done.append(
                Done(client, "not found", why=f"no {_folder(client, env, home)} and no `{COMMANDS[client]}` on PATH")
            )
            continue
        target = install.settings_path(client, home, env)
        plugin = plugins.installed(client, home, env)
        if plugin:
            done.append(Done(client, "left", str(target), f"localmem's {plugin} runs the hooks already"))
            continue
        key = str(target)
        before = record["files"].get(key) or _snapshot(target)
        install.install(db, client, target, key_file, backup=False)
        before["after"] = _sha(target.read_bytes())
        record["files"][key] = before
        _save_record(record)  # after each file: an interrupted run still knows what it changed
        done.append(Done(client, "installed", key, agents[client], [TODO[client]]))
    return done


def uninstall_all(home: Path | None = None, env: dict[str, str] | None = None) -> list[Done]:
    """Take localmem's hooks out of every agent (module docstring); one :class:`Done` per client."""
    home = home or Path.home()
    env = dict(os.environ) if env is None else env
    record = _load_record()
    done: list[Done] = []
    for client in CLIENTS:
        target = install.settings_path(client, home, env)
        kept = record["files"].pop(str(target), None)
        if kept is not None and target.exists() and _sha(target.read_bytes()) == kept["after"]:
            _restore(target, kept)
            done.append(Done(client, "restored", str(target), "as it was before `hooks install --all`"))
            continue
        path, backup, removed = install.uninstall(client, target)
        if removed:
            why = "changed since `hooks install --all`: only localmem's entries taken out" if kept else ""
            done.append(
                Done(client, "kept" if kept else "removed", str(path), why + (f" (backup: {backup})" if backup else ""))
            )
        else:
            done.append(Done(client, "none", str(path), "no localmem entries"))
    if record["files"]:
        _save_record(record)
    else:
        record_path().unlink(missing_ok=True)
        for folder in reversed(record.get("made", [])):  # the folders made for the record, when empty
            with contextlib.suppress(OSError):
                Path(folder).rmdir()
    return done


def _snapshot(target: Path) -> dict[str, Any]:
    """What ``target`` is before localmem writes it: its bytes and mode, or the folders
    that writing it will make (deepest last)."""
    if target.exists():
        st = target.stat()
        return {"bytes": base64.b64encode(target.read_bytes()).decode("ascii"), "mode": st.st_mode & 0o7777}
    return {"bytes": None, "made": _missing(target)}


def _missing(path: Path) -> list[str]:
    """The folders above ``path`` that do not exist yet, outermost first."""
    made = []
    parent = path.parent
    while not parent.exists():
        made.append(str(parent))
        parent = parent.parent
    return list(reversed(made))


def _restore(target: Path, kept: dict[str, Any]) -> None:
    if kept["bytes"] is None:
        target.unlink()
        for folder in reversed(kept.get("made", [])):
            try:
                Path(folder).rmdir()  # only when empty: something the agent put there stays
            except OSError:
                break
        return
    tmp = target.with_name(target.name + ".tmp")
    private.write_file(tmp, base64.b64decode(kept["bytes"]))
    os.chmod(tmp, kept["mode"])
    os.replace(tmp, target)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _load_record() -> dict[str, Any]:
    path = record_path()
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {"version": RECORD_VERSION, "files": {}}
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read localmem's install record ({exc}); move it away first", path=str(path)) from exc
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        raise InputError("not localmem's install record; move it away first", path=str(path))
    return data


def _save_record(record: dict[str, Any]) -> None:
    path = record_path()
    if "made" not in record:  # the folders the record itself needs, taken away with it
        record["made"] = _missing(path)
    private.make_private_dir(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    private.write_file(tmp, json.dumps(record, indent=2) + "\n")  # 600: it holds settings files' old bytes
    os.replace(tmp, path)
