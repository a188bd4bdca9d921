"""The commands that read memory: query (context, no model), answer and explore (local model).

Each ``add_*`` function adds one subcommand to the parser; ``localmem.cli.build_parser`` calls
them in the order ``localmem --help`` lists the commands. ``query --batch`` prints one JSON
line per input line, flushed as it goes, and names the input line of any error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from localmem.answering.answer import answer
from localmem.answering.explore import MAX_CALLS, MAX_ROUNDS, MAX_TOKENS, explore
from localmem.cli import cable_flags
from localmem.cli.common import Subparsers, print_json
from localmem.config import Settings, default
from localmem.errors import InputError
from localmem.memory import generator, open_store
from localmem.models.llm import require_model_layer
from localmem.retrieval.reconstruct import reconstruct
from localmem.retrieval.scope import PREFIX as PROJECT_PREFIX
from localmem.storage.layers import recalls
from localmem.storage.write.store import Store

BUDGET_HELP = (
    f"token budget of the context (default: the budget_tokens setting, {default('budget_tokens')}; "
    f"at most max_budget_tokens, {default('max_budget_tokens')})"
)


def add_query(sub: Subparsers) -> None:
    c = sub.add_parser(
        "query",
        help="reconstruct the past context that answers a question",
        description="Reconstruct context (no LLM call).",
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
    cable_flags.add_read_flags(c)
    c.set_defaults(func=cmd_query)


def add_explore(sub: Subparsers) -> None:
    c = sub.add_parser(
        "explore",
        help="answer a question by letting the local model walk the memory (MRAgent)",
        description="Active reconstruction: the model calls the traversal toolkit for up to --rounds rounds "
        "(at most --calls calls each), then answers with the turns that support it. Prints the answer and a "
        "trace of every round.",
    )
    c.add_argument("question", help="the question")
    c.add_argument("--model", help="GGUF chat model (default: $LOCALMEM_MODEL, the config file, else SmolLM2)")
    c.add_argument("--rounds", type=int, default=8, help="most Navigate rounds (default 8)")
    c.add_argument("--calls", type=int, default=10, help="most tool calls per round (default 10)")
    c.add_argument("--max-tokens", type=int, default=40000, help="most model tokens in all (default 40000)")
    c.add_argument("--as-of", help="ignore turns after this time (ISO 8601)")
    c.add_argument("--scope", help="only sessions of this source or this session key (first search)")
    c.add_argument("--json", action="store_true", help="print the answer and the full trace as JSON")
    c.set_defaults(func=cmd_explore)


def add_answer(sub: Subparsers) -> None:
    c = sub.add_parser(
        "answer",
        help="answer a question from memory with the local model",
        description="Reconstruct the context, then the local model answers, preferring the most recent "
        "evidence; --explore uses the active loop (localmem explore) instead.",
    )
    c.add_argument("question", help="the question")
    c.add_argument("--model", help="GGUF chat model (default: $LOCALMEM_MODEL, the config file, else SmolLM2)")
    c.add_argument("--explore", action="store_true", help="explore the memory with the model instead")
    c.add_argument("--budget", type=int, help=BUDGET_HELP)
    c.add_argument("--as-of", help="the question time: ignore turns after it (ISO 8601)")
    c.add_argument("--scope", help="only sessions of this source or this session key")
    c.add_argument("--json", action="store_true", help="print JSON (answer and cited turns)")
    cable_flags.add_read_flags(c)
    c.set_defaults(func=cmd_answer)


def cmd_query(args: argparse.Namespace, settings: Settings) -> int:
    if bool(args.text) == bool(args.batch):
        raise InputError("give either a question or --batch FILE")
    if args.project:
        if args.scope:
            raise InputError("give --scope or --project, not both")
        args.scope = PROJECT_PREFIX + args.project
    with open_store(settings) as store:
        if args.text:
            ctx = reconstruct(store, args.text, args.budget, as_of=args.as_of, scope=args.scope)
            rec = recalls.from_context(ctx, "cli", "query", as_of=args.as_of, scope=args.scope, project=args.project)
            recalls.log(store.conn, rec, settings.recall_log)
            if args.json:
                print_json(ctx.to_dict())
            else:
                print(ctx.text or "(nothing relevant found)")
                print(f"\n[{ctx.tokens} tokens, {len(ctx.turns)} turns]", file=sys.stderr)
            return 0
        return _query_batch(store, args)


def _query_batch(store: Store, args: argparse.Namespace) -> int:
    path: Path = args.batch
    try:
        lines = path.read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", path=str(path)) from exc
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", path=str(path), where=f"line {n}") from exc
        if not isinstance(item, dict) or not isinstance(item.get("query"), str):
            raise InputError("each line needs a string field 'query'", path=str(path), where=f"line {n}")
        try:
            ctx = reconstruct(
                store,
                item["query"],
                item.get("budget", args.budget),
                as_of=item.get("as_of"),
                scope=item.get("scope", args.scope),
            )
        except InputError as exc:
            raise InputError(str(exc), path=str(path), where=f"line {n}") from exc
        print_json(ctx.to_dict())
        sys.stdout.flush()
    return 0


def _explore(args: argparse.Namespace, settings: Settings, rounds: int, calls: int, max_tokens: int) -> int:
    gen = generator(settings, args.model)
    require_model_layer(gen)  # before the store: without llama.cpp there is nothing to explore with
    with open_store(settings) as store:
        res = explore(
            store,
            gen,
            args.question,
            max_rounds=rounds,
            max_calls=calls,
            max_tokens=max_tokens,
            as_of=args.as_of,
            scope=args.scope,
        )
    if args.json:
        print_json(res.to_dict())
        return 0
    print(res.answer)
    print(f"\nsupport: {res.support or 'none'}; confidence {res.confidence:.2f}", file=sys.stderr)
    for r in res.rounds:
        print(f"round {r.index}: {r.thought or r.error or ''}", file=sys.stderr)
        for c in r.calls:
            print(
                f"  {c.tool}({json.dumps(c.args, ensure_ascii=False)}) {'ok' if c.ok else c.result[:120]}"
                f"{' new turns ' + str(c.new_turn_ids) if c.new_turn_ids else ''}",
                file=sys.stderr,
            )
    print(
        f"[{res.model_rounds} rounds, {res.calls} calls, {res.prompt_tokens}+{res.generated_tokens} tokens, "
        f"{len(res.evidence)} turns seen, stopped: {res.stop_reason}]",
        file=sys.stderr,
    )
    return 0


def cmd_explore(args: argparse.Namespace, settings: Settings) -> int:
    return _explore(args, settings, args.rounds, args.calls, args.max_tokens)


def cmd_answer(args: argparse.Namespace, settings: Settings) -> int:
    if args.explore:
        return _explore(args, settings, MAX_ROUNDS, MAX_CALLS, MAX_TOKENS)

    gen = generator(settings, args.model)
    require_model_layer(gen)  # before the store: without llama.cpp there is nothing to answer with
    with open_store(settings) as store:
        res = answer(store, gen, args.question, budget_tokens=args.budget, as_of=args.as_of, scope=args.scope)
    if args.json:
        print_json(res.to_dict())
    else:
        print(res.answer)
        if res.warning:
            print(f"\nwarning: {res.warning}", file=sys.stderr)
        print(
            f"\n[turns: {', '.join(str(t.turn_id) for t in res.context.turns) or 'none'}; "
            f"{res.context.tokens} context tokens; {res.model}]",
            file=sys.stderr,
        )
    return 0
