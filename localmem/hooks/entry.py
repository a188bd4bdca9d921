"""The hook command with its settings loaded: what ``python -m localmem.hooks`` runs when its
fast path (``hooks.quick``: the raw command line to the store's resident process) was not
answered, and the parser both paths share (the resident process parses a raw hook line
with :func:`parser` too: ``hooks.served``).

A session start or a prompt is asked of the store's resident process once more, with
settings loaded (``hooks.fast``: op ``hook``); only when none answers is the in-process
path (``hooks.run``: numpy, the model, the store) imported, after a daemon is started for
the next hook (``resident.daemon``, unless ``hooks.daemon_idle`` is 0).

An ingest hook's background child (``hooks.background``: the agent stopped waiting at the
fork) queues its payload and drains the store's queue unless another worker does.
Otherwise the process leaves at the hook's deadline, counted from its start, whatever
holds it up (a watchdog: slow imports, a daemon's start, a busy store), and counts a
``timeout``.

Invariant (``localmem.hooks``): exits 0 whatever happens; a bad command line or bad
settings are counted in the store's hook status like any other failure, never shown to
the agent.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from pathlib import Path

from localmem.config import Settings, default_db_path, load_settings
from localmem.errors import ConfigError
from localmem.hooks import background, events, fast, status
from localmem.resident import wire
from localmem.resident.wire import HOOK_EVENTS
from localmem.storage.engine import keys

WATCHDOG_GRACE_S = 0.3  # past the deadline, for ``hooks.run``'s own timeout to be counted first

USAGE = """``python -m localmem.hooks [--db DB] [--key-file FILE] EVENT --client CLIENT``: the
command the agents' hook entries run (``localmem hooks install`` writes them), with the
client's JSON on stdin.

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
    p.add_argument(
        "--key-file",
        type=Path,
        metavar="FILE",
        help="file holding the store's encryption key (mode 600), as `localmem --key-file` takes it; "
        "`localmem --key-file FILE hooks install` writes it here",
    )
    p.add_argument("event", help=f"one of {', '.join(events.EVENTS)}")
    p.add_argument("--client", required=True, help=f"one of {', '.join(events.CLIENTS)}")
    return p


def main(args_in: list[str], raw: bytes, t0: float, *, detached: bool = False) -> int:
    """The hook for ``args_in`` with the payload ``raw`` read from stdin, its time counted
    from ``t0`` (a ``time.perf_counter()`` reading at the process's start). ``detached``:
    an ingest hook's background child (``hooks.background``), which the agent no longer
    waits for: it queues the payload and drains the store's queue when no other worker does."""
    try:
        args = parser().parse_args(args_in)
    except ValueError as exc:  # a command line the client should never send
        status.record(default_db_path(), "", "", "failed", ms=0.0, kind="bad payload", message=f"command line: {exc}")
        return 0
    if args.key_file is not None and not _use_key_file(args):
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
    if detached:
        return _background(settings, args.client, args.event, raw)
    _watchdog(settings, args.client, args.event, t0)
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


def _watchdog(settings: Settings, client: str, event: str, t0: float) -> None:
    """Leave at the deadline, counted from the process's start, whatever holds this process
    up before ``hooks.run`` counts its own (a slow import, a daemon's start, a busy store):
    the agent must never wait longer than the hook's deadline."""
    limit = fast.deadline(settings, event) + WATCHDOG_GRACE_S

    def fire() -> None:
        ms = (time.perf_counter() - t0) * 1000
        message = f"{event} took longer than {limit:g} s from the hook's start; gave up"
        status.record(settings.db, client, event, "failed", ms=ms, kind="timeout", message=message)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os._exit(0)

    timer = threading.Timer(max(0.0, t0 + limit - time.perf_counter()), fire)
    timer.daemon = True
    timer.start()


def _background(settings: Settings, client: str, event: str, raw: bytes) -> int:
    """An ingest hook after the agent has moved on: its payload queued, the store's queue
    drained when no other worker is at it (``hooks.background.Queue``), each payload done by
    ``hooks.run`` within ``hooks.background_deadline`` and counted as its own run."""
    from localmem.hooks import run  # lazy: the in-process path (numpy, the model, the store)

    def work(c: str, e: str, payload: bytes, at: float) -> None:
        note: dict[str, object] = {"background": True, "queued_s": round(max(0.0, time.time() - at), 2)}
        limit = settings.hooks.background_deadline
        out = run.run(
            settings, c, e, payload, write=lambda _: None, started=time.perf_counter(), note=note, limit=limit
        )
        if out.kind == "timeout":  # the worker thread may still hold the store: leave, the lock goes with us
            os._exit(0)

    socket = wire.socket_path(Path(settings.db))
    queue = None
    if socket is not None and wire.private_folder(socket.parent, create=True):
        queue = background.Queue.for_store(str(socket))
    if queue is None:  # no private runtime folder: this hook ingests on its own
        work(client, event, raw, time.time())
        return 0
    try:
        queue.push(client, event, raw, time.time())
    except OSError:
        work(client, event, raw, time.time())
        return 0
    queue.drain(work)
    return 0


def _use_key_file(args: argparse.Namespace) -> bool:
    """Open the store with ``--key-file`` (as the CLI's flag does: ``$LOCALMEM_KEY_FILE``, for
    this process and those it starts); False, the failure counted as ``key missing``, when
    the file cannot be read (missing, or others may read it)."""
    try:
        keys.read_key_file(args.key_file)
    except ConfigError as exc:
        db = args.db or default_db_path()
        status.record(db, args.client, args.event, "failed", ms=0.0, kind="key missing", message=str(exc))
        return False
    os.environ[keys.KEY_FILE_ENV] = str(args.key_file.expanduser().absolute())
    return True
