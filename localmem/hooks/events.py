"""The clients' hook payloads and replies, read and written in one shape.

Each client runs a hook command with one JSON object on stdin. Fields read (all three
clients name them alike): ``session_id``, ``transcript_path``, ``cwd``,
``hook_event_name``; ``prompt`` (a prompt hook); ``source`` / ``trigger`` (why a session
started or compaction ran). Each event localmem acts on, by client:

=============  ================  ================  ============  ===================  ============  ==================================
localmem       claude-code       codex             gemini        copilot              cursor        opencode (its plugin's hooks)
=============  ================  ================  ============  ===================  ============  ==================================
session-start  SessionStart      SessionStart      SessionStart  sessionStart         sessionStart  experimental.chat.system.transform
prompt         UserPromptSubmit  UserPromptSubmit  BeforeAgent   userPromptSubmitted  (none)        chat.message
stop           Stop              Stop              AfterAgent    agentStop            stop          session.idle (an event)
pre-compact    PreCompact        PreCompact        PreCompress   preCompact           preCompact    experimental.session.compacting
session-end    SessionEnd        (none)            SessionEnd    sessionEnd           sessionEnd    (none)
=============  ================  ================  ============  ===================  ============  ==================================

The reply that injects context is the same JSON for the first three:
``{"hookSpecificOutput": {"hookEventName": <the client's event>, "additionalContext": …}}``
(Claude Code wraps it in a system reminder; Codex adds it as a developer message; Gemini
appends it in ``<hook_context>``). Only session-start and prompt reply; the others print
nothing.

GitHub Copilot CLI (1.0.102, its camelCase events) sends camelCase fields: ``sessionId``,
``transcriptPath`` (agentStop, preCompact), ``cwd``, ``prompt``, ``source`` / ``trigger``,
and reads a top-level ``{"additionalContext": …}``: a sessionStart's becomes a user message
before the first prompt, a userPromptSubmitted's is appended to the prompt in
``<system_reminder>`` (both checked against the real CLI; GitHub's hooks reference says a
command userPromptSubmitted hook's output is dropped, which 1.0.102 does not do). Its
sessionEnd carries no transcript path: :func:`parse` names the session's log,
``$COPILOT_HOME/session-state/<sessionId>/events.jsonl`` (``COPILOT_HOME`` defaulting to
``~/.copilot``), from the environment of the process that parses it.

VS Code's agent runs the hooks of ``~/.claude/settings.json`` (and of Claude Code plugins)
too, with a payload of its own shape: ``hookEventName`` and ``sessionId`` where the three
clients send ``hook_event_name`` and ``session_id``. :func:`parse` reads such a payload as
VS Code's (``host``) and takes no transcript from it: VS Code's chats are stored by
``localmem capture`` / ``watch`` from VS Code's own files, and its hook transcript read as
Claude Code's would store the same conversation a second time in another shape. Recall
(session start, prompt) answers it as it answers Claude Code.

Cursor (its hooks reference, https://cursor.com/docs/agent/hooks; payloads as recorded from
the real ``cursor-agent`` by entireio/cli, ``cmd/entire/cli/agent/cursor/AGENT.md``) sends
``conversation_id``, ``workspace_roots`` (the project: its first root), ``cursor_version``
and ``transcript_path``, which the CLI leaves ``null``: :func:`parse` then names the
session's transcript itself, ``~/.cursor/projects/<the root with every character but a
letter or digit made "-", the leading "/" dropped>/agent-transcripts/<conversation_id>.jsonl``
(the CLI's) or ``…/<conversation_id>/<conversation_id>.jsonl`` (the editor's), searching every
project folder when the root's is not there. Its reply is ``{"additional_context": …}`` and
only sessionStart takes one: beforeSubmitPrompt can block a prompt but adds nothing to it,
so Cursor gets no per-prompt recall from hooks (its MCP server, ``localmem mcp-config
--client cursor --install``, answers questions instead). Cursor also runs the hooks in Claude Code's
settings files when its "third-party skills" setting is on: a Cursor payload reaching an
entry for another client (``cursor_version``, or ``conversation_id`` with
``workspace_roots``) is read as Cursor's (``host``) and does nothing, so the same
conversation is never stored or answered twice; localmem's own Cursor entries do the work.

OpenCode runs no commands of its own: localmem's plugin (``hooks.opencode``, its JavaScript
in ``hooks/opencode_plugin.js``) runs these hook commands and sends a payload of localmem's
own: ``sessionID``, ``directory`` (the project), ``prompt`` (a prompt hook: the prompt's
text parts), ``database`` (the ingest hooks: OpenCode's ``opencode.db``, as the plugin finds
it; when absent or not named as OpenCode's database, the default of ``localmem capture``,
``$XDG_DATA_HOME/opencode/opencode.db``, from the environment of the process that parses
it). An ingest hook's ``transcript_path`` is that database: ``hooks.reading`` reads the
payload's session from it (``ingest.opencode_runner``). The reply is
``{"additionalContext": …}``, which the plugin puts into the session's main-turn system
prompt. OpenCode has no session end: its idle event after every turn already stores it.

A JSON string may hold a lone surrogate (``"\\ud800"``: a client that cut a prompt inside
an emoji's UTF-16 pair); no UTF-8 encoder takes one (the tokenizer, SQLite, the socket to a
resident process), so :func:`parse` replaces each with U+FFFD in every field it reads: the
one boundary every path (in-process, ``hooks.fast``, ``hooks.served``) goes through.

Standard library only: the hook process imports this before anything heavy.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CLIENTS = ("claude-code", "codex", "gemini", "copilot", "cursor", "opencode")
EVENTS = ("session-start", "prompt", "stop", "pre-compact", "session-end")
CLIENT_EVENTS: dict[str, dict[str, str]] = {
    "claude-code": {
        "session-start": "SessionStart",
        "prompt": "UserPromptSubmit",
        "stop": "Stop",
        "pre-compact": "PreCompact",
        "session-end": "SessionEnd",
    },
    "codex": {
        "session-start": "SessionStart",
        "prompt": "UserPromptSubmit",
        "stop": "Stop",
        "pre-compact": "PreCompact",
    },
    "gemini": {
        "session-start": "SessionStart",
        "prompt": "BeforeAgent",
        "stop": "AfterAgent",
        "pre-compact": "PreCompress",
        "session-end": "SessionEnd",
    },
    "copilot": {
        "session-start": "sessionStart",
        "prompt": "userPromptSubmitted",
        "stop": "agentStop",
        "pre-compact": "preCompact",
        "session-end": "sessionEnd",
    },
    "cursor": {
        "session-start": "sessionStart",
        "stop": "stop",
        "pre-compact": "preCompact",
        "session-end": "sessionEnd",
    },
    "opencode": {  # what its plugin runs each command on (module docstring)
        "session-start": "experimental.chat.system.transform",
        "prompt": "chat.message",
        "stop": "session.idle",
        "pre-compact": "experimental.session.compacting",
    },
}
# The ingest format of each client's transcript (localmem.ingest).
FORMATS = {"claude-code": "claude-code", "codex": "codex", "gemini": "gemini", "copilot": "copilot", "cursor": "cursor"}
FORMATS["opencode"] = "opencode"  # a database, not a file format: ``ingest.opencode_runner`` reads it
# A Copilot session id as the CLI makes them (a UUID): the only kind put into a path
_SESSION_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{0,127}")
# OpenCode's database: ``opencode.db`` or a channel's ``opencode-<channel>.db`` (``ingest.opencode``)
_OPENCODE_DB = re.compile(r"opencode(-[0-9A-Za-z_.-]+)?\.db")
INGEST = ("stop", "pre-compact", "session-end")
MAX_PAYLOAD = 1 << 20  # bytes of stdin read: a prompt and a few fields
# after json.loads a surrogate left in a str is a lone one (an escaped pair is joined into one character)
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class PayloadError(ValueError):
    """The hook's stdin is not a payload localmem can act on (counted as ``bad payload``)."""


