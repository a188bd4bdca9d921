"""What a CLI query or hook and a resident process say to each other, and where they meet.

One Unix socket per store: ``<runtime dir>/<hash of the store's real path>.sock``, where the
runtime dir is ``$XDG_RUNTIME_DIR/localmem`` (else ``run`` in the user data dir). One request,
one reply, each one line of JSON, then the connection closes.

A request names the store by its real path and its file identity (device, inode), the
reading settings by a fingerprint, and the code by its version and this protocol's; the
server answers only when all four are its own. Two ops: ``context`` (a ``Query``; the
reply is the context exactly as ``Context.to_dict()`` gives it in-process) and ``hook`` (a
``HookAsk``; the reply is what ``resident.recall.answer`` gives in-process: the text a hook
injects, or none below the bar). Or a refusal with a reason (the caller then reads
in-process).

Invariants:
- light: stdlib and ``localmem.config`` only (a query through a server must not load numpy);
- only the same user: the folder is the user's own with mode 700 and the socket mode 600
  (:func:`private_folder` checks both sides); the server also checks the peer's uid;
- nothing secret travels: no key, no key file's path; an encrypted store's key rules are
  the caller's to apply before it asks (``localmem.resident.client``).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import platformdirs

from localmem.config import APP, Settings

PROTOCOL = 1
# A scope naming a project, ``project:PATH``: retrieval.scope.PREFIX, spelled here so that the
# light side need not import the read path (tests/resident/test_server.py checks they agree).
PROJECT_PREFIX = "project:"
MAX_LINE = 1 << 20  # a request is a question and a few options; a context reply is at most ~1 MB of text
MAX_REPLY = 64 << 20  # a 32k-token context with its turn list fits many times over
SUN_PATH_MAX = 100  # AF_UNIX paths are limited to 104-108 bytes by the OS; stay under both


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
    bar: float = 0.0  # a prompt gets memory only when the best cosine reaches it


HOOK_EVENTS = ("session-start", "prompt")


def runtime_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        return Path(base) / APP
    return Path(platformdirs.user_data_dir(APP)) / "run"


def socket_path(db: Path, folder: Path | None = None) -> Path | None:
    """The socket of the resident process for the store at ``db`` (in ``folder``, default
    :func:`runtime_dir`); None when the path would be too long for a Unix socket (then
    there is no fast path for it)."""
    real = os.path.realpath(db)
    name = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:24] + ".sock"
    path = (folder or runtime_dir()) / name
    return path if len(os.fsencode(path)) <= SUN_PATH_MAX else None


def private_folder(folder: Path, *, create: bool) -> bool:
    """Whether ``folder`` is this user's own, with no access for group or others
    (made so when ``create`` and it is missing)."""
    try:
        if create:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = folder.stat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def store_identity(db: Path) -> dict[str, Any] | None:
    """The store file's real path and identity (device, inode); None when it is missing."""
    real = os.path.realpath(db)
    try:
        st = os.stat(real)
    except OSError:
        return None
    return {"path": real, "dev": st.st_dev, "ino": st.st_ino}


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


def encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """One message; ValueError when it is not a JSON object."""
    obj = json.loads(line.decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("a message is a JSON object")
    return obj


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
    if not isinstance(bar, int | float) or isinstance(bar, bool):
        raise ValueError("query.bar must be a number")
    return HookAsk(obj["event"], obj["agent"], obj["project"], obj["session"], obj["prompt"], budget, float(bar))
