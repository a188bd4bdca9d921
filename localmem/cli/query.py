"""The commands that read memory without a model: ``query`` and the hook entry point ``recall``.

Both ask the store's resident process first (``localmem serve`` or the MCP server holds the
store open: ``localmem.resident``) and read in-process only when none answers; the context
is the same either way. This module stays light (no numpy, no store) so that a query a
resident process answers costs little more than the interpreter's start.

One that read in-process starts a daemon for the next one (``resident.daemon``:
``serve --transport socket --idle-exit query.daemon_idle``), only once its answer is printed
and flushed, and only for a store that was there before the command (``--no-daemon``,
``query.daemon_idle = 0``: none). ``--batch``, an error and an empty ``recall`` start none.

``query --batch`` reads in-process, prints one JSON line per input line, flushed as it
goes, and names the input line of any error. ``recall`` is the contract hooks are wired to
(docs/cli.md, "recall"): one JSON object on stdin, the context text on stdout, nothing when
nothing is found.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from localmem.cli import cable_flags
from localmem.config import Settings, default
from localmem.errors import InputError
from localmem.resident import ask
from localmem.resident.wire import PROJECT_PREFIX, Query, store_identity

BUDGET_HELP = (
    f"token budget of the context (default: the budget_tokens setting, {default('budget_tokens')}; "
    f"at most max_budget_tokens, {default('max_budget_tokens')})"
)
MAX_STDIN = 1 << 20  # a hook's payload: one prompt and a few fields


def add_query(sub: Any) -> None:
    c = sub.add_parser(
        "query",
        help="reconstruct the past context that answers a question",
        description="Reconstruct context (no LLM call). A running `localmem serve` of the same store answers "
        "it over a local socket (fast); otherwise it is read in this process, which then starts a small daemon "
        "(`serve --transport socket`) for the next query: it exits after query.daemon_idle idle seconds "
        "(--no-daemon, or 0: none).",
    )
    c.add_argument("text", nargs="?", help="the question")
    c.add_argument("--budget", type=int, help=BUDGET_HELP)
    c.add_argument("--as-of", help="ignore turns after this time (ISO 8601, '2023/05/30 (Tue) 23:40', ...)")
    c.add_argument("--scope", help="only sessions of this source (e.g. locomo:conv-26) or this session key")
    c.add_argument(
        "--project",
        metavar="PATH",
        help="a project's sessions (run in PATH's repository or folder) plus what the person said anywhere "
        "else (same as --scope project:PATH; docs/capture.md)",
    )
    c.add_argument(
        "--batch", type=Path, help='JSONL file of {"query", "as_of"?, "budget"?, "scope"?}; one result per line'
    )
    c.add_argument("--json", action="store_true", help="print JSON (text, tokens, turns with reasons)")
    add_no_daemon(c)
    cable_flags.add_read_flags(c)
    c.set_defaults(func=cmd_query)


def add_recall(sub: Any) -> None:
    c = sub.add_parser(
        "recall",
        help="hook entry point: a JSON question on stdin, the context on stdout",
        description='Read one JSON object from stdin ({"query": ..., "budget"?, "as_of"?, "scope"?}; "prompt" is '
        "taken for query, as agents' prompt hooks send it) and print the context that answers it, or nothing. "
        "Meant for agent hooks; uses a running `localmem serve` of the store when there is one, and otherwise "
        "starts one for the next call, as query does (--no-daemon: none).",
    )
    c.add_argument("--budget", type=int, help="token budget when the payload gives none; " + BUDGET_HELP)
    c.add_argument("--json", action="store_true", help='print {"context": ..., "via": "resident" | "in-process"}')
    add_no_daemon(c)
    c.set_defaults(func=cmd_recall)


def add_no_daemon(c: argparse.ArgumentParser) -> None:
    c.add_argument(
        "--no-daemon",
        action="store_true",
        help="read in-process without leaving a resident process for the next call (by default one is started "
        f"when none serves the store; it exits after query.daemon_idle idle seconds, {default('query.daemon_idle'):g})",
    )


def cmd_query(args: argparse.Namespace, settings: Settings) -> int:
    check_query(args)
    if args.batch:
        return _query_batch(settings, args)
    existed = store_identity(settings.db) is not None
    ctx, via = ask.context(settings, Query(args.text, args.budget, args.as_of, args.scope))
    write(*query_output(args, ctx))
    if via == "in-process" and existed:
        leave_daemon(args, settings)
    return 0


def check_query(args: argparse.Namespace) -> None:
    """``query``'s arguments checked (InputError), ``--project`` turned into its scope."""
    if bool(args.text) == bool(args.batch):
        raise InputError("give either a question or --batch FILE")
    if args.project:
        if args.scope:
            raise InputError("give --scope or --project, not both")
        args.scope = PROJECT_PREFIX + args.project


