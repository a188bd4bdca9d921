"""Whether Codex will run the hooks of localmem's Codex plugin, in Codex's own words.

A plugin's hooks are trusted like a ``hooks.json``'s (``hooks.install``), under keys
``<plugin id>:hooks/hooks.json:<event label>:<group>:<handler>``; Codex 0.171 lists a plugin
hook's hash with a second part of its own (``sha256:<entry>/sha256:<…>``, undocumented)
and trusts the entry's part. Rather than reproduce what may change, :func:`plugin_trust`
asks Codex: it runs ``codex
app-server`` (the JSON-RPC server Codex's own UIs use), sends ``initialize`` and
``hooks/list``, and reads each of the plugin's entries' ``trustStatus`` and ``enabled``.

Invariants: nothing is written (``hooks/list`` only reads); the server is killed once it
answered or after ``TIMEOUT_S``; any failure (no ``codex`` on PATH, a server that answers
nothing or something else) is an ``unknown`` with the reason, never an exception.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import time
from typing import Any

TIMEOUT_S = 10.0
PLUGIN_ID = "localmem@localmem"
# Codex's event labels in a hook's key (``install.CODEX_LABELS``) -> localmem's events
EVENTS = {"session_start": "session-start", "user_prompt_submit": "prompt", "stop": "stop"}
EVENTS["pre_compact"] = "pre-compact"
WORDS = {"trusted": "trusted", "untrusted": "not trusted", "modified": "changed since trusted"}


def hooks_list(cwd: str, env: dict[str, str] | None = None, codex: str | None = None) -> list[dict[str, Any]]:
    """Codex's ``hooks/list`` for ``cwd``: every hook it knows, as it reports them.
    RuntimeError with the reason when it cannot be asked."""
    env = dict(os.environ) if env is None else env
    exe = codex or shutil.which("codex", path=env.get("PATH", ""))
    if not exe:
        raise RuntimeError("no `codex` on PATH to ask")
    messages = (
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"clientInfo": {"name": "localmem", "version": "1"}},
        },
        {"jsonrpc": "2.0", "method": "initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [cwd]}},
    )
    proc = subprocess.Popen(
        [exe, "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        proc.stdin.flush()
        reply = _reply(proc.stdout, 2, time.monotonic() + TIMEOUT_S)
    except OSError as exc:
        raise RuntimeError(f"codex app-server: {exc}") from exc
    finally:
        proc.kill()
        proc.wait()
    data = (reply.get("result") or {}).get("data")
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        raise RuntimeError(f"codex app-server answered hooks/list without hooks: {str(reply)[:200]}")
    hooks = data[0].get("hooks")
    return [h for h in hooks if isinstance(h, dict)] if isinstance(hooks, list) else []


def _reply(stream: Any, want: int, until: float) -> dict[str, Any]:
    """The JSON-RPC reply with id ``want`` read from ``stream`` before ``until``."""
    sel = selectors.DefaultSelector()
    sel.register(stream, selectors.EVENT_READ)
    buf = b""
    while True:
        left = until - time.monotonic()
        if left <= 0 or not sel.select(left):
            raise RuntimeError(f"codex app-server did not answer hooks/list within {TIMEOUT_S:g} s")
        chunk = os.read(stream.fileno(), 1 << 16)
        if not chunk:
            raise RuntimeError("codex app-server exited before it answered hooks/list")
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("id") == want:
                return msg


def plugin_trust(cwd: str, env: dict[str, str] | None = None, codex: str | None = None) -> tuple[dict[str, str], str]:
    """Per localmem event, whether Codex runs the plugin's entry (``trusted``, ``not
    trusted``, ``changed since trusted``, ``turned off``), and '' — or every event
    ``unknown`` and why."""
    try:
        hooks = hooks_list(cwd, env, codex)
    except RuntimeError as exc:
        return dict.fromkeys(EVENTS.values(), "unknown"), str(exc)
    out: dict[str, str] = {}
    for h in hooks:
        key = str(h.get("key", ""))
        if h.get("pluginId") != PLUGIN_ID and not key.startswith(PLUGIN_ID + ":"):
            continue
        parts = key.rsplit(":", 3)
        event = EVENTS.get(parts[1]) if len(parts) == 4 else None
        if event is None:
            continue
        word = "turned off" if h.get("enabled") is False else WORDS.get(str(h.get("trustStatus")), "unknown")
        out[event] = word
    if not out:
        return {}, "Codex lists no hooks of localmem's plugin (is it added and enabled?)"
    return out, ""
