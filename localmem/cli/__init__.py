"""The ``localmem`` command. Parses arguments, calls the library, prints results.

Library errors (``LocalmemError``) become one line on stderr and the class's exit code;
nothing here touches SQL or models directly. Every subcommand has help text, and the
ones a script would read have ``--json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from localmem import __version__, cable_flags
from localmem.config import Settings, load_settings
from localmem.errors import InputError, LocalmemError
from localmem.progress import Progress
from localmem.store import Store

DEMO_QUESTION = "When is Maya's half marathon, and what has she changed in her training?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        settings = cable_flags.apply(args, load_settings(db=args.db, embedder=args.embedder))
        return int(args.func(args, settings) or 0)
    except LocalmemError as exc:
        print(f"localmem: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("localmem: interrupted", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="localmem",
        description="Local-first long-term memory for LLM assistants: one SQLite file, no cloud.",
    )
    p.add_argument("--version", action="version", version=f"localmem {__version__}")
    p.add_argument("--db", help="database file (default: $LOCALMEM_DB or the user data dir)")
    p.add_argument(
        "--embedder",
        help="embedding model: 'default' (MiniLM ONNX) or a .gguf file (default: $LOCALMEM_EMBEDDER or config)",
    )
    sub = p.add_subparsers(title="commands", metavar="COMMAND")

    from localmem.ingest import FORMATS

    c = sub.add_parser(
        "ingest",
        help="ingest a chat log, a chat export or a benchmark file",
        description="Ingest a chat log (format detected). Re-ingesting writes nothing new; a grown log writes "
        "only what is new; an interrupted ingest continues where it stopped.",
    )
    c.add_argument("file", type=Path, help="the file to ingest")
    c.add_argument("--format", choices=list(FORMATS), help="file format (default: detect)")
    c.add_argument("--question", help="LongMemEval: ingest only this question's haystack")
    c.add_argument("--sample", help="LoCoMo: ingest only this sample_id")
    c.add_argument(
        "--skip-bad", action="store_true", help="step over bad conversations/lines and report them, instead of refusing"
    )
    c.add_argument("--json", action="store_true", help="print a JSON summary (and no progress bar)")
    c.set_defaults(func=cmd_ingest)

    c = sub.add_parser(
        "watch",
        help="ingest new and changed chat logs in a folder as they appear",
        description="Watch a folder: ingest files once they stop changing, catch up on start with files changed "
        "meanwhile. Renames are not ingested again; deleting a file keeps its memories. Stop with Ctrl-C.",
    )
    c.add_argument("dir", type=Path, help="the folder to watch")
    c.add_argument("--recursive", action="store_true", help="watch sub-folders too")
    c.add_argument(
        "--settle", type=float, default=2.0, help="seconds a file must stay unchanged before it is read (default 2)"
    )
    c.add_argument("--json", action="store_true", help="print one JSON object per event on stdout")
    c.set_defaults(func=cmd_watch)

    c = sub.add_parser(
        "query",
        help="reconstruct the past context that answers a question",
        description="Reconstruct context (no LLM call).",
    )
    c.add_argument("text", nargs="?", help="the question")
    c.add_argument("--budget", type=int, help="token budget of the context (default 2000)")
    c.add_argument("--as-of", help="ignore turns after this time (ISO 8601, '2023/05/30 (Tue) 23:40', ...)")
    c.add_argument("--scope", help="only sessions of this source (e.g. locomo:conv-26) or this session key")
    c.add_argument(
        "--batch", type=Path, help='JSONL file of {"query", "as_of"?, "budget"?, "scope"?}; one result per line'
    )
    c.add_argument("--json", action="store_true", help="print JSON (text, tokens, turns with reasons)")
    cable_flags.add_read_flags(c)
    c.set_defaults(func=cmd_query)

    for name, helptext, desc in (
        (
            "worker",
            "run the enrichment worker in the foreground",
            "Claim queued turns and enrich them with the local model (cues, tags, facts, memory type) until "
            "stopped with Ctrl-C. A killed worker loses nothing: its claimed turns are picked up again.",
        ),
        (
            "enrich",
            "enrich every queued turn now, then exit",
            "Process every pending enrichment job with the local model, with a progress line (turns/s, ETA); "
            "turns stored before the queue existed are queued first.",
        ),
    ):
        c = sub.add_parser(name, help=helptext, description=desc)
        c.add_argument("--model", help="GGUF chat model (default: $LOCALMEM_MODEL, the config file, else SmolLM2)")
        c.add_argument("--batch", type=int, help="turns of one session per model call (default 6)")
        if name == "worker":
            c.add_argument("--once", action="store_true", help="process one batch of jobs, then exit")
        else:
            c.add_argument("--retry-parked", action="store_true", help="give parked jobs new attempts first")
        c.add_argument("--json", action="store_true", help="print a JSON summary (and no progress bar)")
        cable_flags.add_build_flags(c)
        c.set_defaults(func=cmd_worker, mode=name)

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

    c = sub.add_parser(
        "answer",
        help="answer a question from memory with the local model",
        description="Reconstruct the context, then the local model answers, preferring the most recent "
        "evidence; --explore uses the active loop (localmem explore) instead.",
    )
    c.add_argument("question", help="the question")
    c.add_argument("--model", help="GGUF chat model (default: $LOCALMEM_MODEL, the config file, else SmolLM2)")
    c.add_argument("--explore", action="store_true", help="explore the memory with the model instead")
    c.add_argument("--budget", type=int, help="token budget of the reconstructed context (default 2000)")
    c.add_argument("--as-of", help="the question time: ignore turns after it (ISO 8601)")
    c.add_argument("--scope", help="only sessions of this source or this session key")
    c.add_argument("--json", action="store_true", help="print JSON (answer and cited turns)")
    cable_flags.add_read_flags(c)
    c.set_defaults(func=cmd_answer)

    c = sub.add_parser("stats", help="what the store holds, layer by layer")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=cmd_stats)

    c = sub.add_parser("doctor", help="check the installation, the database and the models")
    c.add_argument("--model", help="GGUF chat model to check (default: $LOCALMEM_MODEL, the config file, else SmolLM2)")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=cmd_doctor)

    c = sub.add_parser("forget", help="delete turns (with their cues, edges and vectors)")
    c.add_argument("--turn", type=int, action="append", default=[], help="a turn id (repeatable)")
    c.add_argument("--session", help="every turn of this session key")
    c.add_argument("--before", help="every turn before this time")
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(func=cmd_forget)

    c = sub.add_parser("reindex", help="re-embed everything with the configured embedder")
    c.set_defaults(func=cmd_reindex)

    c = sub.add_parser("demo", help="ingest the bundled sample conversation and answer a question from it")
    c.add_argument("--question", default=DEMO_QUESTION, help="the question to reconstruct context for")
    c.add_argument("--budget", type=int, default=300, help="token budget (default 300)")
    c.set_defaults(func=cmd_demo)

    c = sub.add_parser(
        "serve",
        help="run the MCP server (stdio for desktop clients, or HTTP on 127.0.0.1)",
        description="Run localmem's MCP server. stdio (default) is what desktop clients start; --transport http "
        "serves streamable HTTP on 127.0.0.1 (another --host needs --token). Logs go to stderr.",
    )
    from mcp_server.serve import add_arguments

    add_arguments(c)
    cable_flags.add_read_flags(c)
    c.set_defaults(func=cmd_serve)

    c = sub.add_parser(
        "mcp-config",
        help="print or install the MCP server entry for Claude Desktop, VS Code or Cursor",
        description="Print the client configuration that starts this server (absolute interpreter and database "
        "paths); --install merges it into the client's config file after a backup.",
    )
    c.add_argument(
        "--client",
        choices=["claude-desktop", "vscode", "cursor"],
        default="claude-desktop",
        help="the client (default claude-desktop)",
    )
    c.add_argument("--install", action="store_true", help="merge into the client's config file (backup first)")
    c.add_argument("--path", type=Path, help="the config file to install into (default: the client's own)")
    c.set_defaults(func=cmd_mcp_config)

    from localmem.bench.cli import add_bench_parser

    add_bench_parser(sub)
    return p


def _open(settings: Settings, **kw: Any) -> Store:
    from localmem.models import default_embedder

    return Store(settings.db, embedder=default_embedder(settings.embedder), settings=settings)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, ensure_ascii=False))


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    from localmem.ingest import detect, runner

    if not args.file.is_file():
        raise InputError("no such file", path=str(args.file))
    fmt = args.format or detect(args.file)  # before the model loads: a wrong file fails fast
    opts = {"question": args.question, "sample": args.sample}
    with _open(settings) as store:
        plan = runner.plan(store, args.file, fmt, skip_bad=getattr(args, "skip_bad", False), **opts)
        with Progress("ingest", plan.turns, unit="turns", quiet=args.json) as bar:
            report = runner.run(store, plan, progress=bar.advance)
    if args.json:
        _print_json(report.to_dict())
    else:
        print(report.line())
        for err in report.errors:
            print(f"  skipped bad unit: {err['error']}", file=sys.stderr)
    return 0


def cmd_watch(args: argparse.Namespace, settings: Settings) -> int:
    from localmem.ingest.watch import Watcher, stop_on_signals

    def show(event: dict[str, Any]) -> None:
        if args.json:
            _print_json(event)
            sys.stdout.flush()
        else:
            print(f"localmem watch: {event['message']}", file=sys.stderr)

    with _open(settings) as store:
        watcher = Watcher(store, args.dir, recursive=args.recursive, settle=args.settle, on_event=show)
        watcher.run(stop_on_signals(), worker=_watch_worker(settings))
    return 0


def _watch_worker(settings: Settings) -> Any:
    """The enrichment loop to run beside the watcher, when a model is configured."""
    if not settings.model:
        return None
    import threading

    from localmem.jobs import run_worker
    from localmem.llm import generator_for

    gen = generator_for(settings)

    def loop(stop: threading.Event) -> None:
        try:
            with _open(settings) as store:  # its own connection: one per thread
                run_worker(store, gen, stop=stop)
        except LocalmemError as exc:  # the watcher goes on; the queue waits for a worker
            print(f"localmem watch: enrichment stopped: {exc}", file=sys.stderr)

    return loop


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from localmem.enrich import layer_stats
    from localmem.jobs import counts, enqueue_missing, retry_parked, run_worker
    from localmem.llm import generator_for

    settings = settings.with_overrides(model=args.model, extract_batch=args.batch)
    gen = generator_for(settings)
    with _open(settings) as store:
        enqueue_missing(store.conn)
        if getattr(args, "retry_parked", False):
            retry_parked(store.conn)
        todo = counts(store.conn)
        total = None
        if args.mode == "enrich":
            # each enriched turn gets an antecedent job too, when CABLE is on
            links = counts(store.conn, "antecedent") if settings.cable.enabled else {"pending": 0, "running": 0}
            total = (todo["pending"] + todo["running"]) * (2 if settings.cable.enabled else 1)
            total += links["pending"] + links["running"]
        if not args.json:
            print(f"localmem {args.mode}: {gen.model_id}, {todo['pending']} turns queued", file=sys.stderr)
        with Progress(args.mode, total, unit="turns", quiet=args.json) as bar:
            if args.mode == "enrich":
                stats = run_worker(store, gen, until_empty=True, progress=bar.advance)
            else:
                from localmem.ingest.watch import stop_on_signals

                stats = run_worker(store, gen, stop=stop_on_signals(), once=args.once, progress=bar.advance)
        layers = layer_stats(store)
        summary = {
            **stats.to_dict(),
            "jobs": counts(store.conn),
            "coverage": layers["enriched_pct"],
            "antecedent": layers["antecedent"],
        }
    if args.json:
        _print_json(summary)
    else:
        print(
            f"enriched {summary['turns']} turns in {summary['seconds']}s ({summary['turns_per_s']} turns/s), "
            f"{summary['cues_kept']} cues kept, {summary['cues_rejected']} rejected, {summary['failed']} failures; "
            f"queue: {summary['jobs']}; {summary['coverage']}% of turns enriched"
        )
        a = summary["antecedent"]
        print(
            f"antecedent links: {summary['antecedent_turns']} turns linked this run, "
            f"{summary['antecedent_edges']} edges from {summary['antecedent_candidates']} candidates, "
            f"{summary['antecedent_calls']} model calls; store: {a['edges']} edges, {a['jobs_waiting']} turns waiting"
        )
    return 0


def cmd_query(args: argparse.Namespace, settings: Settings) -> int:
    if bool(args.text) == bool(args.batch):
        raise InputError("give either a question or --batch FILE")
    with _open(settings) as store:
        if args.text:
            ctx = store.reconstruct(args.text, args.budget, as_of=args.as_of, scope=args.scope)
            if args.json:
                _print_json(ctx.to_dict())
            else:
                print(ctx.text or "(nothing relevant found)")
                print(f"\n[{ctx.tokens} tokens, {len(ctx.turns)} turns]", file=sys.stderr)
            return 0
        return _query_batch(store, args)


def _query_batch(store: Store, args: argparse.Namespace) -> int:
    path: Path = args.batch
    try:
        lines = path.read_text("utf-8").splitlines()
    except OSError as exc:
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
            ctx = store.reconstruct(
                item["query"],
                item.get("budget", args.budget),
                as_of=item.get("as_of"),
                scope=item.get("scope", args.scope),
            )
        except InputError as exc:
            raise InputError(str(exc), path=str(path), where=f"line {n}") from exc
        _print_json(ctx.to_dict())
        sys.stdout.flush()
    return 0


def _explore(args: argparse.Namespace, settings: Settings, rounds: int, calls: int, max_tokens: int) -> int:
    from localmem.explore import explore
    from localmem.llm import generator_for

    gen = generator_for(settings, args.model)
    with _open(settings) as store:
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
        _print_json(res.to_dict())
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
        from localmem.explore import MAX_CALLS, MAX_ROUNDS, MAX_TOKENS

        return _explore(args, settings, MAX_ROUNDS, MAX_CALLS, MAX_TOKENS)
    from localmem.answer import answer
    from localmem.llm import generator_for

    gen = generator_for(settings, args.model)
    with _open(settings) as store:
        res = answer(store, gen, args.question, budget_tokens=args.budget, as_of=args.as_of, scope=args.scope)
    if args.json:
        _print_json(res.to_dict())
    else:
        print(res.answer)
        print(
            f"\n[turns: {', '.join(str(t.turn_id) for t in res.context.turns) or 'none'}; "
            f"{res.context.tokens} context tokens; {res.model}]",
            file=sys.stderr,
        )
    return 0


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.db.exists():
        raise InputError("no database yet; ingest something first", path=str(settings.db))
    from localmem.enrich import layer_stats

    with _open(settings) as store:
        stats = store.stats()
        stats["enrichment"] = layer_stats(store)
    if args.json:
        _print_json(stats)
        return 0
    print(f"database      {stats['db']} ({stats['bytes'] / 1e6:.1f} MB, schema v{stats['schema_version']})")
    print(f"embedder      {stats['embedder']} ({stats['embedder_dim']}-d)")
    print(f"sessions      {stats['sessions']}")
    print(f"turns         {stats['turns']}  ({stats['first_turn']} .. {stats['last_turn']})")
    print("cues          " + ", ".join(f"{k} {v}" for k, v in stats["cues"].items()))
    print("edges         " + ", ".join(f"{k} {v}" for k, v in stats["edges"].items()))
    layers = "statement cues, temporal + semantic edges (model-free)"
    if stats["cues"]["triple"] or stats["cues"]["keyword"]:
        layers += "; extracted cues"
    if stats["edges"]["antecedent"]:
        layers += "; antecedent links"
    print(f"layers        {layers}")
    e = stats["enrichment"]
    print(
        f"enrichment    {e['enriched_turns']} of {e['turns']} turns ({e['enriched_pct']}%), "
        f"{e['turns_with_extracted_cues']} with extracted cues, {e['low_information_turns']} low-information; "
        f"cues kept {e['cues_kept']}, rejected {e['cues_rejected']} ({100 * e['rejected_cue_rate']:.0f}%); "
        f"tags {e['tags']}"
    )
    print("memory types  " + ", ".join(f"{k} {v}" for k, v in e["memory_types"].items()))
    print("jobs          " + ", ".join(f"{k} {v}" for k, v in e["jobs"].items()))
    a = e["antecedent"]
    print(
        f"antecedents   {a['turns_processed']} turns processed ({a['turns_skipped']} skipped), {a['jobs_waiting']} "
        f"waiting; {a['edges']} edges, per turn: {a['edges_per_turn']} edges, {a['candidates_per_turn']} "
        f"candidates, {a['calls_per_turn']} model calls"
    )
    for p in e["parked"]:
        print(f"  parked {p['kind']} job {p['job']} (turn {p['turn_id']}, {p['attempts']} attempts): {p['error']}")
    return 0


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    from localmem.doctor import run_checks

    checks = run_checks(settings.with_overrides(model=args.model))
    if args.json:
        _print_json(checks)
    else:
        for c in checks:
            print(f"[{'ok' if c['ok'] else 'FAIL':>4}] {c['name']}: {c['detail']}")
    return 0 if all(c["ok"] for c in checks) else 1


def cmd_forget(args: argparse.Namespace, settings: Settings) -> int:
    with _open(settings) as store:
        n = store.forget(turn_ids=args.turn, session=args.session, before=args.before)
    if args.json:
        _print_json({"deleted_turns": n})
    else:
        print(f"forgot {n} turns")
    return 0


def cmd_reindex(args: argparse.Namespace, settings: Settings) -> int:
    from localmem.models import default_embedder

    with Store(settings.db, embedder=default_embedder(settings.embedder), settings=settings, rebind=True) as store:
        n = store.reindex()
    print(f"re-embedded {n} turns with {store.embedder.model_id}")
    return 0


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    sample = resources.files("localmem") / "data" / "sample_conversation.jsonl"
    db = settings.db if args.db else Path(tempfile.mkdtemp(prefix="localmem-demo-")) / "demo.db"
    with resources.as_file(sample) as path:
        print(f"$ localmem --db {db} ingest {path.name}")
        ns = argparse.Namespace(file=path, format="jsonl", question=None, sample=None, json=False)
        cmd_ingest(ns, settings.with_overrides(db=db))
    print(f'\n$ localmem --db {db} query "{args.question}" --budget {args.budget}\n')
    with _open(settings.with_overrides(db=db)) as store:
        ctx = store.reconstruct(args.question, args.budget)
    print(ctx.text)
    print(
        f"\n[{ctx.tokens} of {args.budget} tokens; turns: "
        + ", ".join(f"{t.turn_id} ({t.reason})" for t in ctx.turns)
        + "]"
    )
    return 0


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from mcp_server.serve import run_from_args

    return run_from_args(args, settings)


def cmd_mcp_config(args: argparse.Namespace, settings: Settings) -> int:
    from mcp_server import clientconfig

    if args.install:
        target, backup = clientconfig.install(settings, args.client, args.path)
        print(f"installed the localmem server into {target}" + (f" (backup: {backup})" if backup else ""))
        print("restart the client to load it", file=sys.stderr)
        return 0
    print(json.dumps(clientconfig.snippet(settings, args.client), indent=2))
    print(f"# merge into {clientconfig.config_path(args.client)}, or run with --install", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