def query_output(args: argparse.Namespace, ctx: dict[str, Any]) -> tuple[str, str]:
    """What ``query`` prints of a context: (stdout, stderr). One function for this process
    and a resident process answering a raw command line (``localmem.cli.served``)."""
    if args.json:
        return json.dumps(ctx, ensure_ascii=False) + "\n", ""
    return (
        ctx["text"] or "(nothing relevant found)"
    ) + "\n", f"\n[{ctx['tokens']} tokens, {len(ctx['turns'])} turns]\n"


def cmd_recall(args: argparse.Namespace, settings: Settings) -> int:
    query = payload_query(_stdin(), args.budget)
    if query is None:
        return 0
    existed = store_identity(settings.db) is not None
    ctx, via = ask.context(settings, query)
    write(recall_output(args, ctx, via), "")
    if via == "in-process" and existed:
        leave_daemon(args, settings)
    return 0


def leave_daemon(args: argparse.Namespace, settings: Settings) -> None:
    """Start the store's daemon for the next call (module docstring), the answer already
    out: flushed first, then a fork and exec, never waited for and never an error."""
    if args.no_daemon or settings.query.daemon_idle <= 0:
        return
    with contextlib.suppress(Exception):  # the answer is given (a closed pipe, too); the next call tries again
        sys.stdout.flush()
        sys.stderr.flush()
        from localmem.resident import daemon  # lazy: subprocess (~6 ms), only once the answer is out

        daemon.start(settings, settings.query.daemon_idle)


def recall_output(args: argparse.Namespace, ctx: dict[str, Any], via: str) -> str:
    """What ``recall`` prints of a context read ``via`` the resident process or in-process."""
    if args.json:
        return json.dumps({"context": ctx, "via": via}, ensure_ascii=False) + "\n"
    return ctx["text"] + "\n" if ctx["text"] else ""


def write(stdout: str, stderr: str) -> None:
    """``stdout`` then ``stderr``, as ``print`` writes them (no flush: the streams' own buffering)."""
    sys.stdout.write(stdout)
    if stderr:
        sys.stderr.write(stderr)


def _stdin() -> str:
    raw = sys.stdin.buffer.read(MAX_STDIN + 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", path="stdin") from exc


def payload_query(raw: str, budget: int | None) -> Query | None:
    """The query of a hook's payload; None when its text is empty (nothing to recall)."""
    if len(raw) > MAX_STDIN:
        raise InputError(f"the payload is over {MAX_STDIN} characters", path="stdin")
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", path="stdin", where=f"line {exc.lineno}") from exc
    if not isinstance(obj, dict):
        raise InputError("the payload must be a JSON object", path="stdin")
    text = obj.get("query", obj.get("prompt"))
    if not isinstance(text, str):
        raise InputError('the payload needs a string field "query" (or "prompt")', path="stdin")
    given = obj.get("budget", budget)
    if given is not None and (not isinstance(given, int) or isinstance(given, bool)):
        raise InputError('"budget" must be an integer', path="stdin")
    for key in ("as_of", "scope", "exclude_session"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise InputError(f'"{key}" must be a string', path="stdin")
    if not text.strip():
        return None
    return Query(text, given, obj.get("as_of"), obj.get("scope"), obj.get("exclude_session"), tool="recall")


def _query_batch(settings: Settings, args: argparse.Namespace) -> int:
    path: Path = args.batch
    try:
        lines = path.read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", path=str(path)) from exc
    # lazy: a batch reads in this process (numpy, SQLite, the model)
    from localmem.memory import open_store
    from localmem.resident.local import context

    with open_store(settings) as store:
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg}", path=str(path), where=f"line {n}") from exc
            if not isinstance(item, dict) or not isinstance(item.get("query"), str):
                raise InputError("each line needs a string field 'query'", path=str(path), where=f"line {n}")
            query = Query(
                item["query"],
                item.get("budget", args.budget),
                item.get("as_of"),
                item.get("scope", args.scope),
                tool="query-batch",
            )
            try:
                ctx = context(store, query)
            except InputError as exc:
                raise InputError(str(exc), path=str(path), where=f"line {n}") from exc
            print_json(ctx)
            sys.stdout.flush()
    return 0


def print_json(obj: Any) -> None:
    print(json.dumps(obj, ensure_ascii=False))
