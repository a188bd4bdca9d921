"""``localmem bench ...`` argument parsing and printing (tables to stdout, ``--json``
prints one JSON object as the last line)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from localmem.bench import (
    cable_fit,
    cable_probe,
    extraction,
    fit,
    latency,
    lme_haystack_losses,
    lme_losses,
    lme_merged,
    locomo,
    locomo_losses,
    longmemeval,
)
from localmem.bench.locomo import open_conversation_store
from localmem.bench.metrics import METHODS, read_benchmark
from localmem.bench.preamble import Log, stderr_log, working_folder
from localmem.cli import cable_flags
from localmem.cli.bench_capture import (
    add_capture_bench_parsers,
    add_hooks_bench_parser,
    add_projects_bench_parser,
    add_session_start_bench_parser,
)
from localmem.cli.bench_import import add_import_parser
from localmem.cli.bench_reliability import add_reliability_parsers
from localmem.cli.bench_replicate import add_replicate_parsers
from localmem.cli.bench_scale import add_scale_parsers
from localmem.cli.bench_secrets import add_secrets_bench_parser
from localmem.cli.bench_shortlist import add_shortlist_parser
from localmem.cli.bench_startup import add_startup_parser
from localmem.cli.bench_sync import add_sync_bench_parser
from localmem.cli.bench_ui import add_ui_parser
from localmem.cli.common import positive_ints, print_result
from localmem.config import Settings
from localmem.enrichment.worker import run_worker
from localmem.errors import InputError
from localmem.memory import generator
from localmem.models.registry import default_embedder
from localmem.storage.reads import views

DEFAULT_METHODS = "bm25,dense,rrf,recent,localmem"
MERGED_METHODS = "bm25,dense,rrf,localmem"
MERGED_BUDGETS = "500,1000,2000,4000"
LOSS_BUDGETS = "1000,2000"
_BUDGETS = {"locomo": "500,1000,2000,4000", "longmemeval": "500,1000,2000"}


def add_bench_parser(sub: Any) -> None:
    bench = sub.add_parser("bench", help="benchmarks: recall on LoCoMo / LongMemEval, latency at scale")
    bsub = bench.add_subparsers(title="benchmarks", metavar="BENCHMARK")

    for name, helptext in (
        ("locomo", "evidence recall per category at token budgets (LoCoMo JSON)"),
        ("longmemeval", "evidence recall at budgets and session recall@5 per question type"),
    ):
        budgets = _BUDGETS[name]
        c = bsub.add_parser(name, help=helptext, description=helptext)
        c.add_argument("--data", type=Path, required=True, help="the benchmark JSON file")
        c.add_argument("--budgets", help=f"comma-separated token budgets (default {budgets})")
        c.add_argument("--methods", help=f"comma-separated (default {DEFAULT_METHODS}; --merged: {MERGED_METHODS})")
        c.add_argument("--limit", type=int, help="only the first N conversations / questions")
        c.add_argument("--workdir", type=Path, help="keep the per-conversation stores here (default: a temp dir)")
        c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
        if name == "locomo":
            c.add_argument(
                "--model",
                help="enrich each conversation with this GGUF chat model first ('default': the embedded "
                "SmolLM2), so recall is measured with the extracted layer on; with --mode explore, the "
                "model that explores (no enrichment unless --enrich)",
            )
            c.add_argument("--mode", choices=["recall", "explore"], default="recall", help="what to measure")
            c.add_argument(
                "--sessions",
                type=int,
                help="recall: only the first N sessions of each conversation and the questions whose evidence "
                "lies in them (a smaller haystack, for runs with a model on a CPU)",
            )
            c.add_argument(
                "--losses",
                action="store_true",
                help=f"recall: where each missed evidence turn was lost, per category (budgets default {LOSS_BUDGETS})",
            )
            c.add_argument("--questions", type=int, help="explore: at most N questions in all")
            c.add_argument("--rounds", type=int, default=8, help="explore: most Navigate rounds (default 8)")
            c.add_argument("--enrich", action="store_true", help="explore: enrich with --model first")

            cable_flags.add_read_flags(c)
            cable_flags.add_build_flags(c, with_off=False)
        else:
            c.add_argument("--built-only", action="store_true", help="only the questions whose store is in --workdir")
            c.add_argument(
                "--merged",
                action="store_true",
                help="every haystack in ONE store (sessions deduplicated by id), each question as of its date; "
                f"budgets default {MERGED_BUDGETS}; --workdir keeps the store (~15 min to build on 2 cores)",
            )
            c.add_argument(
                "--losses",
                action="store_true",
                help=f"where each missed evidence turn was lost, per type, in the merged store with --merged or in "
                f"each haystack's own (budgets default {LOSS_BUDGETS})",
            )
        c.set_defaults(func=_run, bench=name)

    c = bsub.add_parser(
        "extraction",
        help="model calls, tokens, cues and rejected cues per turn, and turns/s, of the enrichment worker",
        description="Ingest FILE into a fresh store and enrich it with the model; report the cost per turn.",
    )
    c.add_argument("--data", type=Path, required=True, help="a chat log or benchmark file (LoCoMo: one conversation)")
    c.add_argument("--model", help="GGUF chat model (default: the embedded SmolLM2-135M-Instruct)")
    c.add_argument("--limit", type=int, help="only the first N turns")
    c.add_argument("--sample", help="LoCoMo: the conversation (default: the first)")
    c.add_argument("--workdir", type=Path, help="keep the store here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line (the last line)")
    c.set_defaults(func=_run, bench="extraction")

    c = bsub.add_parser(
        "cable-probe",
        help="hand-written antecedent cases end to end: links built, evidence with and without CABLE",
        description="Write each probe case into a fresh store, run extraction and CABLE's construction with the "
        "model, then reconstruct the case's question with and without CABLE.",
    )
    c.add_argument("--model", help="GGUF chat model (default: the embedded SmolLM2-135M-Instruct)")
    c.add_argument("--budget", type=int, default=100, help="token budget of each context (default 100)")
    c.add_argument("--cases", type=Path, help="a probe file of your own (default: the bundled cases)")
    c.add_argument(
        "--verifier",
        action="store_true",
        help="only ask the verifier about each case's true link and two false ones (no store; minutes)",
    )
    c.add_argument("--workdir", type=Path, help="keep the case stores here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")

    cable_flags.add_read_flags(c)
    cable_flags.add_build_flags(c, with_off=False)
    c.set_defaults(func=_run, bench="cable-probe")

    c = bsub.add_parser(
        "cable-fit",
        help="fit the model-free antecedent verifier; precision/recall, leave-one-conversation-out (LoCoMo JSON)",
    )
    c.add_argument("--data", type=Path, required=True, help="LoCoMo JSON with two or more conversations")
    c.add_argument("--workdir", type=Path, help="the per-conversation stores (bench locomo's; default: a temp dir)")
    c.add_argument("--threshold", type=float, default=0.05, help="accept at this probability (default 0.05)")
    c.add_argument("--max-links", type=int, default=3, help="most links into one turn (default 3)")
    c.add_argument("--no-subtraction", action="store_true", help="judge all of H (the default link set), not H - B")
    c.add_argument("--link-dir", type=Path, help="also write the fitted links into copies of the stores here")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run, bench="cable-fit")

    c = bsub.add_parser("fit", help="refit the reconstruct scorer; leave-one-conversation-out recall (LoCoMo JSON)")
    c.add_argument("--data", type=Path, required=True, help="LoCoMo JSON with two or more conversations")
    c.add_argument("--budgets", default="500,1000,2000,4000", help="comma-separated token budgets")
    c.add_argument("--limit", type=int, help="only the first N conversations")
    c.add_argument("--workdir", type=Path, help="keep the per-conversation stores here (default: a temp dir)")
    c.add_argument("--lme", type=Path, help="also fit on this LongMemEval JSON (six folds by index mod 6)")
    c.add_argument("--lme-workdir", type=Path, help="the LongMemEval question stores (default: --workdir)")
    c.add_argument("--built-only", action="store_true", help="only the LongMemEval questions whose store exists")
    c.add_argument(
        "--merged",
        type=Path,
        metavar="DIR",
        help="also fit on --lme's questions asked of its merged store in DIR (bench longmemeval --merged --workdir)",
    )
    c.add_argument(
        "--lme-train",
        type=Path,
        metavar="FILE",
        help="also fit on a second LongMemEval JSON per haystack, its own data set (e.g. train289, unzipped)",
    )
    c.add_argument("--lme-train-workdir", type=Path, help="the --lme-train question stores (default: --workdir)")
    c.add_argument("--lme-train-limit", type=int, help="only the first N --lme-train questions with evidence")
    c.add_argument("--free", help="fit only these comma-separated features on top of the shipped weights")
    c.add_argument(
        "--write-scorer",
        action="store_true",
        help="write the weights fitted on all folds to scorer.json in the --embedder folder (docs/models.md)",
    )
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run, bench="fit")

    c = bsub.add_parser("latency", help="reconstruct p50/p95 and ingest turns/s on synthetic stores")
    c.add_argument("--turns", default="10000", help="comma-separated store sizes (default 10000)")
    c.add_argument("--queries", type=int, default=100, help="queries per size (default 100)")
    c.add_argument(
        "--antecedent-edges",
        type=int,
        default=0,
        help="add N random antecedent edges per turn first (CABLE's read cost; --no-cable to compare)",
    )

    cable_flags.add_read_flags(c)
    c.add_argument("--workdir", type=Path, help="keep the synthetic stores here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_run, bench="latency")
    add_shortlist_parser(bsub)
    add_reliability_parsers(bsub)
    add_replicate_parsers(bsub)
    add_scale_parsers(bsub)
    add_startup_parser(bsub)
    add_ui_parser(bsub)
    add_import_parser(bsub)
    add_sync_bench_parser(bsub)
    add_capture_bench_parsers(bsub)
    add_hooks_bench_parser(bsub)
    add_projects_bench_parser(bsub)
    add_session_start_bench_parser(bsub)
    add_secrets_bench_parser(bsub)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    with working_folder(args.workdir, args.bench) as workdir:
        result, text = _measure(args, settings, workdir, stderr_log(args.bench))
    print_result(text, result, args.json)
    return 0


def _measure(args: argparse.Namespace, settings: Settings, workdir: Path, log: Log) -> tuple[dict[str, Any], str]:
    """The result of the benchmark ``args`` ask for and its table."""
    embedder = default_embedder(settings.embedder)
    if args.bench == "extraction":
        if not args.data.is_file():
            raise InputError("no such file", path=str(args.data))
        gen = generator(settings, args.model)
        result = extraction.run(args.data, gen, workdir, embedder, settings, args.limit, args.sample, log)
        return result, extraction.table(result)
    if args.bench == "cable-probe":
        if args.budget <= 0:
            raise InputError(f"--budget must be positive, got {args.budget}")
        gen = generator(settings, None if args.model in (None, "default") else args.model)
        if args.verifier:
            result = cable_probe.verifier_check(gen, settings, args.cases)
            return result, cable_probe.verifier_table(result)
        result = cable_probe.run(gen, workdir, embedder, settings, args.budget, args.cases, log)
        return result, cable_probe.table(result)
    if args.bench == "cable-fit":
        if not args.data.is_file():
            raise InputError("no such file", path=str(args.data))
        result = cable_fit.run(
            args.data, workdir, embedder, settings, args.threshold, args.max_links,
            subtraction=not args.no_subtraction, link_dir=args.link_dir, log=log,
        )  # fmt: skip
        return result, cable_fit.table(result)
    if args.bench == "latency":
        if args.antecedent_edges < 0:
            raise InputError(f"--antecedent-edges must be 0 or more, got {args.antecedent_edges}")
        result = latency.run(
            positive_ints(args.turns, "--turns"), workdir, embedder, settings, args.queries, log, args.antecedent_edges
        )
        return result, latency.table(result)
    if args.bench == "fit":
        if not args.data.is_file():
            raise InputError("no such file", path=str(args.data))
        for given in (args.lme, args.lme_train):
            if given is not None and not given.is_file():
                raise InputError("no such file", path=str(given))
        if args.merged is not None and args.lme is None:
            raise InputError("--merged asks --lme's questions of the merged store: give --lme too")
        result = fit.run(
            args.data, positive_ints(args.budgets, "--budgets"), workdir, embedder, settings, args.limit, log,
            args.lme, args.lme_workdir, args.built_only,
            [f.strip() for f in args.free.split(",") if f.strip()] if args.free else None,
            args.merged, args.lme_train, args.lme_train_workdir, args.lme_train_limit, args.write_scorer,
        )  # fmt: skip
        return result, fit.table(result)
    return _recall(args, settings, workdir, embedder, log)


def _recall(
    args: argparse.Namespace, settings: Settings, workdir: Path, embedder: Any, log: Log
) -> tuple[dict[str, Any], str]:
    """``bench locomo`` and ``bench longmemeval`` in all their modes."""
    if not args.data.is_file():
        raise InputError("no such file", path=str(args.data))
    merged = getattr(args, "merged", False)
    losses = getattr(args, "losses", False)
    if losses and getattr(args, "mode", "recall") == "explore":
        raise InputError("--losses explains recall, not --mode explore")
    budgets_text = args.budgets or (LOSS_BUDGETS if losses else MERGED_BUDGETS if merged else _BUDGETS[args.bench])
    methods = [m.strip() for m in (args.methods or (MERGED_METHODS if merged else DEFAULT_METHODS)).split(",")]
    methods = [m for m in methods if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise InputError(f"unknown method(s) {', '.join(unknown)}; known: {', '.join(METHODS)}")
    mod = locomo if args.bench == "locomo" else longmemeval
    if getattr(args, "mode", "recall") == "explore":
        if args.enrich:
            _enrich_locomo(args, settings, workdir, embedder, log)
        gen = generator(settings, None if args.model in (None, "default") else args.model)
        budget = positive_ints(budgets_text, "--budgets")[0]
        result = locomo.run_explore(
            args.data, gen, workdir, embedder, settings, args.limit, args.questions, budget, args.rounds, log
        )
        return result, locomo.explore_table(result)
    if losses and args.bench == "locomo":
        result = locomo_losses.run(args.data, positive_ints(budgets_text, "--budgets"), workdir, embedder, settings,
                                   args.limit, log)  # fmt: skip
        return result, lme_losses.table(result, f"Where the evidence is lost, LoCoMo ({result['questions']} questions, "
                                                f"{result['store']['conversations']} conversations, one store each); "
                                                f"lists searched {result['depth']} deep")  # fmt: skip
    if losses and not merged:
        result = lme_haystack_losses.run(args.data, positive_ints(budgets_text, "--budgets"), workdir, embedder, settings,
                                         args.limit, log, args.built_only)  # fmt: skip
        return result, lme_losses.table(result, f"Where the evidence is lost, LongMemEval ({result['questions']} "
                                                f"questions, one store per haystack); lists searched {result['depth']} "
                                                "deep")  # fmt: skip
    if merged:
        if args.losses:
            result = lme_losses.run(args.data, positive_ints(budgets_text, "--budgets"), workdir, embedder, settings,
                                    args.limit, log)  # fmt: skip
            return result, lme_losses.table(result)
        result = lme_merged.run(
            args.data, positive_ints(budgets_text, "--budgets"), methods, workdir, embedder, settings, args.limit, log
        )
        return result, lme_merged.table(result)
    if getattr(args, "model", None):
        _enrich_locomo(args, settings, workdir, embedder, log)
        if "localmem" in methods and "localmem-nocable" not in methods:
            methods.append("localmem-nocable")  # the same stores with and without CABLE
    sessions = getattr(args, "sessions", None)
    if sessions is not None and sessions <= 0:
        raise InputError(f"--sessions must be positive, got {sessions}")
    extra: dict[str, Any] = {"sessions": sessions} if sessions is not None else {}
    if args.bench == "longmemeval":
        extra["built_only"] = args.built_only
    result = mod.run(
        args.data,
        positive_ints(budgets_text, "--budgets"),
        methods,
        workdir,
        embedder,
        settings,
        args.limit,
        log,
        **extra,
    )
    return result, mod.table(result)


def _enrich_locomo(args: argparse.Namespace, settings: Settings, workdir: Path, embedder: Any, log: Any) -> None:
    """Build each conversation's store and run the worker over it before recall is
    measured; stores in ``workdir`` keep their enrichment, so a re-run only asks."""
    gen = generator(settings, None if args.model == "default" else args.model)
    if not getattr(args, "no_cable", False):  # the benchmark measures CABLE, whatever the default
        settings = replace(settings, cable=replace(settings.cable, enabled=True))
    samples = read_benchmark(args.data, "LoCoMo")
    for sample in samples[: args.limit] if args.limit else samples:
        sid = str(sample["sample_id"])
        with open_conversation_store(workdir, sid, args.data, embedder, settings, args.sessions) as store:
            _check_variant(store, settings)
            stats = run_worker(store, gen, until_empty=True)
        log(
            f"conversation {sid}: enriched {stats.turns} turns, antecedent links for {stats.antecedent_turns} "
            f"({stats.antecedent_edges} edges, {stats.antecedent_calls} calls) with {gen.model_id} "
            f"({stats.to_dict()['seconds']}s)"
        )


def _check_variant(store: Any, settings: Settings) -> None:
    """A kept store built with other CABLE switches would mix two variants."""
    want = settings.cable.variant
    other = views.antecedent_variants(store.conn, want)
    if other and settings.cable.enabled:
        raise InputError(
            f"{store.path}: antecedent links were built with {other[0]!r}, not {want!r}; "
            "use another --workdir for this variant"
        )
