"""What a CLI query or hook and a resident process say to each other, and where they meet.

One Unix socket per store: ``<runtime dir>/<hash of the store's real path>.sock``, where the
runtime dir is ``$XDG_RUNTIME_DIR/localmem`` (else ``run`` in the user data dir), or
``/tmp/localmem-<uid>/`` when that path would not fit a socket address (the rule is
``unix``'s, which the stdlib-only fast entry shares). One request, one reply, each one line
of JSON (``hook-cli``: a line before the reply), then the connection closes.

A request names the store by its real path and its file identity (device, inode), and the
code by its version and this protocol's (``PROTOCOL``, 2 since the ``cli`` op); the server
answers only when they are its own. Three ops:
- ``context``: a ``Query`` and a fingerprint of the reading settings; the reply is the
  context exactly as ``Context.to_dict()`` gives it in-process;
- ``hook``: a ``HookAsk`` and the fingerprint; the reply is what ``resident.recall.answer``
  gives in-process: the text a hook injects, or none below the bar;
- ``cli``: a raw command line (a ``CliCall``: argv, folder, ``LOCALMEM_*`` variables, stdin)
  sent by ``resident.quick`` before it has loaded any settings; the server parses it with the
  real parser, loads the settings from the caller's sources, and answers only when they name
  its store and give its fingerprint; the reply is the stdout, stderr and exit code the
  in-process command would have produced (a ``Plan`` made by ``localmem.cli.served``).
- ``hook-cli``: a raw hook command line (a ``HookCall``: the argv of ``python -m
  localmem.hooks``, folder, ``LOCALMEM_*`` variables, the payload read from stdin and the
  seconds the hook has run) sent by ``localmem.hooks.quick`` before it has loaded any
  settings; the server parses it with the hook's real parser and settings
  (``localmem.hooks.served`` makes the ``HookPlan``) and answers as ``hook`` does, within
  what is left of the hook's deadline: a first line ``{"ok": true, "left": S}`` says how
  many seconds that is (the caller waits no longer), then the reply: what the hook prints
  and the outcome it counts in its status (a prompt with nothing to recall for: that
  reply alone, at once).
Or a refusal with a reason (the caller then does the work in-process).

Invariants:
- light: stdlib and ``localmem.config`` only (a query through a server must not load numpy);
- only the same user: the folder is the user's own with mode 700 and the socket mode 600
  (:func:`private_folder` checks both sides); both sides check the peer's uid;
- nothing secret travels: no key, no key file's path, no ``LOCALMEM_*`` variable that names
  or holds a secret; an encrypted store's key rules are the caller's to apply before it asks
  (``localmem.resident.client``), and ``resident.quick`` never asks about one.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from localmem.config import APP, Settings
from localmem.resident import unix
from localmem.resident.unix import (
    MAX_LINE,
    MAX_REPLY,
    PLATFORM_ENV,
    PROTOCOL,
    decode,
    encode,
    private_folder,
    store_identity,
)

__all__ = [
    "HOOK_EVENTS",
    "INGEST_EVENTS",
    "MAX_LINE",
    "MAX_REPLY",
    "PLATFORM_ENV",
    "PROJECT_PREFIX",
    "PROTOCOL",
    "CliCall",
    "HookAsk",
    "HookCall",
    "HookPlan",
    "Plan",
    "Query",
    "Refused",
    "Render",
    "decode",
    "encode",
    "fingerprint",
    "parse_cli",
    "parse_hook",
    "parse_hook_call",
    "parse_query",
    "private_folder",
    "request",
    "runtime_dir",
    "socket_path",
    "store_identity",
    "write_fingerprint",
]

# A scope naming a project, ``project:PATH``: retrieval.scope.PREFIX, spelled here so that the
# light side need not import the read path (tests/resident/test_server.py checks they agree).
PROJECT_PREFIX = "project:"


@dataclass(frozen=True)
class Query:
    """What ``localmem query`` and the hook entry ask: ``reconstruct``'s arguments."""

    text: str
    budget: int | None = None
    as_of: str | None = None
    scope: str | None = None  # a source or session key, or ``project:ABSOLUTE-PATH``
    exclude: str | None = None  # a session key left out (a hook's own session)
    client: str = "cli"  # who is handed the context, for the recall log (``cli``, ``hook:<agent>``)
    tool: str = "query"  # what asked (``query``, ``recall``, a hook's event)


