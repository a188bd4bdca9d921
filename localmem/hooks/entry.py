"""``python -m localmem.hooks [--db DB] EVENT --client CLIENT``: the command the agents' hook
entries run (``localmem hooks install`` writes them), with the client's JSON on stdin.

Exits 0 whatever happens and prints the reply for the agent or nothing
(``localmem.hooks``): a bad command line or bad settings are counted in the store's hook
status like any other failure, never shown to the agent. ``--help`` prints this.

A session start or a prompt is first asked of the store's resident process
(``hooks.fast``); only when none answers is the in-process path (``hooks.run``: numpy, the
model, the store) imported, after a daemon is started for the next hook
(``resident.daemon``, unless ``hooks.daemon_idle`` is 0).
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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(message)  # counted, not printed: the client shows a hook's stderr


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m localmem.hooks", description=__doc__)
    p.add_argument("--db", type=Path, help="the store (default: $LOCALMEM_DB, the config file or the user data dir)")
    p.add_argument("event", help=f"one of {', '.join(events.EVENTS)}")
    p.add_argument("--client", required=True, help=f"one of {', '.join(events.CLIENTS)}")
    return p


def main(argv: list[str] | None = None) -> int:
    t0 = time.perf_counter()
    args_in = sys.argv[1:] if argv is None else argv
    if "-h" in args_in or "--help" in args_in:
        parser().print_help()
        return 0
    raw = sys.stdin.buffer.read(events.MAX_PAYLOAD + 1)
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


if __name__ == "__main__":
    sys.exit(main())
