"""localmem's plugin file for OpenCode: written, read back and removed (``hooks.install``
calls these for client ``opencode``; it makes the commands the file holds).

OpenCode runs no hook commands; its hooks are plugins. Every config folder
(``$XDG_CONFIG_HOME/opencode``, default ``~/.config/opencode``; a project's ``.opencode``)
is searched for ``{plugin,plugins}/*.{ts,js}``, and each exported function of such a module
is a plugin, ``async ({client, project, directory, worktree, $}) => hooks`` (checked with
``opencode-ai`` 1.18.33: its bundled ``Plugin.state`` and the plugin guide in the binary;
the hook names and shapes in ``packages/plugin/src/index.ts`` of anomalyco/opencode). So
localmem writes a plugin of its own, ``<config>/plugin/localmem.js``: the JavaScript of
``opencode_plugin.js`` (no dependencies; Bun runs it) with one line naming the hook commands,
``const HOOKS = {"version": 1, "events": {<event>: {"argv": [...], "timeout": N}}} //
localmem-hooks``, which :func:`read` parses back.

What the plugin runs on, from the 1.18.33 binary (``LLMRequestPrep.prepare``,
``SessionPrompt``): ``experimental.chat.system.transform(input{sessionID, model},
output{system})`` before every model request, the main turn's and the title's (the title
request, ``ensureTitle``, is forked before the main one and built with ``system: []``, as
compaction's is); only a main turn's system holds the environment block (``<env>`` /
``Working directory:``, ``SystemPrompt.environment``), which is how the plugin tells them
apart. ``chat.message(input{sessionID, agent, model, messageID}, output{message, parts})``
is awaited before the prompt is saved; ``event`` is called for every bus event without
being awaited (``session.idle`` ends a turn); ``experimental.session.compacting(input
{sessionID}, output{context, prompt})`` before a compaction; ``dispose`` when OpenCode shuts
down. A hook that throws is a defect in OpenCode's own flow, so the plugin catches
everything (``hooks.events`` says what it sends and reads).

Invariants: the file is localmem's alone (nothing of the person's is merged into it);
written whole (a temp file, then a rename, mode 600); :func:`read` takes only the one line
localmem wrote, as JSON, never evaluates the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.util import private

FILE = "localmem.js"
MARK = "// localmem-hooks"
PLACEHOLDER = "__LOCALMEM_HOOKS__"
VERSION = 1


def config_dir(env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """OpenCode's global config folder: ``$XDG_CONFIG_HOME/opencode``, else ``~/.config/opencode``."""
    env = os.environ if env is None else env
    base = (
        Path(env["XDG_CONFIG_HOME"]).expanduser() if env.get("XDG_CONFIG_HOME") else (home or Path.home()) / ".config"
    )
    return base / "opencode"


def plugin_path(env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    return config_dir(env, home) / "plugin" / FILE


def source(commands: Mapping[str, tuple[list[str], int]]) -> str:
    """The plugin's text for ``commands`` (event -> (argv, timeout in seconds))."""
    hooks = {"version": VERSION, "events": {e: {"argv": argv, "timeout": t} for e, (argv, t) in commands.items()}}
    template = resources.files("localmem.hooks").joinpath("opencode_plugin.js").read_text("utf-8")
    line = f"const HOOKS = {PLACEHOLDER} {MARK}"
    assert template.count(line) == 1, "opencode_plugin.js lost its HOOKS line"
    # JSON is a JavaScript expression; ensure_ascii keeps U+2028 and the like out of the line
    return template.replace(line, f"const HOOKS = {json.dumps(hooks, ensure_ascii=True)} {MARK}")


def write(path: Path, commands: Mapping[str, tuple[list[str], int]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    private.write_file(tmp, source(commands))
    os.replace(tmp, path)


def read(path: Path) -> dict[str, list[str]]:
    """The commands in localmem's plugin at ``path`` (event -> argv); {} when there is no
    file; ``InputError`` naming the file and line when it is not one localmem wrote."""
    if not path.exists():
        return {}
    try:
        lines = path.read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read it ({exc})", path=str(path)) from exc
    for n, line in enumerate(lines, 1):
        if line.startswith("const HOOKS = ") and line.endswith(MARK):
            return _commands(path, n, line.removeprefix("const HOOKS = ").removesuffix(MARK))
    raise InputError(f"no line 'const HOOKS = … {MARK}': not localmem's plugin; move it first", path=str(path))


def _commands(path: Path, n: int, text: str) -> dict[str, list[str]]:
    where = f"line {n}"
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        raise InputError(f"HOOKS is not JSON ({exc})", path=str(path), where=where) from exc
    events = data.get("events") if isinstance(data, dict) else None
    if not isinstance(events, dict) or data.get("version") != VERSION:
        raise InputError(f"HOOKS is not {{'version': {VERSION}, 'events': {{…}}}}", path=str(path), where=where)
    out: dict[str, list[str]] = {}
    for event, hook in events.items():
        argv = hook.get("argv") if isinstance(hook, dict) else None
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise InputError(f"HOOKS event {event!r} has no argv list", path=str(path), where=where)
        out[str(event)] = argv
    return out


def remove(path: Path) -> int:
    """Remove localmem's plugin at ``path``; the number of commands it held (0: none there).
    A file that is not localmem's is refused (``read``), never removed."""
    found = read(path)
    if path.exists():
        path.unlink()
    return len(found)
