"""A hook's command line sent raw to a resident process (op ``hook-cli``, from
``localmem.hooks.quick``): the server's side. ``localmem serve`` and the MCP server hand a
:class:`HookPlanner` to their ``ResidentServer``.

:class:`HookPlanner` turns a ``wire.HookCall`` (the caller's argv, folder, ``LOCALMEM_*``
variables, payload and the seconds it has run) into a ``wire.HookPlan``: the store and the
reading settings the caller's own process would use, which the server checks against its
own, the recall to do (``hooks.fast.hook_ask``, what the caller would ask with its settings
loaded), the seconds left of the hook's deadline, and what the hook prints and counts.

Invariants:
- the plan is what the caller's process would do: the same parser (``hooks.entry.parser``
  as a :class:`Quiet` one, which refuses where the in-process one would print help or
  count a bad command line), the same settings (``resident.callers``: the caller's
  variables and the config file they name), the same question, reply and status detail
  (``hooks.fast.served``); anything else the in-process hook would do (a bad command
  line, bad settings, a bad payload, no time left, a transcript that is not there) is
  ``wire.Refused``, and the caller does the hook itself, counting it as it would;
- an event that ingests (sent by a detached hook, ``hooks.detach``) is planned as the
  transcript read into the server's store, as ``hooks.run`` reads it in-process;
- a prompt with nothing to recall for is answered without a read, as ``hooks.fast`` does.
"""

from __future__ import annotations

import argparse
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from localmem.config import Settings
from localmem.errors import LocalmemError
from localmem.hooks import events, quick, reading
from localmem.hooks.entry import parser
from localmem.hooks.events import HookEvent
from localmem.hooks.fast import MARGIN_S, deadline, hook_ask, served
from localmem.resident import wire
from localmem.resident.callers import CallerSettings


class Quiet(argparse.ArgumentParser):
    """The hook's parser, refusing where the in-process one would print or count a fault."""

    def error(self, message: str) -> NoReturn:
        raise wire.Refused(f"arguments: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise wire.Refused("the command exits early (help)")

    def _print_message(self, message: str, file: Any = None) -> None:
        raise wire.Refused("the command prints help or usage")


class HookPlanner:
    """``wire.HookCall`` -> ``wire.HookPlan`` (module docstring); safe to call from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parser = parser(Quiet)
        self._settings = CallerSettings()

    def __call__(self, call: wire.HookCall) -> wire.HookPlan:
        if quick.command_of(call.argv) is None:  # what the fast path sends, or nothing is parsed
            raise wire.Refused("not [--db DB] EVENT --client CLIENT")
        try:
            return self._plan(call)
        except LocalmemError as exc:  # a bad setting: the caller's process counts it
            raise wire.Refused(str(exc)) from exc

    def _plan(self, call: wire.HookCall) -> wire.HookPlan:
        with self._lock:  # argparse keeps no state between calls, but say so for a shared parser
            args = self._parser.parse_args(list(call.argv))
        settings = self._settings.load(call.env, call.platform, db=args.db)
        try:
            ev = events.parse(args.client, args.event, call.stdin.encode("utf-8"))
        except events.PayloadError as exc:
            raise wire.Refused(f"payload: {exc}") from exc
        db = os.path.join(call.cwd, settings.db)  # where the caller's process counts its outcome
        store = wire.store_identity(Path(db))
        fingerprint = wire.fingerprint(settings)
        if ev.event in wire.INGEST_EVENTS:
            return _ingest_plan(settings, ev, call, db, store, fingerprint)
        why = events.nothing_to_recall(ev)
        if why is not None:
            quiet = {"stdout": "", "record": _record(db, ev, "quiet", {"why": why})}
            return wire.HookPlan(store, fingerprint, None, 0.0, lambda _got: quiet)
        left = deadline(settings, ev.event) - call.elapsed - MARGIN_S
        if left <= 0:
            raise wire.Refused("no time left")
        return wire.HookPlan(store, fingerprint, hook_ask(settings, ev, call.cwd), left, _printer(db, ev))


def _ingest_plan(
    settings: Settings, ev: HookEvent, call: wire.HookCall, db: str, store: dict[str, Any] | None, fingerprint: str
) -> wire.HookPlan:
    """An ingest event's plan: the transcript the payload names, read by the server into its
    store (``hooks.reading``, from where the last read stopped); a payload naming none, or a
    path that is no file, is the caller's to count (``hooks.run``)."""
    if not ev.transcript_path:
        raise wire.Refused("no transcript named")
    path = Path(call.cwd, os.path.expanduser(ev.transcript_path))
    if not path.is_file():
        raise wire.Refused("the transcript is not a file")

    def ingest(target: Any, should_stop: Callable[[], bool]) -> dict[str, Any]:
        report = reading.ingest(target, ev, path, should_stop)
        return {"new": report.new, "already_present": report.already_present, "stopped": report.stopped}

    def render(got: dict[str, Any] | None) -> dict[str, Any]:
        assert got is not None
        detail = {"via": "resident", "background": True, "new": got["new"], "already_present": got["already_present"]}
        return {"stdout": "", "record": _record(db, ev, "quiet", detail)}

    return wire.HookPlan(
        store, fingerprint, None, 0.0, render, ingest=ingest, write_fingerprint=wire.write_fingerprint(settings)
    )


def _printer(db: str, ev: HookEvent) -> Callable[[dict[str, Any] | None], dict[str, Any]]:
    def render(got: dict[str, Any] | None) -> dict[str, Any]:
        assert got is not None
        line, outcome, detail = served(ev, got)
        return {"stdout": "" if line is None else line + "\n", "record": _record(db, ev, outcome, detail)}

    return render


def _record(db: str, ev: HookEvent, outcome: str, detail: dict[str, object]) -> dict[str, Any]:
    """What the caller counts in ``hooks.status`` (its time is the caller's own)."""
    return {"db": db, "client": ev.client, "event": ev.event, "outcome": outcome, "detail": detail}