@dataclass(frozen=True)
class HookAsk:
    """What a hook asks at a session's start or a prompt (op ``hook``): the recall
    ``resident.recall.answer`` computes, with the caller's own budget and bar (so a
    server started under other hook settings answers as the caller would in-process)."""

    event: str  # "session-start" or "prompt"
    agent: str  # claude-code / codex / gemini: the recall log's client is ``hook:<agent>``
    project: str  # the agent's working folder, absolute
    session: str = ""  # the agent's session id: left out of what is recalled (the agent has it)
    prompt: str = ""
    budget: int = 0  # tokens
    # a prompt gets memory only when the best cosine reaches it; None: the bar of the
    # embedder that reads the store (``Embedder.prompt_bar``, calibrated per model)
    bar: float | None = None


HOOK_EVENTS = ("session-start", "prompt")
# The events that ingest: a detached hook (hooks.detach) hands a short one to the resident
# process, which has the model loaded and the store open (``HookPlan.ingest``).
INGEST_EVENTS = ("stop", "pre-compact", "session-end")


def runtime_dir() -> Path:
    """The folder of the stores' sockets (``unix.runtime_dir``; platformdirs' own rule on
    an OS where that one is not spelled out)."""
    here = unix.runtime_dir()
    if here is not None:
        return Path(here)
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        return Path(base) / APP
    return Path(platformdirs.user_data_dir(APP)) / "run"


def socket_path(db: Path, folder: Path | None = None) -> Path | None:
    """The socket of the resident process for the store at ``db``: in ``folder`` (default
    :func:`runtime_dir`) when it fits a Unix socket address, else in ``/tmp/localmem-<uid>``
    (``unix.socket_in``); None when neither fits (then there is no fast path for it)."""
    path = unix.socket_in(folder or runtime_dir(), db)
    return None if path is None else Path(path)


def write_fingerprint(settings: Settings) -> str:
    """A hash of the settings that decide what an ingest stores (the embedder, the ingest
    section: tool lines, redaction): a server ingests for a caller only under its own."""
    shaping = {"embedder": settings.embedder, "ingest": asdict(settings.ingest)}
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()


def fingerprint(settings: Settings) -> str:
    """A hash of the settings that decide what a reconstruct returns (embedder, budgets,
    the read path's parameters); the model and write-side settings are left out, so a
    server started with ``--model`` still serves a CLI without one."""
    shaping = {
        "embedder": settings.embedder,
        "budget_tokens": settings.budget_tokens,
        "max_budget_tokens": settings.max_budget_tokens,
        "retrieval": asdict(settings.retrieval),
    }
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()


def request(settings: Settings, query: Query | HookAsk, identity: dict[str, Any], version: str) -> bytes:
    """A ``context`` request (a ``Query``) or a ``hook`` one (a ``HookAsk``)."""
    body = {
        "protocol": PROTOCOL,
        "version": version,
        "op": "hook" if isinstance(query, HookAsk) else "context",
        "store": identity,
        "settings": fingerprint(settings),
        "query": asdict(query),
    }
    return encode(body)


