"""The hook entries in each client's settings file: merged in, taken out, reported.

=============  ==========================  =========================================
client         file                        entries (event: timeout)
=============  ==========================  =========================================
claude-code    ``~/.claude/settings.json``  SessionStart 10 s, UserPromptSubmit 5 s, Stop,
                                            PreCompact, SessionEnd 60 s
codex          ``~/.codex/hooks.json``      SessionStart 10 s, UserPromptSubmit 5 s, Stop,
                                            PreCompact 60 s (``$CODEX_HOME`` moves it)
gemini         ``~/.gemini/settings.json``  SessionStart 10 s, BeforeAgent 5 s, AfterAgent,
                                            PreCompress, SessionEnd 60 s (in milliseconds)
=============  ==========================  =========================================

Each entry runs ``<this interpreter> -m localmem.hooks --db <this store> <event> --client
<client>`` with absolute paths (the most common reason a hook silently does nothing is a
command the client cannot find). Merging keeps every other key and every other hook,
replaces localmem's own entries (so installing twice changes nothing), writes a
timestamped backup of the old file first, and refuses a file that is not a JSON object
rather than overwrite it. Codex older than its hooks-by-default release also needs
``[features] codex_hooks = true`` in ``config.toml``: ``status`` says when hooks are off
there; the file itself is left to the person.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.hooks.events import CLIENT_EVENTS, CLIENTS
from localmem.ingest.capture import agent_home
from localmem.util import private

TIMEOUTS = {"session-start": 10, "prompt": 5, "stop": 60, "pre-compact": 60, "session-end": 60}
MARK = "localmem.hooks"  # with "--client <client>": how our commands are known


def settings_path(client: str, home: Path | None = None, env: dict[str, str] | None = None) -> Path:
    home = home or Path.home()
    env = dict(os.environ) if env is None else env
    if client in CLIENTS:
        return agent_home(client, env, home) / ("hooks.json" if client == "codex" else "settings.json")
    raise InputError(f"unknown client {client!r}: one of {', '.join(CLIENTS)}")


def command(db: Path, client: str, event: str, python: str | None = None) -> str:
    argv = [python or str(Path(sys.executable).absolute()), "-m", MARK, "--db", str(db.expanduser().resolve())]
    return shlex.join([*argv, event, "--client", client])


def ours(hook: Any, client: str) -> bool:
    cmd = hook.get("command") if isinstance(hook, dict) else None
    return isinstance(cmd, str) and MARK in cmd and f"--client {client}" in cmd


def entry(db: Path, client: str, event: str) -> dict[str, Any]:
    hook: dict[str, Any] = {"type": "command", "command": command(db, client, event)}
    if client == "gemini":
        hook = {"name": f"localmem-{event}", **hook, "timeout": TIMEOUTS[event] * 1000}
    else:
        hook["timeout"] = TIMEOUTS[event]
    return {"hooks": [hook]}


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text("utf-8") or "{}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read it as JSON ({exc}); fix or move it first", path=str(path)) from exc
    if not isinstance(data, dict):
        raise InputError("expected a JSON object at the top", path=str(path))
    if not isinstance(data.get("hooks", {}), dict):
        raise InputError("'hooks' is not a JSON object", path=str(path))
    return data


def _without_ours(groups: Any, client: str) -> list[Any]:
    """The event's matcher groups with localmem's hooks taken out (empty groups dropped)."""
    out = []
    for group in groups if isinstance(groups, list) else []:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            kept = [h for h in group["hooks"] if not ours(h, client)]
            if kept:
                out.append({**group, "hooks": kept})
        else:
            out.append(group)
    return out


def _write(path: Path, data: dict[str, Any]) -> Path | None:
    backup = None
    if path.exists():
        backup = path.with_name(f"{path.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.copy2(path, backup)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    private.write_file(tmp, json.dumps(data, indent=2) + "\n")  # 600, as every file localmem writes
    os.replace(tmp, path)
    return backup


def install(db: Path, client: str, path: Path | None = None) -> tuple[Path, Path | None]:
    """Merge localmem's entries into the client's file; returns (file, backup or None)."""
    target = path or settings_path(client)
    data = _load(target)
    hooks = dict(data.get("hooks") or {})
    for event, name in CLIENT_EVENTS[client].items():
        hooks[name] = [*_without_ours(hooks.get(name), client), entry(db, client, event)]
    return target, _write(target, {**data, "hooks": hooks})


def uninstall(client: str, path: Path | None = None) -> tuple[Path, Path | None, int]:
    """Take localmem's entries out; returns (file, backup or None, entries removed)."""
    target = path or settings_path(client)
    if not target.exists():
        return target, None, 0
    data = _load(target)
    hooks = dict(data.get("hooks") or {})
    removed = 0
    for name in list(hooks):
        before = (
            sum(len(g.get("hooks", [])) for g in hooks[name] if isinstance(g, dict))
            if isinstance(hooks[name], list)
            else 0
        )
        kept = _without_ours(hooks[name], client)
        removed += before - sum(len(g.get("hooks", [])) for g in kept if isinstance(g, dict))
        if kept:
            hooks[name] = kept
        else:
            del hooks[name]
    if not removed:
        return target, None, 0
    rest = {**data, "hooks": hooks} if hooks else {k: v for k, v in data.items() if k != "hooks"}
    return target, _write(target, rest), removed


@dataclass(frozen=True)
class Installed:
    client: str
    path: str
    events: dict[str, str]  # localmem event -> the command installed for it
    problems: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"client": self.client, "path": self.path, "events": self.events, "problems": self.problems}


def inspect(client: str, path: Path | None = None) -> Installed:
    """What of localmem's entries the client's file holds, and what would stop them running."""
    target = path or settings_path(client)
    problems: list[str] = []
    found: dict[str, str] = {}
    try:
        hooks = _load(target).get("hooks") or {}
    except InputError as exc:
        return Installed(client, str(target), {}, [str(exc)])
    for event, name in CLIENT_EVENTS[client].items():
        for group in hooks.get(name) or []:
            for h in group.get("hooks", []) if isinstance(group, dict) else []:
                if ours(h, client):
                    found[event] = h["command"]
    for event, cmd in found.items():
        python = shlex.split(cmd)[0]
        if not Path(python).exists():
            problems.append(f"{event}: the interpreter {python} does not exist (run `localmem hooks install` again)")
    missing = [e for e in CLIENT_EVENTS[client] if e not in found]
    if found and missing:
        problems.append("not installed for: " + ", ".join(missing))
    if client == "codex" and found:
        problems += _codex_features(target.parent / "config.toml")
    return Installed(client, str(target), found, problems)


def _codex_features(config: Path) -> list[str]:
    """Codex reads hooks only with its hooks feature on: say so when config.toml turns it off."""
    try:
        features = tomllib.loads(config.read_text("utf-8")).get("features", {}) if config.exists() else {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        return [f"cannot read {config}: {exc}"]
    on = features.get("hooks", features.get("codex_hooks"))
    if on is False:
        return [f"hooks are turned off in {config} ([features] hooks = false): turn them on for these to run"]
    return []
