"""Ask the resident process of a store, if one is there: the fast path of ``localmem query``,
``localmem recall`` and the agents' hooks (``python -m localmem.hooks``).

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
import stat
import struct
from typing import Any

from localmem import __version__
from localmem.config import Settings
from localmem.resident import wire
from localmem.storage.engine import keys

CONNECT_S = 0.5  # a live server accepts at once; a full backlog means busy: read in-process
REPLY_S = 30.0  # the longest a caller waits for a reply before it reads in-process instead


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
    path = wire.socket_path(settings.db)
    if path is None or not _own_socket(path) or not wire.private_folder(path.parent, create=False):
        return None, "no socket"
    identity = wire.store_identity(settings.db)
    if identity is None:  # no store yet: in-process says so (or creates it)
        return None, "no store"
    if keys.is_encrypted(identity["path"]) and not keys.key_opens(identity["path"]):
        return None, "no key"
    try:
        reply = _exchange(str(path), wire.request(settings, query, identity, __version__), reply_s)
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


def _own_socket(path: os.PathLike[str]) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid()


def _exchange(path: str, message: bytes, reply_s: float = REPLY_S) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(CONNECT_S)
        sock.connect(path)
        if peer_uid(sock) not in (None, os.getuid()):
            raise ValueError("the socket's process belongs to another user")
        sock.settimeout(reply_s)
        sock.sendall(message)
        sock.shutdown(socket.SHUT_WR)
        return wire.decode(read_line(sock, wire.MAX_REPLY))


def read_line(sock: socket.socket, limit: int) -> bytes:
    """Bytes up to the first newline (or the end); ValueError past ``limit``."""
    parts: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        newline = chunk.find(b"\n")
        if newline >= 0:
            parts.append(chunk[:newline])
            break
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            raise ValueError("message too long")
    return b"".join(parts)


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end (Linux: SO_PEERCRED); None where the OS
    does not say (the private folder is then the only check)."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)
