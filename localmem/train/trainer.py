"""Contrastive fine-tuning of MiniLM for memory: a query must rank its turn above the
other turns of the batch, both as a whole turn (mean of its tokens, the turn vector a
store keeps) and by its best statement cue (a sentence span pooled from the same
tokens, the cue vectors a store keeps).

Loss per step: cross-entropy of the query's scaled cosines over the batch's turns
(InfoNCE / MultipleNegativesRanking, scale 20) for turn vectors, plus the same over each
turn's best cue cosine. Optimiser AdamW, linear warm-up over the first 10% of steps and
linear decay to 0, gradients clipped at norm 1.

Invariants: with the same pairs, settings, ``seed`` and thread count the run is
repeated bit for bit (one ``random.Random`` for sampling and batch order, seeded torch,
no dropout); queries are the question text alone, as the read path embeds it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from localmem.models.embedding import minilm_tokenizer
from localmem.train import batches, pairs
from localmem.train.corpus import Corpus
from localmem.train.encoder import MiniLM, mean_pool, span_pool

SCALE = 20.0


@dataclass(frozen=True)
class Recipe:
    epochs: int = 2
    batch: int = 32
    lr: float = 2e-5
    asked: int = 250  # self-supervised pairs drawn per epoch, of each kind
    sentences: int = 250
    cue_weight: float = 1.0
    max_tokens: int = 128
    query_tokens: int = 64
    seed: int = 1
    threads: int = 2


def loss(model: MiniLM, b: batches.Batch, cue_weight: float) -> tuple[torch.Tensor, float, float]:
    q = mean_pool(model(b.q_ids, b.q_mask), b.q_mask)
    tokens = model(b.d_ids, b.d_mask)
    d = mean_pool(tokens, b.d_mask)
    logits = (SCALE * q @ d.T).masked_fill(b.blocked, float("-inf"))
    turn_loss = torch.nn.functional.cross_entropy(logits, b.target)
    if len(b.span_rows) == 0 or not bool(b.cue_ok.any()):
        return turn_loss, float(turn_loss.detach()), 0.0
    s = span_pool(tokens, b.span_rows, b.span_select)
    sims = q @ s.T  # (queries, spans)
    slots = b.span_slots.clamp(min=0)
    per_turn = sims[:, slots]  # (queries, turns, MAX_SPANS)
    per_turn = per_turn.masked_fill((b.span_slots < 0)[None], float("-inf")).max(-1).values
    cue_logits = (SCALE * per_turn).masked_fill(b.blocked, float("-inf"))
    ok = b.cue_ok
    cue_loss = torch.nn.functional.cross_entropy(cue_logits[ok], b.target[ok])
    return turn_loss + cue_weight * cue_loss, float(turn_loss.detach()), float(cue_loss.detach())


def epoch_pairs(
    corpus: Corpus,
    mined: Sequence[pairs.Pair],
    asked: Sequence[pairs.Pair],
    sentences: Sequence[pairs.Pair],
    recipe: Recipe,
    epoch: int,
) -> list[pairs.Pair]:
    """The pairs of one epoch, shuffled: every question pair, and fresh draws of the
    self-supervised kinds."""
    seed = recipe.seed * 1000 + epoch
    chosen = [
        *mined,
        *pairs.sample(list(asked), recipe.asked, seed),
        *pairs.sample(list(sentences), recipe.sentences, seed + 1),
    ]
    random.Random(seed + 2).shuffle(chosen)
    return chosen


def answers_of(corpus: Corpus) -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    for q in corpus.questions:
        out.setdefault(q.text, set()).update(q.evidence)
    return {k: frozenset(v) for k, v in out.items()}


def train(
    model: MiniLM,
    corpus: Corpus,
    mined: Sequence[pairs.Pair],
    asked: Sequence[pairs.Pair],
    sentences: Sequence[pairs.Pair],
    recipe: Recipe,
    log: Callable[[str], None] = lambda _m: None,
) -> Mapping[str, float]:
    """Fine-tune ``model`` in place; returns the run's figures (steps, seconds, losses)."""
    torch.manual_seed(recipe.seed)
    torch.set_num_threads(recipe.threads)
    q_tok, d_tok = minilm_tokenizer(recipe.query_tokens), minilm_tokenizer(recipe.max_tokens)
    answers = answers_of(corpus)
    per_epoch = [epoch_pairs(corpus, mined, asked, sentences, recipe, e) for e in range(recipe.epochs)]
    steps = sum((len(p) + recipe.batch - 1) // recipe.batch for p in per_epoch)
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=0.01)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm)))
    )
    rng = random.Random(recipe.seed)
    model.train()
    t0, cpu0, step, turn_sum, cue_sum, since = time.perf_counter(), time.process_time(), 0, 0.0, 0.0, 0
    for e, chosen in enumerate(per_epoch):
        for start in range(0, len(chosen), recipe.batch):
            b = batches.build(chosen[start : start + recipe.batch], corpus.turns, answers, q_tok, d_tok, rng)
            total, tl, cl = loss(model, b, recipe.cue_weight)
            opt.zero_grad()
            total.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step, since = step + 1, since + 1
            turn_sum, cue_sum = turn_sum + tl, cue_sum + cl
            if step % 10 == 0 or step == steps:
                el = time.perf_counter() - t0
                log(
                    f"epoch {e + 1} step {step}/{steps}: turn loss {turn_sum / since:.3f}, "
                    f"cue loss {cue_sum / since:.3f}, {el:.0f} s, ~{el / step * (steps - step):.0f} s left"
                )
                turn_sum, cue_sum, since = 0.0, 0.0, 0
    model.eval()
    return {
        "steps": step,
        "seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(time.process_time() - cpu0, 1),
        "pairs": sum(len(p) for p in per_epoch),
    }
