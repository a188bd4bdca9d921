"""``localmem train embedder``: the data file in, an int8 ONNX embedder folder out.

Steps: read the questions and haystacks (minus the excluded files' sessions and, for a
cross-validation run, one fold's), cut the pairs, mine hard negatives with the shipped
model, fine-tune the fp32 base checkpoint, export it into the shipped graph, write
``training.json`` (recipe, data digest, counts, times) and the model card.

Invariants: the output depends only on the data files, the base checkpoint, the recipe
and the thread count; the mined negatives may be cached in a file keyed by the data
digest and the pairs, and a cache that does not match them is ignored, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from localmem.models.embedding import OnnxMiniLM
from localmem.train import card, corpus, export, mining, pairs, trainer
from localmem.train.base import base_folder
from localmem.train.encoder import load_base

MODEL_NAME = "localmem-chat-minilm-l6"


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _mined(
    corp: corpus.Corpus,
    qpairs: list[pairs.Pair],
    cache: Path | None,
    key: str,
    log: Callable[[str], None],
    pooled: int = 0,
) -> tuple[list[pairs.Pair], bool]:
    """The question pairs with their mined negatives, and whether they came from ``cache``."""
    wanted = [f"{p.query}\x00{p.positive}" for p in qpairs]
    if cache is not None and cache.is_file():
        saved = json.loads(cache.read_text("utf-8"))
        if saved.get("key") == key and all(w in saved["negatives"] for w in wanted):
            log(f"mined negatives from {cache}")
            # A fold run's corpus lacks the held-out haystacks: their turns drop out of
            # the ranked lists, which is what mining this corpus would have given.
            return [
                replace(p, negatives=tuple(k for k in saved["negatives"][w] if k in corp.turns))
                for p, w in zip(qpairs, wanted, strict=True)
            ], True
    out = mining.mine(corp, qpairs, OnnxMiniLM(), log=log, pooled=pooled)
    if cache is not None:
        negs = {w: list(p.negatives) for p, w in zip(out, wanted, strict=True)}
        cache.write_text(json.dumps({"key": key, "negatives": negs}), "utf-8")
    return out, False


def run(
    data: Path,
    out: Path,
    exclude: Sequence[Path],
    recipe: trainer.Recipe,
    base: Path | None = None,
    fold: int | None = None,
    folds: int = 5,
    cache: Path | None = None,
    log: Callable[[str], None] = lambda _m: None,
    pooled: int = 0,
) -> dict[str, Any]:
    """Train and export (module docstring); ``pooled``: hard negatives per question pair
    from the other haystacks, besides the 30 from its own (``mining.mine``)."""
    t0 = time.perf_counter()
    held = corpus.fold_ids(corpus.read_items(data), folds, fold) if fold is not None else frozenset()
    corp = corpus.load(data, exclude, held)
    qpairs = pairs.question_pairs(corp)
    asked, sentences = pairs.asked_pairs(corp), pairs.sentence_pairs(corp)
    log(
        f"{len(corp.questions)} questions, {len(corp.turns)} turns; pairs: {len(qpairs)} question, "
        f"{len(asked)} asked, {len(sentences)} sentence"
    )
    data_digest = digest(data)
    excl = sorted(digest(p) for p in exclude)
    key = f"{data_digest}:{','.join(excl)}" + (f":pooled={pooled}" if pooled else "")
    mined, cached = _mined(corp, qpairs, cache, key, log, pooled)
    t_mined = time.perf_counter()
    folder = base or base_folder()
    model = load_base(folder)
    base_weights = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    stats = trainer.train(model, corp, mined, asked, sentences, recipe, log)
    weights = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    seconds = {
        "reading_and_mining": round(t_mined - t0, 1),
        "training": stats["seconds"],
        "training_cpu": stats["cpu_seconds"],
    }
    record: dict[str, Any] = {
        "name": MODEL_NAME,
        "data": {"path": str(data), "sha256": data_digest, "excluded": [str(p) for p in exclude]},
        "base": {"folder": str(folder), "sha256": digest(folder / "model.safetensors")},
        "recipe": asdict(recipe),
        "negatives": {"own_haystack": 30, "other_haystacks": pooled},
        "held_out": {"fold": fold, "folds": folds, "questions": sorted(held)} if fold is not None else None,
        "counts": {
            "questions": len(corp.questions),
            "turns": len(corp.turns),
            "question_pairs": len(qpairs),
            "asked_pairs": len(asked),
            "sentence_pairs": len(sentences),
        },
        "seconds": seconds,
        "negatives_from_cache": cached,
        "steps": stats["steps"],
        "pairs_trained": stats["pairs"],
    }
    config = export.write_folder(out, weights, base_weights, MODEL_NAME, card.render(record))
    seconds["total"] = round(time.perf_counter() - t0, 1)
    (out / "training.json").write_text(json.dumps(record, indent=2) + "\n", "utf-8")
    return {**record, "config": config}
