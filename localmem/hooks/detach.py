"""Whether a hook is done after the agent has moved on, and the fork that lets it go.

The agent waits for a hook's process to exit and its output pipes to close. An ingest hook
(stop, pre-compact, session end) has nothing to tell the agent, so :func:`detach` forks as
soon as the payload is read: the parent exits 0 at once (the agent waits for a Python start
and a fork), the child leaves the agent's session and pipes (``setsid``, stdin, stdout and
stderr on ``/dev/null``) and does the ingest (``hooks.entry``, ``hooks.background``).

Invariants:
- imports ``os`` only: a Stop's parent process loads nothing else of ours but
  ``hooks.__main__`` (tests/hooks/test_background.py checks it in a process);
- the parent never writes to stdout and exits 0; a fork that fails, or a system without
  one (Windows), leaves the hook to run in the foreground as before.
"""

from __future__ import annotations

import os

INGEST_EVENTS = ("stop", "pre-compact", "session-end")
FOREGROUND_ENV = "LOCALMEM_HOOK_FOREGROUND"  # "1": ingest while the agent waits (as before the fork)
VALUE_FLAGS = ("--db", "--client", "--key-file")  # the hook command's options (``hooks.entry.parser``)


def event_of(argv: list[str]) -> str | None:
    """The event of a hook command line ``[--db DB] [--key-file F] EVENT --client C`` (any
    order, ``--name=value`` too); None for anything else, which the parser reads."""
    found = []
    i = 0
    while i < len(argv):
        name, eq, _ = argv[i].partition("=")
        if name.startswith("-"):
            if name not in VALUE_FLAGS:
                return None
            i += 1 if eq else 2
            continue
        found.append(argv[i])
        i += 1
    return found[0] if len(found) == 1 else None


def wanted(event: str | None) -> bool:
    """Whether a hook for ``event`` is done in the background here."""
    return (
        event in INGEST_EVENTS
        and hasattr(os, "fork")
        and os.environ.get(FOREGROUND_ENV, "") not in ("1", "true", "yes")
    )


def detach() -> bool:
    """Fork; the parent exits 0 at once (never returns), the child returns True, out of the
    agent's session and pipes. False: no fork here, the caller works in the foreground."""
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid:
        os._exit(0)  # the agent's wait ends here: nothing buffered to flush, nothing printed
    try:
        os.setsid()  # not killed with the agent's process group, nor by its terminal closing
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)  # the agent reads its hook's pipes to their end: close them now
        os.close(null)
    except OSError:
        pass
    return True
