"""The hook command with its settings loaded: what ``python -m localmem.hooks`` runs when its
fast path (``hooks.quick``: the raw command line to the store's resident process) was not
answered, and the parser both paths share (the resident process parses a raw hook line
with :func:`parser` too: ``hooks.served``).

A session start or a prompt is asked of the store's resident process once more, with
settings loaded (``hooks.fast``: op ``hook``); only when none answers is the in-process
path (``hooks.run``: numpy, the model, the store) imported, after a daemon is started for
the next hook (``resident.daemon``, unless ``hooks.daemon_idle`` is 0).

Invariant (``localmem.hooks``): exits 0 whatever happens; a bad command line or bad
settings are counted in the store's hook status like any other failure, never shown to
the agent.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

from localmem.config import default_db_path, load_settings
from localmem.hooks import events, fast, status
from localmem.resident.wire import HOOK_EVENTS

USAGE = """``python -m localmem.hooks [--db DB] EVENT --client CLIENT``: the command the agents' hook
entries run (``localmem hooks install`` writes them), with the client's JSON on stdin.

Exits 0 whatever happens and prints the reply for the agent or nothing: a bad command line
or bad settings are counted in the store's hook status (``localmem doctor``), never shown
to the agent. A session start or a prompt is answered by the store's resident process
when one serves it (``localmem serve``, the MCP server, or the daemon a hook starts)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(message)  # counted, not printed: the client shows a hook's stderr


def parser(cls: type[argparse.ArgumentParser] = _Parser) -> argparse.ArgumentParser:
    """The hook command's parser (``cls``: the resident process's refuses instead of printing)."""
    p = cls(prog="python -m localmem.hooks", description=USAGE)
    p.add_argument("--db", type=Path, help="the store (default: $LOCALMEM_DB, the config file or the user data dir)")
    p.add_argument("event", help=f"one of {', '.join(events.EVENTS)}")
    p.add_argument("--client", required=True, help=f"one of {', '.join(events.CLIENTS)}")
    return p


def main(args_in: list[str], raw: bytes, t0: float) -> int:
    """The hook for ``args_in`` with the payload ``raw`` read from stdin, its time counted
    from ``t0`` (a ``time.perf_counter()`` reading at the process's start)."""
    try:
        args = parser().parse_args(args_in)
    except ValueError as exc:  # a command line the client should never send
        status.record(default_db_path(), "", "", "failed", ms=0.0, kind="bad payload", message=f"command line: {exc}")
        return 0
    try:
        settings = load_settings(db=args.db)
    except Exception as exc:  # bad settings must not reach the agent: counted instead
        from localmem.hooks import run  # lazy: the in-process path (numpy, the model, the store)

        kind, message = run.classify(exc)
        ms = (time.perf_counter() - t0) * 1000
        status.record(
            args.db or default_db_path(), args.client, args.event, "failed", ms=ms, kind=kind, message=message
        )
        return 0
    write = lambda line: print(line, flush=True)  # noqa: E731
    try:
        why_not = fast.answer(settings, args.client, args.event, raw, write, t0)
    except Exception as exc:  # the fast path's own trouble: the in-process path does the work and names any failure
        why_not = f"error: {type(exc).__name__}"
    if why_not is None:
        return 0
    if args.event in HOOK_EVENTS:
        # lazy: subprocess (~6 ms) is for a hook that found no resident process, not for a served one
        from localmem.resident import daemon

        with contextlib.suppress(Exception):  # never the agent's problem: the next hook tries again
            daemon.start(settings, settings.hooks.daemon_idle)  # for the next hook; this one answers in-process
    from localmem.hooks import run  # lazy: the in-process path (numpy, the model, the store)

    note: dict[str, object] | None = (
        {"resident": why_not} if why_not else None
    )  # why the resident process did not answer: hooks status
    out = run.run(settings, args.client, args.event, raw, write=write, started=t0, note=note)
    if out.kind == "timeout":  # leave at once: the worker thread may still be waiting on the store
        sys.stdout.flush()
        os._exit(0)
    return 0
