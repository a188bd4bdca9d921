"""A ``localmem query`` or ``localmem recall`` sent raw to a resident process (op ``cli``,
from ``localmem.resident.quick``): the server's side. It lives with the CLI because it parses
with the CLI's own parser and prints with the commands' own functions (``cli.query``);
``localmem serve`` hands a :class:`Planner` to its ``ResidentServer``.

:class:`Planner` turns a ``wire.CliCall`` (the caller's argv, folder, ``LOCALMEM_*``
variables and stdin) into a ``wire.Plan``: the store and the reading settings the caller's
own process would use, which the server checks against its own, the read to do, and how
its context is printed.

Invariants:
- the plan is what the caller's process would do: the same parser (each parser of the tree a
  :class:`Quiet`, which raises ``wire.Refused`` where the in-process one would print help,
  usage or an error and exit), the same settings (``config.settings_from`` the caller's
  variables and the config file they name; the variables platformdirs reads must be the
  server's own), the same checks and the same printing; anything else the in-process
  command would do (``--help``, a parse error, a bad setting, ``--batch``, a key flag, an
  error) is ``wire.Refused``, and the caller runs the command itself;
- settings are loaded once per set of sources (``resident.callers``, the rule the hooks'
  planner shares), so a served query parses no TOML.
"""

from __future__ import annotations

import argparse
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from localmem.cli import build_parser, cable_flags, undecodable
from localmem.cli.query import check_query, cmd_query, cmd_recall, payload_query, query_output, recall_output
from localmem.config import Settings
from localmem.errors import LocalmemError
from localmem.resident import quick, wire
from localmem.resident.ask import absolute_project
from localmem.resident.callers import CallerSettings

if TYPE_CHECKING:
    from _typeshed import SupportsWrite


class Quiet(argparse.ArgumentParser):
    """The real parser, refusing where the in-process one would print and exit."""

    def error(self, message: str) -> NoReturn:
        raise wire.Refused(f"arguments: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise wire.Refused("the command exits early (help, version)")

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        raise wire.Refused("the command prints help or usage")


class Planner:
    """``wire.CliCall`` -> ``wire.Plan`` (module docstring); safe to call from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parser: argparse.ArgumentParser | None = None
        self._settings = CallerSettings()

    def __call__(self, call: wire.CliCall) -> wire.Plan:
        try:
            return self._plan(call)
        except LocalmemError as exc:  # a bad setting or argument: the caller's process says it
            raise wire.Refused(str(exc)) from exc

    def _plan(self, call: wire.CliCall) -> wire.Plan:
        if quick.command_of(call.argv) is None:  # what the fast entry sends, or nothing is parsed (no module loaded)
            raise wire.Refused("not query or recall after --db / --embedder")
        args = self._parse(call.argv)
        func = getattr(args, "func", None)
        if func not in (cmd_query, cmd_recall):
            raise wire.Refused("not query or recall")
        if undecodable(args) or args.key_file is not None or args.age_identity is not None:
            raise wire.Refused("a key flag or an undecodable argument")
        settings = cable_flags.apply(args, self._load(call, args))
        store = wire.store_identity(Path(os.path.join(call.cwd, settings.db)))
        fingerprint = wire.fingerprint(settings)
        if func is cmd_query:
            check_query(args)
            if args.batch:
                raise wire.Refused("--batch reads in-process")
            query = wire.Query(args.text, args.budget, args.as_of, args.scope)
            return wire.Plan(store, fingerprint, absolute_project(query, call.cwd), _query_printer(args))
        if call.stdin is None:
            raise wire.Refused("recall without its stdin")
        asked = payload_query(call.stdin, args.budget)
        query_or_none = None if asked is None else absolute_project(asked, call.cwd)
        return wire.Plan(store, fingerprint, query_or_none, _recall_printer(args))

    def _parse(self, argv: tuple[str, ...]) -> argparse.Namespace:
        with self._lock:  # the tree grows when a command is first reached
            if self._parser is None:
                self._parser = build_parser(Quiet)
            return self._parser.parse_args(list(argv))

    def _load(self, call: wire.CliCall, args: argparse.Namespace) -> Settings:
        """The caller's settings (``resident.callers``: cached while their sources are unchanged)."""
        return self._settings.load(call.env, call.platform, db=args.db, embedder=args.embedder)


def _query_printer(args: argparse.Namespace) -> wire.Render:
    def render(ctx: dict[str, Any] | None) -> tuple[str, str, int]:
        assert ctx is not None
        return (*query_output(args, ctx), 0)

    return render


def _recall_printer(args: argparse.Namespace) -> wire.Render:
    def render(ctx: dict[str, Any] | None) -> tuple[str, str, int]:
        return ("" if ctx is None else recall_output(args, ctx, "resident"), "", 0)

    return render
