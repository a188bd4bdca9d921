"""Ask the resident process of a store, if one is there, with settings already loaded: what
``localmem query`` and ``localmem recall`` do when the fast entry (``resident.quick``, a raw
command line before any settings are loaded) was not answered, and the agents' hooks
(``python -m localmem.hooks``). The socket's place and checks are ``unix``'s.

:func:`ask` (a context) and :func:`ask_hook` (a hook's recall) return what the resident
process computed, or None whenever it cannot be had that way (no socket, a stale one, a
server of another store, version or settings, a busy or silent one, anything unexpected),
and the caller then reads in-process. It never raises for the fast path's sake: the worst a broken server costs a
caller is the time-outs below.

Invariants (docs/architecture.md, "The resident fast path"):
- asks only a socket that is this user's, in this user's private folder, answered by a
  process of this user (``SO_PEERCRED`` where the OS has it);
- the store's key rules hold as if the caller opened the store itself: an encrypted store
  is asked about only when the caller's own key sources open it (``keys.key_opens``), so
  a process without the key gets the in-process ``StoreLocked`` error, never an answer;
- sends no secret: the question, the store's path and identity, a settings hash.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from localmem import __version__
from localmem.config import Settings
from localmem.resident import unix, wire
from localmem.resident.unix import CONNECT_S, REPLY_S, peer_uid, read_line
from localmem.storage.engine import keys

__all__ = ["CONNECT_S", "REPLY_S", "answers", "ask", "ask_hook", "peer_uid", "read_line"]


def ask(settings: Settings, query: wire.Query) -> dict[str, Any] | None:
    """The context (``Context.to_dict()``) from the store's resident process, or None."""
    reply, _why = _call(settings, query, REPLY_S)
    context = reply.get("context") if reply else None
    return context if isinstance(context, dict) else None


def ask_hook(settings: Settings, hook: wire.HookAsk, reply_s: float) -> tuple[dict[str, Any] | None, str]:
    """A hook's recall (``resident.recall.answer``) from the store's resident process,
    waited for at most ``reply_s`` seconds (the hook's deadline), and '' ; or None and why
    not (``no socket``, ``no store``, ``no key``, ``no answer``, ``bad reply`` or the
    server's refusal: ``settings``, ``busy``, ...), which the hook's status keeps."""
    reply, why = _call(settings, hook, max(0.05, reply_s))
    got = reply.get("hook") if reply else None
    if reply is not None and not (isinstance(got, dict) and isinstance(got.get("text"), str)):
        return None, "bad reply"
    return (got, "") if isinstance(got, dict) else (None, why)


def _call(settings: Settings, query: wire.Query | wire.HookAsk, reply_s: float) -> tuple[dict[str, Any] | None, str]:
    """The server's reply when it answered ``ok``; else None and why (module docstring)."""
    path = unix.socket_to_ask(wire.runtime_dir(), settings.db)
    if path is None:
        return None, "no socket"
    identity = wire.store_identity(settings.db)
    if identity is None:  # no store yet: in-process says so (or creates it)
        return None, "no store"
    if keys.is_encrypted(identity["path"]) and not keys.key_opens(identity["path"]):
        return None, "no key"
    try:
        reply = unix.exchange(path, wire.request(settings, query, identity, __version__), reply_s)
    except (OSError, ValueError):  # refused (stale socket), timed out, cut off, not JSON
        return None, "no answer"
    if reply.get("ok") is True:
        return reply, ""
    return None, str(reply.get("why") or "refused")[:100]


def answers(path: os.PathLike[str]) -> bool:
    """Whether a process accepts connections on the socket at ``path``."""
    if not os.path.exists(path):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(CONNECT_S)
        try:
            probe.connect(os.fspath(path))
        except OSError:
            return False
    return True
