"""``localmem train ...``: fine-tune localmem's embedder and check it on held-out data.

``localmem.train`` (PyTorch, the ``train`` extra) is imported only when a train command
runs, so ``localmem --help`` and every other command stay fast and work without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from localmem.config import Settings
from localmem.errors import InputError, ModelError
from localmem.models.registry import default_embedder


def add_train_parser(sub: Any) -> None:
    train = sub.add_parser("train", help="fine-tune the embedder on LongMemEval data (the train extra)")
    tsub = train.add_subparsers(title="what to train", metavar="WHAT")
    help_ = "contrastive fine-tuning of MiniLM on question -> evidence and chat pairs; writes an ONNX embedder folder"
    c = tsub.add_parser("embedder", help=help_, description=help_)
    c.add_argument("--data", type=Path, required=True, help="LongMemEval questions with haystacks (.json or .json.gz)")
    c.add_argument("--out", type=Path, required=True, help="the embedder folder to write")
    c.add_argument(
        "--exclude",
        type=Path,
        action="append",
        default=[],
        help="a LongMemEval file measured on: its sessions and turn texts never reach training (repeatable)",
    )
    c.add_argument("--base", type=Path, help="fp32 all-MiniLM-L6-v2 folder (default: an installed PyPI package)")
    c.add_argument("--epochs", type=int, default=2, help="passes over the question pairs (default 2)")
    c.add_argument("--batch", type=int, default=32, help="pairs per step (default 32)")
    c.add_argument("--lr", type=float, default=2e-5, help="peak learning rate (default 2e-5)")
    c.add_argument("--asked", type=int, default=250, help="assistant-question pairs per epoch (default 250)")
    c.add_argument("--sentences", type=int, default=250, help="statement pairs per epoch (default 250)")
    c.add_argument("--cue-weight", type=float, default=1.0, help="weight of the statement-cue loss (default 1)")
    c.add_argument("--max-tokens", type=int, default=128, help="turn length in training, tokens (default 128)")
    c.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    c.add_argument("--threads", type=int, default=2, help="CPU threads (default 2)")
    c.add_argument("--fold", type=int, help="cross-validation: hold out this fold of --folds (by question type)")
    c.add_argument("--folds", type=int, default=5, help="folds for --fold (default 5)")
    c.add_argument("--cache", type=Path, help="file to keep the mined negatives in between runs")
    c.add_argument(
        "--pooled-negatives",
        type=int,
        default=0,
        metavar="N",
        help="also N hard negatives per question from the OTHER haystacks (a lifetime store's shape; default 0)",
    )
    c.add_argument("--json", action="store_true", help="also print the run's record as one JSON line")
    c.set_defaults(func=_embedder)

    help_ = "rank held-out evidence by turn and statement-cue cosine, per embedder (no store, no scorer)"
    c = tsub.add_parser("eval", help=help_, description=help_)
    c.add_argument("--data", type=Path, required=True, help="LongMemEval questions with haystacks (.json or .json.gz)")
    c.add_argument(
        "--model",
        action="append",
        default=[],
        help="an embedder: 'default', 'minilm' or an ONNX embedder folder (repeatable; default: 'default')",
    )
    c.add_argument("--fold", type=int, help="only this fold of --folds (as `train embedder --fold`)")
    c.add_argument("--folds", type=int, default=5, help="folds for --fold (default 5)")
    c.add_argument("--cache", type=Path, help="folder to keep each embedder's vectors in between runs")
    c.add_argument("--sample", type=int, help="rank among N random distractor turns plus the evidence (faster)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=_eval)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _check_fold(args: argparse.Namespace) -> None:
    if args.folds < 2:
        raise InputError("--folds must be at least 2")
    if args.fold is not None and not 0 <= args.fold < args.folds:
        raise InputError(f"--fold must be in 0..{args.folds - 1}")


def _embedder(args: argparse.Namespace, settings: Settings) -> int:
    _check_fold(args)
    try:
        # lazy: localmem.train needs PyTorch (the train extra); only this command loads it
        from localmem.train import run, trainer
    except ImportError as exc:
        raise ModelError(
            f"training needs the train extra ({exc}): install a CPU build of torch, then pip install 'localmem[train]'"
        ) from exc

    recipe = trainer.Recipe(
        epochs=args.epochs,
        batch=args.batch,
        lr=args.lr,
        asked=args.asked,
        sentences=args.sentences,
        cue_weight=args.cue_weight,
        max_tokens=args.max_tokens,
        seed=args.seed,
        threads=args.threads,
    )
    if args.pooled_negatives < 0:
        raise InputError(f"--pooled-negatives must be 0 or more, got {args.pooled_negatives}")
    result = run.run(
        args.data, args.out, args.exclude, recipe, args.base, args.fold, args.folds, args.cache, _log,
        args.pooled_negatives,
    )  # fmt: skip
    print(f"wrote {args.out}: {result['config']['name']}, {result['steps']} steps, {result['seconds']}")
    if args.json:
        print(json.dumps(result))
    return 0


def _eval(args: argparse.Namespace, settings: Settings) -> int:
    _check_fold(args)
    # lazy: localmem.train is loaded only by the train commands
    from localmem.train import evaluate

    embedders = [default_embedder(spec) for spec in args.model or ["default"]]
    result = evaluate.run(args.data, embedders, args.fold, args.folds, args.cache, _log, args.sample)
    print(evaluate.table(result))
    if args.json:
        print(json.dumps(result))
    return 0
