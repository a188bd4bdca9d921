"""A resident process started for the hooks and the CLI: when a hook, ``localmem query`` or
``localmem recall`` finds no process answering on the store's socket, it starts
``localmem serve --transport socket --idle-exit N`` detached, so the next call is answered
over the socket; the daemon exits after N idle seconds (``hooks.daemon_idle``,
``query.daemon_idle``; 0: that caller starts none), or once its store file is gone or
replaced (``mcp_server.serve``).

Invariants:
- one daemon per store, however many hooks start at once (the race peers have with a
  lazily started server): a starter takes an exclusive ``flock`` on ``<socket>.lock``
  without waiting, and hands the locked file to the daemon (an inherited descriptor), which
  holds it until it exits; a hook that finds the lock held starts nothing. A daemon that
  finds another process already serving the socket (``localmem serve``, the MCP server)
  exits at once;
- never in the caller's way: starting is a fork and exec (no wait for the daemon), every
  failure is a False, never an exception; the hook that starts a daemon answers in-process,
  and a query or recall starts it only once its answer is printed (``cli.query``);
- keys: the daemon inherits the starter's environment (``$LOCALMEM_KEY_FILE``,
  ``$LOCALMEM_KEY``; a process's environment is readable only by its user), so it reads the
  store's key from the same source the hook did (or the OS keyring, as the hook would);
  nothing secret is put in its argv. An encrypted store whose key this process's sources
  do not open gets no daemon;
- its stderr goes to ``<socket>.log`` (mode 600), rewritten at each start.

:func:`describe` says who serves a store's socket (``localmem doctor``): a daemon, with its
pid and how to stop it, another process, or none. :func:`stop_for` stops a store's daemon
for a command that needs the store alone (``encrypt``, ``decrypt``, ``restore --force``):
one a query or hook left must not make those fail, while a ``localmem serve`` or MCP server
a person or a client started is never stopped by it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from localmem.config import Settings
from localmem.resident import client, unix, wire
from localmem.storage.engine import keys

WARM_LINE = (
    "warm in"  # the daemon's log line once it has warmed up (``ResidentServer.warm``; bench startup waits for it)
)

try:
    import fcntl
except ImportError:  # Windows: no flock and no Unix socket fast path
    fcntl = None  # type: ignore[assignment]


def start(settings: Settings, idle_s: float) -> bool:
    """Start the store's daemon when none serves or is starting (module docstring); True
    when this call started one."""
    path = wire.socket_path(settings.db)
    identity = wire.store_identity(settings.db)
    if fcntl is None or idle_s <= 0 or path is None or identity is None:
        return False  # no socket for this store, or no store yet (recall never creates one)
    if client.answers(path):
        return False  # served already (refused this caller: other settings, busy, another version)
    if keys.is_encrypted(identity["path"]) and not keys.key_opens(identity["path"]):
        return False
    if not wire.private_folder(path.parent, create=True):
        return False
    try:
        lock = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # a daemon holds it: starting, or serving
        os.close(lock)
        return False
    try:
        log = os.open(path.with_suffix(".log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            subprocess.Popen(
                command(identity["path"], idle_s),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                pass_fds=(lock,),  # the daemon holds the lock from here on, until it exits
                start_new_session=True,  # not killed with the agent's hook process group
            )
        finally:
            os.close(log)
    except OSError:
        return False
    finally:
        os.close(lock)  # this process's hold ends; the daemon's copy keeps the lock
    return True


def command(db: str, idle_s: float) -> list[str]:
    """The daemon's command line: the store's path and the idle time, nothing secret."""
    return [
        sys.executable,
        "-m",
        "localmem",
        "--db",
        db,
        "serve",
        "--transport",
        "socket",
        "--idle-exit",
        f"{idle_s:g}",
    ]


def describe(db: Path) -> str:
    """Who serves the socket of the store at ``db`` now, in one line (module docstring)."""
    path = wire.socket_path(db)
    if path is None or fcntl is None:
        return "no resident socket for this store (no Unix socket here, or its path would be too long)"
    if not client.answers(path):
        return (
            "no process serves this store; the next query, recall or hook that reads in-process starts a daemon "
            "(query.daemon_idle, hooks.daemon_idle; 0: none)"
        )
    pid = unix.peer_pid(str(path))
    if pid is None:
        return f"a process serves this store on {path}"
    argv = _argv(pid)
    idle = _idle_exit(argv)
    if idle is not None:
        return f"a daemon (pid {pid}) serves this store; it exits after {idle} s without a request, `kill {pid}` now"
    if argv:
        return (
            f"pid {pid} serves this store (`localmem serve` or an MCP server; it stops with its client or `kill {pid}`)"
        )
    return f"pid {pid} serves this store (a daemon, `localmem serve` or an MCP server); `kill {pid}` stops it"


def _argv(pid: int) -> list[str]:
    """A process's command line where the OS shows it (Linux: ``/proc``); else []."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0")]


def _idle_exit(argv: list[str]) -> str | None:
    """The idle time of a daemon's command line (``serve ... --idle-exit N``: one a query or
    a hook started); None for any other process (``localmem serve``, an MCP server)."""
    return argv[argv.index("--idle-exit") + 1] if "--idle-exit" in argv[:-1] else None


def stop_for(db: Path, timeout: float = 15.0) -> int | None:
    """Stop the idle-timed daemon (``serve ... --idle-exit``) that serves the store at
    ``db``, and wait until it has exited (its lock is free); its pid, or None when no such
    daemon serves it (none, or another server, or an OS that does not show a process's
    command line: the caller's own check then names the process). Never an exception."""
    path = wire.socket_path(db)
    if path is None or fcntl is None:
        return None
    deadline = time.monotonic() + timeout
    while not client.answers(path):  # one still starting (its lock held, not listening yet) is waited for
        if not _lock_held(path.with_suffix(".lock")) or time.monotonic() > deadline:
            return None
        time.sleep(0.05)
    pid = unix.peer_pid(str(path))
    if pid is None or pid == os.getpid() or _idle_exit(_argv(pid)) is None:
        return None
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return None
    if not lock_freed(path.with_suffix(".lock"), timeout):
        return None
    # one started by hand (``serve --idle-exit`` without the starter's lock) still closes its
    # store after the lock is free: the caller needs the store alone, so wait for the process
    while any(_argv(pid)) and time.monotonic() < deadline:  # a zombie shows an empty command line
        time.sleep(0.02)
    return None if any(_argv(pid)) else pid


def _lock_held(lock: Path) -> bool:
    """Whether a daemon holds its lock now (starting or serving); our own descriptor of the
    lock file holds no lock, so closing it releases nothing of the daemon's (``flock``)."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def lock_freed(lock: Path, timeout: float) -> bool:
    """Whether the daemon's lock (held for its whole life) is free within ``timeout``."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return True  # no lock file: nothing holds it
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True  # released when fd closes: the next daemon may take it
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.02)
    finally:
        os.close(fd)
