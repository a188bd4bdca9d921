"""One training step's tensors: queries, the turns they are scored against, and each
turn's statement-cue spans as token masks.

Every pair brings its positive turn and one of its negatives (drawn with the caller's
``rng``); the other pairs' turns are in-batch negatives. A turn that also answers a
query (another evidence turn of the same question, or the same turn twice) is
``blocked`` for that query: neither target nor negative.

Invariants: a span selects the non-special tokens whose characters overlap it, as
``OnnxMiniLM.embed_with_spans`` does; a span cut off by truncation is left out (a turn
with no span left scores -inf in the cue loss, and a query whose positive has none
skips it); ``target[i]`` is the row of pair ``i``'s positive.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from localmem.train.corpus import Turn
from localmem.train.pairs import Pair

MAX_SPANS = 24  # statement cues per turn scored in training (the longest turns have more)


@dataclass
class Batch:
    q_ids: torch.Tensor
    q_mask: torch.Tensor
    d_ids: torch.Tensor
    d_mask: torch.Tensor
    span_rows: torch.Tensor  # (spans,) the turn row of each span
    span_select: torch.Tensor  # (spans, tokens) 1 where the span's tokens are
    span_slots: torch.Tensor  # (turns, MAX_SPANS) span index, -1 = none
    target: torch.Tensor  # (queries,)
    blocked: torch.Tensor  # (queries, turns) bool
    cue_ok: torch.Tensor  # (queries,) bool


def _pad(encs: Sequence[Any]) -> tuple[torch.Tensor, torch.Tensor]:
    longest = max(len(e.ids) for e in encs)
    ids = torch.zeros((len(encs), longest), dtype=torch.long)
    mask = torch.zeros((len(encs), longest), dtype=torch.long)
    for r, e in enumerate(encs):
        ids[r, : len(e.ids)] = torch.tensor(e.ids)
        mask[r, : len(e.ids)] = 1
    return ids, mask


def build(
    pairs: Sequence[Pair],
    turns: Mapping[str, Turn],
    answers: Mapping[str, frozenset[str]],
    q_tok: Any,
    d_tok: Any,
    rng: random.Random,
) -> Batch:
    """The batch of ``pairs``; ``answers[query]`` are the turn keys that answer it."""
    rows: dict[str, int] = {}
    docs: list[Turn] = []

    def add(turn: Turn, name: str) -> int:
        if name not in rows:
            rows[name] = len(docs)
            docs.append(turn)
        return rows[name]

    target = []
    for p in pairs:
        pos = p.doc or turns[p.positive]
        target.append(add(pos, p.positive + ("#rest" if p.doc else "")))
        if p.negatives:
            neg = rng.choice(p.negatives)
            add(turns[neg], neg)
    names = list(rows)
    blocked = torch.zeros((len(pairs), len(docs)), dtype=torch.bool)
    for i, p in enumerate(pairs):
        ok = answers.get(p.query, frozenset()) | {p.positive}
        for j, name in enumerate(names):
            if j != target[i] and name.split("#", 1)[0] in ok:
                blocked[i, j] = True
    q_ids, q_mask = _pad(q_tok.encode_batch([p.query for p in pairs]))
    encs = d_tok.encode_batch([d.doc for d in docs])
    d_ids, d_mask = _pad(encs)
    span_rows: list[int] = []
    selects: list[torch.Tensor] = []
    slots = torch.full((len(docs), MAX_SPANS), -1, dtype=torch.long)
    for r, (d, e) in enumerate(zip(docs, encs, strict=True)):
        offsets = torch.tensor(e.offsets, dtype=torch.long).reshape(-1, 2)
        real = torch.tensor(e.special_tokens_mask, dtype=torch.bool) == 0
        k = 0
        for a, b in d.spans:
            if k == MAX_SPANS:
                break
            sel = real & (offsets[:, 0] < b) & (offsets[:, 1] > a)
            if not bool(sel.any()):
                continue
            row = torch.zeros(d_ids.shape[1])
            row[: len(sel)] = sel.float()
            slots[r, k] = len(selects)
            span_rows.append(r)
            selects.append(row)
            k += 1
    select = torch.stack(selects) if selects else torch.zeros((0, d_ids.shape[1]))
    cue_ok = torch.tensor([bool((slots[t] >= 0).any()) for t in target])
    return Batch(
        q_ids,
        q_mask,
        d_ids,
        d_mask,
        torch.tensor(span_rows, dtype=torch.long),
        select,
        slots,
        torch.tensor(target, dtype=torch.long),
        blocked,
        cue_ok,
    )
