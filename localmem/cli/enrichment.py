"""The commands that enrich stored turns with the local model: worker, enrich; and the worker
loop ``localmem watch`` runs beside its watcher.

``worker`` runs until stopped (or ``--once``); ``enrich`` drains the queue and exits. Both
queue turns stored before the queue existed first. The watch loop opens its own store: one
connection per thread.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import Any

from localmem.cli import cable_flags
from localmem.cli.common import Subparsers, print_json
from localmem.config import Settings, default
from localmem.enrichment.layers import layer_stats
from localmem.enrichment.worker import run_worker
from localmem.errors import LocalmemError
from localmem.ingest.watch import stop_on_signals
from localmem.memory import generator, open_store
from localmem.models.llm import require_model_layer
from localmem.storage.layers.queue import counts, enqueue_missing, retry_parked
from localmem.util.progress import Progress


def add_worker_parsers(sub: Subparsers) -> None:
    """``worker`` and ``enrich``: the same options, one runs until stopped, one until the queue is empty."""
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
            "turns stored before the queue existed are queued first. A job whose model call or reply failed is "
            "retried after its back-off; enrich returns when every job is done or parked.",
        ),
    ):
        c = sub.add_parser(name, help=helptext, description=desc)
        c.add_argument("--model", help="GGUF chat model (default: $LOCALMEM_MODEL, the config file, else SmolLM2)")
        c.add_argument(
            "--batch", type=int, help=f"turns of one session per model call (default {default('extract_batch')})"
        )
        if name == "worker":
            c.add_argument("--once", action="store_true", help="process one batch of jobs, then exit")
        else:
            c.add_argument("--retry-parked", action="store_true", help="give parked jobs new attempts first")
        c.add_argument("--json", action="store_true", help="print a JSON summary (and no progress bar)")
        cable_flags.add_build_flags(c)
        c.set_defaults(func=cmd_worker, mode=name)


def watch_worker(settings: Settings) -> Any:
    """The enrichment loop to run beside the watcher, when a model is configured."""
    if not settings.model:
        return None

    gen = generator(settings)

    def loop(stop: threading.Event) -> None:
        try:
            with open_store(settings) as store:  # its own connection: one per thread
                run_worker(store, gen, stop=stop)
        except LocalmemError as exc:  # the watcher goes on; the queue waits for a worker
            print(f"localmem watch: enrichment stopped: {exc}", file=sys.stderr)

    return loop


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    settings = settings.with_overrides(model=args.model, extract_batch=args.batch)
    gen = generator(settings)
    require_model_layer(gen)  # say so before touching the queue
    with open_store(settings) as store:
        enqueue_missing(store.conn)
        if getattr(args, "retry_parked", False):
            retry_parked(store.conn)
        todo = counts(store.conn)
        total = None
        if args.mode == "enrich":
            # each enriched turn gets an antecedent job too, when CABLE is on
            cable = settings.cable.enabled
            links = counts(store.conn, "antecedent") if cable else {"pending": 0, "running": 0}
            total = (todo["pending"] + todo["running"]) * (2 if cable else 1)
            total += links["pending"] + links["running"]
        if not args.json:
            print(f"localmem {args.mode}: {gen.model_id}, {todo['pending']} turns queued", file=sys.stderr)
        with Progress(args.mode, total, unit="turns", quiet=args.json) as bar:
            if args.mode == "enrich":
                stats = run_worker(store, gen, until_empty=True, drain=True, progress=bar.advance)
            else:
                stats = run_worker(store, gen, stop=stop_on_signals(), once=args.once, progress=bar.advance)
        layers = layer_stats(store)
        summary = {
            **stats.to_dict(),
            "jobs": counts(store.conn),
            "coverage": layers["enriched_pct"],
            "antecedent": layers["antecedent"],
        }
    if args.json:
        print_json(summary)
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
