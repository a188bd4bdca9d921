"""The fast path of ``python -m localmem.hooks``: a session start's or a prompt's command line
is sent raw to the store's resident process (op ``hook-cli``) before anything but the
standard library is imported; what it replies is printed and the outcome counted in the
hook status (``via: resident``), as ``hooks.fast`` does with settings loaded. The hook
command (``localmem.hooks.__main__``) imports the rest (``hooks.entry``) only when
:func:`answer` says False.

What is sent: argv, the folder, the ``LOCALMEM_*`` variables but the secret ones and the
values of ``unix.PLATFORM_ENV`` (``resident.quick.caller``), the store's identity, the
payload read from stdin, and the seconds the hook has run. The server parses the command
line with the hook's real parser, loads the settings from those sources, and answers only
when they name its store and give the settings it serves, within what is left of the
hook's deadline (``localmem.hooks.served``); the recall is ``resident.recall.answer``, the
one the in-process path runs.

Invariants (docs/architecture.md, "The resident fast path"):
- imports the standard library, ``resident.unix`` / ``resident.quick`` and ``hooks.status``
  only; tests/hooks/test_quick.py checks it in a process;
- asks only as ``resident.quick`` does (``quick.find``: this user's socket in this user's
  private folder, a process of this user, never an encrypted store);
- never raises for the fast path's sake and writes nothing unless answered: False, and
  the hook with its settings does everything as without this path (it counts why the
  resident process did not answer itself, asking it once more); answered, it prints the
  reply the in-process hook would and counts the outcome the server named, its time from
  the process's start.
"""

from __future__ import annotations

import _socket  # socket.py's C module, as resident.unix uses it: socket.py costs ~2.5 ms
import os
import sys
import time

from localmem import __version__
from localmem.hooks import status
from localmem.resident import quick, unix

TYPE_CHECKING = False  # typing costs ~3 ms of a hook; type checkers take the branch
if TYPE_CHECKING:
    from typing import Any

MAX_PAYLOAD = 1 << 20  # hooks.events.MAX_PAYLOAD: the payload read, as the hook reads it
EVENTS = ("session-start", "prompt")  # resident.wire.HOOK_EVENTS: the events a resident process answers
INGEST = ("stop", "pre-compact", "session-end")  # resident.wire.INGEST_EVENTS: read by it for a detached hook
# the hook command's options; any other (or an abbreviation): the full path. A --key-file line
# is read here too (an ingest event's background start needs its event); its store, when
# encrypted, is never asked of a resident process (quick.find), so the path with settings opens it
FLAGS = ("--db", "--key-file", "--client")
OUTCOMES = ("replied", "quiet")
PLAN_S = 0.5  # a live server plans a hook line at once (~1 ms; ~30 ms for a caller's first settings)
GRACE_S = 0.05  # past the time left that the server named: its own refusal is on the way


def answer(argv: list[str], raw: bytes, started: float, events: tuple[str, ...] = EVENTS) -> bool:
    """The hook ``argv`` with payload ``raw`` answered by the store's resident process:
    True, the reply printed and the outcome counted; or False, nothing done (module
    docstring). ``started``: the process's start (a ``time.perf_counter()`` reading).
    ``events``: those asked for (``INGEST``: a detached hook's, ``hooks.detach``)."""
    split = command_of(argv)
    if split is None or split[1] not in events:
        return False  # another kind of event, or a command line the parser names the fault of
    try:
        target = quick.find(split[0])
        got = None if target is None else _ask(*target, argv, raw, started, events)
    except (OSError, ValueError, AttributeError):  # a stale socket, a cut reply, not JSON, a payload not UTF-8
        return False
    if got is None:
        return False
    stdout, record = got
    if stdout:
        try:
            sys.stdout.write(stdout)
            sys.stdout.flush()
        except (OSError, ValueError):  # the agent stopped reading: the recall was done, its outcome is counted
            pass
    ms = (time.perf_counter() - started) * 1000
    status.record(record["db"], record["client"], record["event"], record["outcome"], ms=ms, detail=record["detail"])
    return True


def command_of(argv: list[str] | tuple[str, ...]) -> tuple[str | None, str] | None:
    """The ``--db`` value and the event of ``[--db DB] [--key-file FILE] EVENT --client
    CLIENT`` (each option also as ``--name=value``); None for anything else, which the
    hook's parser reads."""
    db = event = client = None
    i = 0
    while i < len(argv):
        if argv[i].startswith("-"):
            got = quick.option(argv, i, FLAGS)
            if got is None:
                return None
            name, value, i = got
            if name == "--db":
                db = value
            elif name == "--client":
                client = value
            continue
        if event is not None:
            return None  # a second positional: the parser's error
        event = argv[i]
        i += 1
    return None if event is None or client is None else (db, event)


def _ask(
    sock: str, identity: dict[str, Any], argv: list[str], raw: bytes, started: float, events: tuple[str, ...]
) -> tuple[str, dict[str, Any]] | None:
    """What to print and the outcome to count, when the server answered; else None."""
    payload = raw.decode("utf-8")  # not UTF-8 (ValueError): the full path counts the bad payload
    request = {
        "protocol": unix.PROTOCOL,
        "version": __version__,
        "op": "hook-cli",
        "store": identity,
        "argv": argv,
        "stdin": payload,
        **quick.caller(),
        "elapsed": time.perf_counter() - started,
    }
    reply = exchange(sock, unix.encode(request))
    stdout, record = reply.get("stdout"), reply.get("record")
    if reply.get("ok") is not True or not isinstance(stdout, str) or not isinstance(record, dict):
        return None
    db, detail = record.get("db"), record.get("detail")
    if not isinstance(db, str) or not isinstance(detail, dict) or record.get("outcome") not in OUTCOMES:
        return None
    if not isinstance(record.get("client"), str) or record.get("event") not in events:
        return None
    stdout.encode(sys.stdout.encoding, sys.stdout.errors or "strict")  # as print would: else the full path fails alike
    return stdout, record


def exchange(path: str, message: bytes) -> dict[str, Any]:
    """Send ``message`` on the socket at ``path`` (this user's process at the other end)
    and read the reply: at once, or first the seconds the server leaves for the recall
    (``{"ok": true, "left": S}``), then the reply within them. OSError or ValueError when it
    cannot be had in time (a silent server costs the hook ``PLAN_S``, or the time left)."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(unix.CONNECT_S)
        sock.connect(path)
        if unix.peer_uid(sock) not in (None, os.getuid()):
            raise ValueError("the socket's process belongs to another user")
        sock.settimeout(PLAN_S)
        sock.sendall(message)
        sock.shutdown(_socket.SHUT_WR)
        lines = _Lines(sock)
        reply = unix.decode(lines.next())
        left = reply.get("left")
        if reply.get("ok") is True and isinstance(left, int | float) and not isinstance(left, bool):
            sock.settimeout(max(0.0, float(left)) + GRACE_S)
            reply = unix.decode(lines.next())
        return reply
    finally:
        sock.close()


class _Lines:
    """The lines a socket sends, one at a time (``unix.read_line`` reads one and drops the rest)."""

    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def next(self) -> bytes:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ValueError("the reply was cut")
            self.buffer += chunk
            if len(self.buffer) > unix.MAX_REPLY:
                raise ValueError("reply too long")
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line
