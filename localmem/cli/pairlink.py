"""``localmem link``: antecedent links with the model-free verifier, no model layer needed.

Runs CABLE's construction with the pair classifier (``enrichment/pairverify.py``) over every
turn without an antecedent run and writes the links through the door (model
``pairclf-v1``). It imports nothing of ``llama_cpp``, so it works without the ``llm``
extra; the model-based construction (``enrich --cable``) stays for a capable GGUF.
"""

from __future__ import annotations

import argparse

from localmem.cli.common import Subparsers, print_json
from localmem.config import Settings
from localmem.enrichment.pairverify import DEFAULT_PAIR_WEIGHTS, MODEL_ID, PairWeights, link_store
from localmem.memory import open_store


def add_link(sub: Subparsers) -> None:
    c = sub.add_parser(
        "link",
        help="build antecedent links without a model (CABLE, pair classifier)",
        description=f"Link each turn without an antecedent run to the earlier turns it depends on, judged by "
        f"the model-free pair classifier ({MODEL_ID}); links are journaled and sync like model links.",
    )
    c.add_argument("--max-links", type=int, default=3, help="most links into one turn (default 3)")
    c.add_argument("--threshold", type=float, help="accept at this probability (default: the fitted one)")
    c.add_argument("--no-subtraction", action="store_true", help="judge all of H, not only H minus B")
    c.add_argument("--json", action="store_true", help="print a JSON summary")
    c.set_defaults(func=cmd_link)


def cmd_link(args: argparse.Namespace, settings: Settings) -> int:
    w = DEFAULT_PAIR_WEIGHTS
    if args.threshold is not None:
        w = PairWeights(w.coef, w.intercept, args.threshold)
    store = open_store(settings)
    try:
        got = link_store(store, w, args.max_links, subtraction=not args.no_subtraction)
    finally:
        store.close()
    if args.json:
        print_json({"model": MODEL_ID, **got})
    else:
        print(f"{got['turns']} turns processed, {got['links']} antecedent links written ({MODEL_ID})")
    return 0