@dataclass(frozen=True)
class HookEvent:
    client: str
    event: str  # one of EVENTS
    session_id: str = ""
    transcript_path: str = ""
    cwd: str = ""
    prompt: str = ""
    source: str = ""  # startup / resume / clear / compact (session start), auto / manual (compaction)
    host: str = ""  # "vscode" / "cursor": the payload is that host's (module docstring); "" the client's own


def parse(client: str, event: str, raw: bytes) -> HookEvent:
    """The event in ``raw`` (a client's stdin), or ``PayloadError``."""
    if client not in CLIENTS:
        raise PayloadError(f"unknown client {client!r}")
    if event not in EVENTS:
        raise PayloadError(f"unknown event {event!r}")
    if len(raw) > MAX_PAYLOAD:
        raise PayloadError(f"payload over {MAX_PAYLOAD} bytes")
    try:
        obj = json.loads(raw.decode("utf-8") or "{}")
    except (UnicodeDecodeError, ValueError) as exc:
        raise PayloadError(f"not JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise PayloadError("not a JSON object")

    def text(key: str) -> str:
        v = obj.get(key)
        return LONE_SURROGATE.sub("\ufffd", v) if isinstance(v, str) else ""

    if client == "copilot":
        return _copilot(event, text)
    if client == "cursor":
        return _cursor(event, obj, text)
    if client == "opencode":
        return _opencode(event, text)
    if "cursor_version" in obj or ("conversation_id" in obj and "workspace_roots" in obj):
        # Cursor running another client's entries (module docstring): its own entries do the work
        return HookEvent(client, event, session_id=text("conversation_id"), host="cursor")
    vscode = "hook_event_name" not in obj and "hookEventName" in obj  # VS Code's shape (module docstring)
    return HookEvent(
        client,
        event,
        session_id=text("session_id") or (text("sessionId") if vscode else ""),
        transcript_path="" if vscode else text("transcript_path"),
        cwd=text("cwd"),
        prompt=text("prompt"),
        source=text("source") or text("trigger"),
        host="vscode" if vscode else "",
    )


def _copilot(event: str, text: Callable[[str], str]) -> HookEvent:
    """Copilot CLI's camelCase payload (module docstring)."""
    sid, transcript = text("sessionId"), text("transcriptPath")
    if not transcript and event == "session-end" and _SESSION_ID.fullmatch(sid):
        named = os.environ.get("COPILOT_HOME")
        home = os.path.expanduser(named) if named else os.path.join(os.path.expanduser("~"), ".copilot")
        transcript = os.path.join(home, "session-state", sid, "events.jsonl")
    return HookEvent(
        "copilot",
        event,
        session_id=sid,
        transcript_path=transcript,
        cwd=text("cwd"),
        prompt=text("prompt"),
        source=text("source") or text("trigger"),
    )


def _cursor(event: str, obj: dict[str, Any], text: Callable[[str], str]) -> HookEvent:
    """Cursor's payload (module docstring)."""
    sid = text("conversation_id") or text("session_id")
    roots = obj.get("workspace_roots")
    root = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else ""
    root = LONE_SURROGATE.sub("\ufffd", root)
    transcript = text("transcript_path")
    if not transcript and event in ("stop", "pre-compact", "session-end") and _SESSION_ID.fullmatch(sid):
        transcript = cursor_transcript(sid, root)
    return HookEvent("cursor", event, session_id=sid, transcript_path=transcript, cwd=root or text("cwd"))


def _opencode(event: str, text: Callable[[str], str]) -> HookEvent:
    """The payload localmem's OpenCode plugin sends (module docstring)."""
    database = ""
    if event in INGEST:
        named = text("database")
        if named and os.path.isabs(named) and _OPENCODE_DB.fullmatch(os.path.basename(named)):
            database = named
        else:
            data = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
            database = os.path.join(os.path.expanduser(data), "opencode", "opencode.db")
    return HookEvent(
        "opencode",
        event,
        session_id=text("sessionID"),
        transcript_path=database,
        cwd=text("directory"),
        prompt=text("prompt"),
    )


def cursor_transcript(sid: str, root: str, home: str | None = None) -> str:
    """Where Cursor keeps the transcript of conversation ``sid`` (module docstring): the
    first of its two layouts that exists, under the project folder of ``root`` or else any
    project folder; when none exists, the CLI's path under ``root``'s folder (so the hook
    counts a missing transcript, not a quiet run)."""
    projects = os.path.join(home or os.path.expanduser("~"), ".cursor", "projects")
    tails = (os.path.join("agent-transcripts", sid + ".jsonl"), os.path.join("agent-transcripts", sid, sid + ".jsonl"))
    folder = re.sub(r"[^0-9A-Za-z]", "-", root.lstrip("/")) if root else ""
    if folder:
        for tail in tails:
            if os.path.isfile(os.path.join(projects, folder, tail)):
                return os.path.join(projects, folder, tail)
    try:
        names = sorted(os.listdir(projects))
    except OSError:
        names = []
    for name in names:
        for tail in tails:
            if os.path.isfile(os.path.join(projects, name, tail)):
                return os.path.join(projects, name, tail)
    return os.path.join(projects, folder or "-", tails[0])


def read_options(e: HookEvent) -> dict[str, Any]:
    """The ingest options the payload adds to its transcript's: Cursor's log does not say
    its project, the payload does (``localmem.ingest.cursor``)."""
    return {"project": e.cwd} if e.client == "cursor" and e.cwd else {}


def nothing_to_recall(e: HookEvent) -> str | None:
    """Why a recall hook has nothing to recall for (an empty prompt, a slash command, a
    Cursor payload at another client's entry), or None."""
    if e.host == "cursor":
        return "a Cursor payload at another client's entry: localmem's Cursor entries answer Cursor"
    if e.event == "prompt" and (not e.prompt.strip() or e.prompt.lstrip().startswith("/")):
        return "no prompt to recall for"
    return None


def reply(client: str, event: str, context: str) -> str:
    """The JSON line that gives ``context`` to the agent (module docstring)."""
    if client in ("copilot", "opencode"):  # their own shape: the context at the top (module docstring)
        return json.dumps({"additionalContext": context})
    if client == "cursor":
        return json.dumps({"additional_context": context})
    name = CLIENT_EVENTS[client][event]
    return json.dumps({"hookSpecificOutput": {"hookEventName": name, "additionalContext": context}})


def as_dict(e: HookEvent) -> dict[str, Any]:
    return {"client": e.client, "event": e.event, "session_id": e.session_id, "cwd": e.cwd}
