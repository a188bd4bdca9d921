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
copilot        ``~/.copilot/hooks/          sessionStart 10 s, userPromptSubmitted 5 s,
               localmem.json``              agentStop, preCompact, sessionEnd 60 s
                                            (``$COPILOT_HOME`` moves it)
cursor         ``~/.cursor/hooks.json``     sessionStart 10 s, stop, preCompact,
                                            sessionEnd 60 s
opencode       ``~/.config/opencode/        session-start 10 s, prompt 5 s, stop,
               plugin/localmem.js``         pre-compact 60 s (``$XDG_CONFIG_HOME``
                                            moves it)
=============  ==========================  =========================================

OpenCode's hooks are plugins: localmem writes a plugin file of its own (``hooks.opencode``)
holding the same commands as argument lists, with the timeouts above (the plugin kills a
command at its timeout). It is written whole each time (no backup: nothing in it is the
person's), a file there that is not localmem's is refused, and ``uninstall`` removes it.

Cursor reads ``~/.cursor/hooks.json`` (its hooks reference), ``{"version": 1, "hooks":
{<event>: [entry, …]}}`` with flat entries ``{"command": …, "timeout": N}``: merged like
the others into the person's own file, ``version`` kept (1 when localmem makes the file).
Cursor has no prompt hook that adds context (``hooks.events``), so none is installed for it.

GitHub Copilot CLI reads every ``*.json`` in its user hooks folder (``$COPILOT_HOME/hooks``,
GitHub's hooks reference), each ``{"version": 1, "hooks": {<event>: [entry, …]}}`` with flat
entries ``{"type": "command", "bash": …, "timeoutSec": N}`` (no matcher groups): localmem
writes a file of its own there, ``localmem.json``, merged like the others (another entry a
person put in it stays), and ``uninstall`` removes the file once only ``version`` is left.
Its backups are named ``localmem.json.bak-…``, which Copilot does not read as hooks.

Each entry runs ``<this interpreter> -m localmem.hooks --db <this store> [--key-file
<file>] <event> --client <client>`` with absolute paths (the most common reason a hook
silently does nothing is a command the client cannot find). ``--key-file`` carries the
path of the store's key file, never the key. Merging keeps every other key and every
other hook, replaces localmem's own entries (so installing twice changes nothing),
writes a timestamped backup of the old file first, and refuses a file that is not a JSON
object rather than overwrite it.

Codex (0.171, ``codex-rs/hooks/src/engine/discovery.rs``) runs a hook from a user's
``hooks.json`` only once the person trusted it in its ``/hooks`` view, which records
``[hooks.state."<hooks.json real path>:<event label>:<group>:<handler>"] trusted_hash =
"sha256:…"`` in ``$CODEX_HOME/config.toml``: the SHA-256 of the entry's canonical JSON
(sorted keys, no spaces) ``{"event_name", "hooks": [{"async", "command", "timeout",
"type"}]}``, so an entry changed since (another ``--db``, another interpreter) is
untrusted again. :func:`codex_trust` reads that table and says, per entry, ``trusted``,
``not trusted``, ``changed since trusted``, ``turned off`` or ``unknown`` (config.toml
unreadable); localmem never writes it (that is the person's consent). Codex's
``[features] hooks`` (older name ``codex_hooks``) is on by default; ``status`` says when
``config.toml`` turns it off. Codex's SessionEnd (0.171) is capped at 3 s, too short for
an ingest, and its Stop already runs after every turn: localmem installs none for Codex.
"""

from __future__ import annotations

import hashlib
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

import apsw

from localmem.errors import ConfigError, InputError
from localmem.hooks import opencode
from localmem.hooks.events import CLIENT_EVENTS, CLIENTS
from localmem.ingest.capture import agent_home
from localmem.storage.engine import keys
from localmem.util import private

TIMEOUTS = {"session-start": 10, "prompt": 5, "stop": 60, "pre-compact": 60, "session-end": 60}
MARK = "localmem.hooks"  # with "--client <client>": how our commands are known
# Codex's hook_event_key_label: the event's name in a trust key and in the hashed identity
CODEX_LABELS = {"SessionStart": "session_start", "UserPromptSubmit": "user_prompt_submit", "Stop": "stop"}
CODEX_LABELS["PreCompact"] = "pre_compact"
TRUSTED = "trusted"
FLAT = ("copilot", "cursor")  # clients whose hooks file is {"version": 1, "hooks": {event: [flat entry]}}


def settings_path(client: str, home: Path | None = None, env: dict[str, str] | None = None) -> Path:
    home = home or Path.home()
    env = dict(os.environ) if env is None else env
    if client == "copilot":
        return agent_home(client, env, home) / "hooks" / "localmem.json"
    if client == "cursor":
        return agent_home(client, env, home) / "hooks.json"
    if client == "opencode":
        return opencode.plugin_path(env, home)
    if client in CLIENTS:
        return agent_home(client, env, home) / ("hooks.json" if client == "codex" else "settings.json")
    raise InputError(f"unknown client {client!r}: one of {', '.join(CLIENTS)}")


def argv(db: Path, client: str, event: str, python: str | None = None, key_file: Path | None = None) -> list[str]:
    """The hook command's arguments (module docstring)."""
    out = [python or str(Path(sys.executable).absolute()), "-m", MARK, "--db", str(db.expanduser().resolve())]
    if key_file is not None:  # its path: the key itself never goes on a command line
        out += ["--key-file", str(key_file.expanduser().resolve())]
    return [*out, event, "--client", client]


def command(db: Path, client: str, event: str, python: str | None = None, key_file: Path | None = None) -> str:
    return shlex.join(argv(db, client, event, python, key_file))


def _cmd(hook: Any) -> Any:
    """A handler's command line (Copilot's is under ``bash``), or None."""
    return (hook.get("command") or hook.get("bash")) if isinstance(hook, dict) else None


def ours(hook: Any, client: str) -> bool:
    cmd = _cmd(hook)
    return isinstance(cmd, str) and MARK in cmd and f"--client {client}" in cmd


def _handlers(group: Any) -> list[Any]:
    """The handlers of one entry of an event's list: a matcher group's ``hooks``, or the
    entry itself (Copilot's flat entries)."""
    if isinstance(group, dict) and isinstance(group.get("hooks"), list):
        return list(group["hooks"])
    return [group] if isinstance(group, dict) and _cmd(group) is not None else []


def entry(db: Path, client: str, event: str, key_file: Path | None = None) -> dict[str, Any]:
    if client == "copilot":  # a flat entry, its command under "bash" (module docstring)
        return {"type": "command", "bash": command(db, client, event, key_file=key_file), "timeoutSec": TIMEOUTS[event]}
    if client == "cursor":  # a flat entry (module docstring)
        return {"command": command(db, client, event, key_file=key_file), "timeout": TIMEOUTS[event]}
    hook: dict[str, Any] = {"type": "command", "command": command(db, client, event, key_file=key_file)}
    if client == "gemini":
        hook = {"name": f"localmem-{event}", **hook, "timeout": TIMEOUTS[event] * 1000}
    else:
        hook["timeout"] = TIMEOUTS[event]
    return {"hooks": [hook]}


def _load(path: Path, client: str = "") -> dict[str, Any]:
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
    if client in FLAT and data.get("version", 1) != 1:
        raise InputError(f"hooks file version {data.get('version')!r}, not 1: move it first", path=str(path))
    return data


def _without_ours(groups: Any, client: str) -> list[Any]:
    """The event's matcher groups with localmem's hooks taken out (empty groups dropped)."""
    out = []
    for group in groups if isinstance(groups, list) else []:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            kept = [h for h in group["hooks"] if not ours(h, client)]
            if kept:
                out.append({**group, "hooks": kept})
        elif not ours(group, client):  # a flat entry (Copilot's) that is not localmem's
            out.append(group)
    return out


def _write(path: Path, data: dict[str, Any], backup_first: bool = True) -> Path | None:
    backup = None
    if path.exists() and backup_first:
        backup = path.with_name(f"{path.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.copy2(path, backup)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    private.write_file(tmp, json.dumps(data, indent=2) + "\n")  # 600, as every file localmem writes
    os.replace(tmp, path)
    return backup


def install(
    db: Path, client: str, path: Path | None = None, key_file: Path | None = None, backup: bool = True
) -> tuple[Path, Path | None]:
    """Merge localmem's entries into the client's file (``key_file``: the store's key file,
    its path put in each command); returns (file, backup or None). ``backup=False``: no
    copy beside the file (``hooks install --all`` keeps the old bytes in its own record)."""
    target = path or settings_path(client)
    if client == "opencode":  # localmem's own plugin file, written whole (module docstring)
        opencode.read(target)  # refuses a file there that is not localmem's
        opencode.write(
            target, {e: (argv(db, client, e, key_file=key_file), TIMEOUTS[e]) for e in CLIENT_EVENTS[client]}
        )
        return target, None
    data = _load(target, client)
    hooks = dict(data.get("hooks") or {})
    for event, name in CLIENT_EVENTS[client].items():
        hooks[name] = [*_without_ours(hooks.get(name), client), entry(db, client, event, key_file)]
    if client in FLAT:
        data = {"version": 1, **data}  # Copilot and Cursor read a hooks file only with it
    return target, _write(target, {**data, "hooks": hooks}, backup)


def uninstall(client: str, path: Path | None = None) -> tuple[Path, Path | None, int]:
    """Take localmem's entries out; returns (file, backup or None, entries removed)."""
    target = path or settings_path(client)
    if not target.exists():
        return target, None, 0
    if client == "opencode":
        return target, None, opencode.remove(target)
    data = _load(target, client)
    hooks = dict(data.get("hooks") or {})
    removed = 0
    for name in list(hooks):
        groups = hooks[name] if isinstance(hooks[name], list) else []
        kept = _without_ours(hooks[name], client)
        removed += sum(len(_handlers(g)) for g in groups) - sum(len(_handlers(g)) for g in kept)
        if kept:
            hooks[name] = kept
        else:
            del hooks[name]
    if not removed:
        return target, None, 0
    rest = {**data, "hooks": hooks} if hooks else {k: v for k, v in data.items() if k != "hooks"}
    if client == "copilot" and set(rest) <= {"version"}:  # localmem's own file, nothing else in it
        backup = target.with_name(f"{target.name}.bak-{time.strftime('%Y%m%d-%H%M%S')}")
        os.replace(target, backup)
        return target, backup, removed
    return target, _write(target, rest), removed


@dataclass(frozen=True)
class Installed:
    client: str
    path: str
    events: dict[str, str]  # localmem event -> the command installed for it
    problems: list[str]
    trust: dict[str, str]  # codex: localmem event -> codex_trust's word for its entry

    def to_dict(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "path": self.path,
            "events": self.events,
            "problems": self.problems,
            "trust": self.trust,
        }


def inspect(client: str, path: Path | None = None) -> Installed:
    """What of localmem's entries the client's file holds, and what would stop them running."""
    target = path or settings_path(client)
    problems: list[str] = []
    found: dict[str, str] = {}
    places: dict[str, tuple[int, int, dict[str, Any]]] = {}  # event -> (group, handler, entry): Codex's key
    try:
        if client == "opencode":  # its plugin's commands, as argument lists (module docstring)
            found = {e: shlex.join(a) for e, a in opencode.read(target).items() if e in CLIENT_EVENTS[client]}
        hooks = {} if client == "opencode" else _load(target, client).get("hooks") or {}
    except InputError as exc:
        return Installed(client, str(target), {}, [str(exc)], {})
    for event, name in CLIENT_EVENTS[client].items():
        groups = hooks.get(name)
        for gi, group in enumerate(groups if isinstance(groups, list) else []):
            for hi, h in enumerate(_handlers(group)):
                if ours(h, client):
                    found[event] = _cmd(h)
                    places[event] = (gi, hi, h)
    for event, cmd in found.items():
        python = shlex.split(cmd)[0]
        if not Path(python).exists():
            problems.append(f"{event}: the interpreter {python} does not exist (run `localmem hooks install` again)")
    problems += _key_problems(found.values())
    missing = [e for e in CLIENT_EVENTS[client] if e not in found]
    if found and missing:
        problems.append("not installed for: " + ", ".join(missing))
    trust: dict[str, str] = {}
    if client == "codex" and found:
        problems += _codex_features(target.parent / "config.toml")
        trust = codex_trust(target, places)
        untrusted = [f"{event} {word}" for event, word in trust.items() if word != TRUSTED]
        if untrusted:
            problems.append(
                "Codex runs a hook only once you trust it in its /hooks view (open codex, type /hooks, review "
                "and trust localmem's entries): " + ", ".join(untrusted)
            )
    return Installed(client, str(target), found, problems, trust)


def _flag(argv: list[str], name: str) -> str | None:
    for i, a in enumerate(argv[:-1]):
        if a == name:
            return argv[i + 1]
    return None


def _key_problems(commands: Any) -> list[str]:
    """What stops the entries' key file from opening their store: a key file that cannot
    be read (missing, others may read it), or a key that does not open an encrypted store."""
    problems: list[str] = []
    for db, key_file in sorted(
        {(_flag(shlex.split(c), "--db"), _flag(shlex.split(c), "--key-file")) for c in commands}
    ):
        if key_file is None or db is None:
            continue
        try:
            check_key(Path(db), Path(key_file))
        except ConfigError as exc:
            problems.append(f"{exc} (`localmem --key-file FILE hooks install` writes another)")
    return problems


def check_key(db: Path, key_file: Path) -> None:
    """ConfigError unless ``key_file`` can be read (mode 600) and, when the store at ``db``
    is encrypted, opens it (read-only: page 1 read with the key)."""
    key = keys.read_key_file(key_file)
    if keys.file_state(db) != "encrypted":
        return  # a new store is made encrypted with it; a plaintext one is opened as it is
    try:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as exc:
        raise ConfigError(f"{db}: cannot be opened to check its key ({exc})") from exc
    try:
        keys.apply_key(conn, key)
        keys.check_key(conn, str(db))
    finally:
        conn.close()


def codex_hash(name: str, hook: dict[str, Any]) -> str | None:
    """The ``trusted_hash`` Codex 0.171 records for the command hook ``hook`` of the event
    ``name`` (module docstring), or None for an entry whose shape it was not checked on."""
    label = CODEX_LABELS.get(name)
    known = {"type", "command", "timeout", "async"}
    if label is None or not set(hook) <= known or not isinstance(hook.get("command"), str):
        return None
    timeout = hook.get("timeout", 600)
    if not isinstance(timeout, int) or isinstance(timeout, bool):
        return None
    handler = {"type": "command", "command": hook["command"], "timeout": max(1, timeout)}
    handler["async"] = bool(hook.get("async", False))
    identity = {"event_name": label, "hooks": [handler]}  # a group without a matcher: none is hashed
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)  # serde_json's bytes
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def codex_trust(target: Path, places: dict[str, tuple[int, int, dict[str, Any]]]) -> dict[str, str]:
    """Per localmem event, whether Codex will run its entry in ``target`` (module docstring),
    from the ``[hooks.state]`` table of the ``config.toml`` beside it."""
    config = target.parent / "config.toml"
    try:
        table = tomllib.loads(config.read_text("utf-8")) if config.exists() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return dict.fromkeys(places, "unknown")
    hooks = table.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    states: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for key, value in (state if isinstance(state, dict) else {}).items():
        parts = key.strip().rsplit(":", 3)
        if len(parts) == 4 and parts[2].isdigit() and parts[3].isdigit() and isinstance(value, dict):
            # Codex keys the file by its real path ($CODEX_HOME resolved): compare real paths
            states[(os.path.realpath(parts[0]), parts[1], int(parts[2]), int(parts[3]))] = value
    here = os.path.realpath(target)
    out: dict[str, str] = {}
    for event, (gi, hi, hook) in places.items():
        name = CLIENT_EVENTS["codex"][event]
        got = states.get((here, CODEX_LABELS.get(name, ""), gi, hi), {})
        want = codex_hash(name, hook)
        if got.get("enabled") is False:
            out[event] = "turned off"
        elif not got.get("trusted_hash"):
            out[event] = "not trusted"
        elif want is None:
            out[event] = "unknown"
        elif got["trusted_hash"] == want:
            out[event] = TRUSTED
        else:
            out[event] = "changed since trusted"
    return out


def _codex_features(config: Path) -> list[str]:
    """Codex reads hooks only with its hooks feature on: say so when config.toml turns it off."""
    try:
        features = tomllib.loads(config.read_text("utf-8")).get("features", {}) if config.exists() else {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        return [f"cannot read {config}: {exc}"]
    key = "hooks" if "hooks" in features else "codex_hooks"  # codex_hooks: the older name Codex still reads
    if features.get(key) is False:
        return [f"hooks are turned off in {config} ([features] {key} = false): turn them on for these to run"]
    return []
