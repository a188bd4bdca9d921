"""``localmem bench watch`` (a transcript appended to while ``watch`` follows it),
``localmem bench hooks`` (the agents' hooks as processes on a large store) and
``localmem bench projects`` (project scope on a two-project fixture) and ``localmem bench
session-start`` (what a new project's session start injects). Tables to stdout;
``--json`` adds the result as one JSON line."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from localmem.bench import hooks_bench, projects, session_start, watch_bench
from localmem.cli.bench_agent import add_agent_bench_parser
from localmem.config import Settings
from localmem.errors import InputError


def add_capture_bench_parsers(bsub: Any) -> None:
    c = bsub.add_parser(
        "watch",
        help="a Claude Code transcript appended to ~N times while `localmem watch` follows it: every turn once, in order",
        description="Start `localmem watch` (the agents' folders mode) as a process, append records to a transcript "
        "(some written in two pieces), then compare what it stored with one complete read of the file.",
    )
    c.add_argument("--appends", type=int, default=1000, help="writes to the transcript (default 1000)")
    c.add_argument("--interval", type=float, default=0.01, help="seconds between writes (default 0.01)")
    c.add_argument("--final-after", type=float, default=2.0, help="the watcher's --final-after (default 2)")
    c.add_argument(
        "--client",
        choices=("claude-code", "vscode"),
        default="claude-code",
        help="the log appended to: a Claude Code transcript (default) or a VS Code chat-session log, its folder "
        "made after the watcher started",
    )
    c.add_argument("--workdir", type=Path, help="keep the transcript and the store here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=cmd_bench_watch)
    add_agent_bench_parser(bsub)  # the real agent's turn with and without the hooks


def cmd_bench_watch(args: argparse.Namespace, settings: Settings) -> int:
    work = args.workdir or Path(tempfile.mkdtemp(prefix="localmem-bench-watch-"))
    work.mkdir(parents=True, exist_ok=True)
    r = watch_bench.run(work, args.appends, args.interval, args.final_after, client=args.client)
    print(
        "| writes | records | turns expected | stored | missing | duplicated | out of order | reads | appending | lag after last write |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {r['appends']} | {r['records']} | {r['turns_expected']} | {r['turns_stored']} | {r['missing']} | "
        f"{r['duplicated']} | {r['out_of_order']} | {r['reads']} | {r['append_s']} s | {r['lag_s']} s "
        f"(final-after {r['final_after_s']} s) |"
    )
    if args.json:
        print(json.dumps(r))
    ok = not (r["missing"] or r["duplicated"] or r["out_of_order"] or r["unexpected"])
    return 0 if ok else 1


def add_hooks_bench_parser(bsub: Any) -> None:
    c = bsub.add_parser(
        "hooks",
        help="the agents' hooks as processes on a large store (p50/p95, process start included); --calibrate DATA: "
        "the prompt hook's relevance bar on LoCoMo",
        description="Time `python -m localmem.hooks` processes (prompt, session start, stop) on a synthetic store "
        "of --turns turns, each from process start to exit, in-process and through a running `localmem serve "
        "--transport socket`. With --calibrate LOCOMO.json: for each relevance bar, "
        "the share of questions that get memory when their conversation is in scope, and when another is.",
    )
    c.add_argument("--turns", type=int, default=100_000, help="synthetic store size (default 100000)")
    c.add_argument("--prompts", type=int, default=40, help="prompt hooks to time (default 40)")
    c.add_argument("--starts", type=int, default=10, help="session-start hooks to time (default 10)")
    c.add_argument("--stops", type=int, default=5, help="stop hooks to time (default 5)")
    c.add_argument("--calibrate", type=Path, metavar="LOCOMO_JSON", help="calibrate the prompt bar instead")
    c.add_argument(
        "--locked",
        type=int,
        metavar="EXCHANGES",
        help="instead: Stops fired at a transcript of EXCHANGES exchanges (5 lines each; 4000 = 20,000 lines) while "
        "another connection holds the store's write lock for 10 s; the agent's wait and the time to ingest it all",
    )
    c.add_argument("--workdir", type=Path, help="keep the stores here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=cmd_bench_hooks)


def cmd_bench_hooks(args: argparse.Namespace, settings: Settings) -> int:
    work = args.workdir or Path(tempfile.mkdtemp(prefix="localmem-bench-hooks-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.locked:
        r = hooks_bench.locked_stops(work, args.locked)
        print(f"6 Stops on a {r['lines']:,}-line transcript while a write lock is held {r['held_s']:g} s")
        print("| agent waits p50 | p95 | max | runs counted while locked | all ingested after the release |")
        print("|---:|---:|---:|---:|---:|")
        print(
            f"| {r['p50_ms']} ms | {r['p95_ms']} ms | {r['max_ms']} ms | {r['counted_while_locked']} "
            f"| {r['all_ingested_after_release_s']} s ({r['turns_stored']:,} of {r['turns_expected']:,} turns) |"
        )
        if r["failures"]:
            print(f"failures: {r['failures']}")
    elif args.calibrate:
        r = hooks_bench.calibrate(args.calibrate, work, embedder=settings.embedder)
        print(
            f"LoCoMo, {r['embedder']}: {r['questions']} questions, budget {r['budget']} tokens; median best cosine "
            f"{r['median_cosine_relevant']} (own conversation) vs {r['median_cosine_unrelated']} (another)"
        )
        print("| bar | relevant: get memory | unrelated: get memory | evidence in what relevant ones get |")
        print("|---:|---:|---:|---:|")
        for row in r["rows"]:
            print(
                f"| {row['bar']} | {row['relevant_given']}% | {row['unrelated_given']}% | {row['evidence_in_given']}% |"
            )
    else:
        r = hooks_bench.run(work, args.turns, args.prompts, args.starts, args.stops, embedder=settings.embedder)
        print(
            f"store: {r['turns']:,} synthetic turns (built in {r['build_s']} s); each run a fresh process, start to exit"
        )
        print("| what | path | runs | p50 | p95 | max | CPU p50 | replied | answered by the resident |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        rows: list[tuple[str, str, dict[str, Any]]] = [
            ("python -c pass", "", r["python_start"]),
            ("python -m localmem.hooks --help (imports)", "", r["hook_import"]),
        ]
        for path, label in (("in_process", "in-process"), ("resident", "resident server")):
            rows.append(("UserPromptSubmit (prompt)", label, r[path]["prompt"]))
            rows.append(("SessionStart", label, r[path]["session_start"]))
        rows.append(("Stop (3 new turns): the agent waits", "background", r["stop"]))
        rows.append(("Stop (3 new turns)", "foreground (before)", r["stop_foreground"]))
        for what, label, s in rows:
            resident = s.get("via_resident", "")
            print(
                f"| {what} | {label} | {s['runs']} | {s['p50_ms']} ms | {s['p95_ms']} ms | {s['max_ms']} ms "
                f"| {s['cpu_p50_ms']} ms | {s['replied']} | {resident} |"
            )
        print(f"(the resident server answered on its socket {r['resident']['server_ready_s']} s after its start)")
        print(
            f"(a background Stop's ingest was counted {r['stop']['ingested_p50_ms']} ms after the hook's start, p50; "
            f"a foreground one {r['stop_foreground']['ingested_p50_ms']} ms)"
        )
    if args.json:
        print(json.dumps(r))
    return 0


def add_projects_bench_parser(bsub: Any) -> None:
    c = bsub.add_parser(
        "projects",
        help="project scope on a three-project fixture: own answers found, other projects' leaking, personal facts kept",
        description="Ask each project question in its project and each personal question in a project where it was "
        "not said, with no scope, a hard filter, and the project scope at several retrieval.project_elsewhere values.",
    )
    c.add_argument("--workdir", type=Path, help="keep the store here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=cmd_bench_projects)


def cmd_bench_projects(args: argparse.Namespace, settings: Settings) -> int:
    work = args.workdir or Path(tempfile.mkdtemp(prefix="localmem-bench-projects-"))
    work.mkdir(parents=True, exist_ok=True)
    r = projects.run(work)
    first = r["rows"][0]
    print(
        f"{first['project_questions']} project questions, {first['personal_questions']} personal questions (asked elsewhere)"
    )
    print(
        "| variant | budget | own project's answer found | another project's answer in the context | personal fact found |"
    )
    print("|---|---:|---:|---:|---:|")
    for row in r["rows"]:
        print(f"| {row['variant']} | {row['budget']} | {row['own']}% | {row['leak']}% | {row['personal']}% |")
    if args.json:
        print(json.dumps(r))
    return 0


def add_session_start_bench_parser(bsub: Any) -> None:
    c = bsub.add_parser(
        "session-start",
        help="what a session start (and the first prompt) injects in new projects on a store of ~10k unrelated turns: "
        "unrelated turns per labelled case (target 0)",
        description="Build a store of --turns turns of chat (LoCoMo dev, LongMemEval-S from --data) plus bench "
        "projects' three coding projects, then for each labelled case (a project folder and the first prompt there) "
        "run the hooks' recall and count what was injected that the case does not justify.",
    )
    c.add_argument(
        "--data", type=Path, required=True, help="the folder holding locomo_dev.json and longmemeval_s_dev60.json"
    )
    c.add_argument("--turns", type=int, default=10_000, help="chat turns in the store (default 10000)")
    c.add_argument(
        "--workdir", type=Path, help="keep the store (reused when present) and folders here (default: a temp dir)"
    )
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=cmd_bench_session_start)


def cmd_bench_session_start(args: argparse.Namespace, settings: Settings) -> int:
    work = args.workdir or Path(tempfile.mkdtemp(prefix="localmem-bench-session-start-"))
    work.mkdir(parents=True, exist_ok=True)
    if not args.data.is_dir():
        raise InputError(f"--data {args.data}: not a folder")
    r = session_start.run(work, args.data, args.turns, embedder=settings.embedder)
    print(session_start.table(r))
    if args.json:
        print(json.dumps(r))
    return 0 if r["session_unrelated"] == 0 else 1