def parse_query(obj: Any) -> Query:
    """The query of a request; ValueError when a field has the wrong type."""
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        raise ValueError("query.text must be a string")
    budget = obj.get("budget")
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool)):
        raise ValueError("query.budget must be an integer")
    for key in ("as_of", "scope", "exclude", "client", "tool"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise ValueError(f"query.{key} must be a string")
    return Query(
        obj["text"],
        budget,
        obj.get("as_of"),
        obj.get("scope"),
        obj.get("exclude"),
        obj.get("client") or "cli",
        obj.get("tool") or "query",
    )


def parse_hook(obj: Any) -> HookAsk:
    """The ``HookAsk`` of a ``hook`` request; ValueError when a field is missing or of the
    wrong type."""
    if not isinstance(obj, dict):
        raise ValueError("query must be an object")
    if obj.get("event") not in HOOK_EVENTS:
        raise ValueError(f"query.event must be one of {', '.join(HOOK_EVENTS)}")
    for key in ("agent", "project", "session", "prompt"):
        if not isinstance(obj.get(key), str):
            raise ValueError(f"query.{key} must be a string")
    if not os.path.isabs(obj["project"]):
        raise ValueError("query.project must be an absolute path")
    budget, bar = obj.get("budget"), obj.get("bar")
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < 0:
        raise ValueError("query.budget must be a non-negative integer")
    if bar is not None and (not isinstance(bar, int | float) or isinstance(bar, bool)):
        raise ValueError("query.bar must be a number or null")
    given = None if bar is None else float(bar)
    return HookAsk(obj["event"], obj["agent"], obj["project"], obj["session"], obj["prompt"], budget, given)


class Refused(Exception):
    """A ``cli`` request the server leaves to the caller's own process: the message is why."""


@dataclass(frozen=True)
class CliCall:
    """A ``cli`` request: ``localmem ARGV`` as the caller would run it in-process, from its
    folder ``cwd``, with its ``LOCALMEM_*`` variables but the secret ones (``env``), the
    values of ``PLATFORM_ENV`` it has (``platform``; None: unset) and, for ``recall``, the
    payload it read from stdin."""

    argv: tuple[str, ...]
    cwd: str
    env: dict[str, str] = field(default_factory=dict)
    platform: dict[str, str | None] = field(default_factory=dict)
    stdin: str | None = None


Render = Callable[[dict[str, Any] | None], tuple[str, str, int]]  # a context -> (stdout, stderr, exit code)


@dataclass(frozen=True)
class Plan:
    """What a ``cli`` request amounts to, before the server reads: the store and reading
    settings the caller's own process would use (checked against the server's), the read
    to do (None: none, e.g. a recall of an empty prompt), and how its context is printed:
    ``render(context) -> (stdout, stderr, exit code)``, as the in-process command prints it."""

    store: dict[str, Any] | None
    fingerprint: str
    query: Query | None
    render: Render


def parse_cli(req: dict[str, Any]) -> CliCall:
    """The ``CliCall`` of a ``cli`` request; ValueError when a field has the wrong type."""
    argv, cwd, env, platform, stdin = (req.get(k) for k in ("argv", "cwd", "env", "platform", "stdin"))
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv must be a list of strings")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise ValueError("cwd must be an absolute path")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise ValueError("env must map names to strings")
    if not isinstance(platform, dict) or set(platform) != set(PLATFORM_ENV):
        raise ValueError(f"platform must give {', '.join(PLATFORM_ENV)}")
    if not all(v is None or isinstance(v, str) for v in platform.values()):
        raise ValueError("platform values must be strings or null")
    if stdin is not None and not isinstance(stdin, str):
        raise ValueError("stdin must be a string")
    return CliCall(tuple(argv), cwd, dict(env), dict(platform), stdin)


@dataclass(frozen=True)
class HookCall:
    """A ``hook-cli`` request: ``python -m localmem.hooks ARGV`` as the caller would run it
    in-process, from ``cwd``, with its ``LOCALMEM_*`` variables but the secret ones, the
    values of ``PLATFORM_ENV`` it has, the payload it read from stdin (UTF-8 text), and the
    seconds it has run (``elapsed``: its deadline counts from its own start)."""

    argv: tuple[str, ...]
    cwd: str
    env: dict[str, str] = field(default_factory=dict)
    platform: dict[str, str | None] = field(default_factory=dict)
    stdin: str = ""
    elapsed: float = 0.0


@dataclass(frozen=True)
class HookPlan:
    """What a ``hook-cli`` request amounts to, before the server reads: the store and
    reading settings the caller's own process would use (checked against the server's),
    the recall to do (None: none, e.g. an empty prompt), the seconds left for it, and
    ``render(recall or None) -> {"stdout": what the hook prints, "record": what it counts}``
    (``record``: ``db``, ``client``, ``event``, ``outcome``, ``detail`` for ``hooks.status``)."""

    store: dict[str, Any] | None
    fingerprint: str
    ask: HookAsk | None
    left: float
    render: Callable[[dict[str, Any] | None], dict[str, Any]]
    # an ingest event's work, done by the server under its lock with its own store:
    # ``ingest(store, should_stop) -> {"new", "already_present", "stopped"}`` (``stopped``:
    # cut short at a batch's end, the caller reads on from there); None for a recall
    ingest: Callable[[Any, Callable[[], bool]], dict[str, Any]] | None = None
    write_fingerprint: str = ""  # the caller's ``write_fingerprint``: an ingest only under the server's own


def parse_hook_call(req: dict[str, Any]) -> HookCall:
    """The ``HookCall`` of a ``hook-cli`` request; ValueError when a field has the wrong type."""
    call = parse_cli({**req, "stdin": req.get("stdin")})
    elapsed = req.get("elapsed")
    if not isinstance(call.stdin, str):
        raise ValueError("stdin must be a string")
    if not isinstance(elapsed, int | float) or isinstance(elapsed, bool) or not 0 <= elapsed < 1e6:
        raise ValueError("elapsed must be a number of seconds")
    return HookCall(call.argv, call.cwd, call.env, call.platform, call.stdin, float(elapsed))
