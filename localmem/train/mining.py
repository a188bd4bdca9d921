"""Hard negatives for question pairs: the turns of the question's own haystack that the
current model ranks highest, outside its answer sessions, and (``pooled`` > 0) as many of
the best-ranked user turns of every other haystack (for a question whose evidence is the
user's), which is what a lifetime store puts beside the evidence: other conversations on
the same topics.

A turn of an answer session is never a negative: LongMemEval marks only the turns that
state the answer (``has_answer``), and their neighbours often repeat or lead up to it.
Negatives are drawn from the evidence's own role (the user's turns for a question about
what the user said, the assistant's for one about what it said), since the scorer
already separates the two.

A turn from another haystack is never a negative when its text is the text of one of the
question's evidence turns (LongMemEval reuses sessions across questions).

Invariants: the ranking is the embedder's cosine between the question and each turn's
stored text, as the dense list computes it; each distinct turn is embedded once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from localmem.models.embedding import Embedder
from localmem.train.corpus import Corpus, Question
from localmem.train.pairs import Pair

# Negatives from other haystacks are the user's turns only: in a store of many conversations
# the evidence the dense lists lose is the user's (docs/benchmarks.md, issue 21's loss table),
# and embedding every assistant turn too would double the mining's time.
POOLED_ROLE = "user"


def mine(
    corpus: Corpus,
    pairs: Sequence[Pair],
    embedder: Embedder,
    depth: int = 30,
    log: Callable[[str], None] = lambda _m: None,
    pooled: int = 0,
) -> list[Pair]:
    """``pairs`` with the ``question`` ones given the ``depth`` best-ranked negatives of
    their own haystack, then the ``pooled`` best-ranked of the other haystacks."""
    by_text = {q.text: q for q in corpus.questions}
    wanted: dict[str, None] = {}
    jobs = []
    for p in pairs:
        if p.kind != "question":
            continue
        q = by_text[p.query]
        role = corpus.turns[p.positive].role
        cands = [
            k for k in q.haystack if corpus.turns[k].role == role and corpus.turns[k].session not in q.answer_sessions
        ]
        cands = list(dict.fromkeys(cands))
        jobs.append((p, cands))
        wanted.update(dict.fromkeys(cands))
    if pooled > 0:  # every user turn is a candidate for some question
        wanted.update(dict.fromkeys(k for k, t in corpus.turns.items() if t.role == POOLED_ROLE))
    keys = list(wanted)
    log(f"mining: embedding {len(keys)} turns for {len(jobs)} question pairs")
    vecs = np.zeros((len(keys), embedder.dim), dtype=np.float32)
    step = 2048
    for start in range(0, len(keys), step):
        chunk = keys[start : start + step]
        vecs[start : start + len(chunk)] = embedder.embed([corpus.turns[k].doc for k in chunk])
        log(f"mining: {start + len(chunk)}/{len(keys)} turns")
    row = {k: i for i, k in enumerate(keys)}
    queries = list(dict.fromkeys(p.query for p, _ in jobs))
    qvecs = dict(zip(queries, embedder.embed(queries), strict=True))
    others = _other_haystacks(corpus, by_text, [p for p, _c in jobs], qvecs, vecs, row, pooled) if pooled > 0 else {}
    mined: dict[int, Pair] = {}
    for p, cands in jobs:
        negs: tuple[str, ...] = ()
        if cands:
            sims = vecs[[row[k] for k in cands]] @ qvecs[p.query]
            negs = tuple(cands[i] for i in np.argsort(-sims)[:depth])
        negs += others.get(id(p), ())
        if negs:
            mined[id(p)] = replace(p, negatives=negs)
    return [mined.get(id(p), p) for p in pairs]


def _other_haystacks(
    corpus: Corpus,
    by_text: dict[str, Question],
    qpairs: Sequence[Pair],
    qvecs: dict[str, np.ndarray],
    vecs: np.ndarray,
    row: dict[str, int],
    pooled: int,
) -> dict[int, tuple[str, ...]]:
    """Per pair whose evidence is the user's, the ``pooled`` user turns outside its
    question's haystack that rank highest (one matrix product per block of questions)."""
    keys = [k for k, t in corpus.turns.items() if t.role == POOLED_ROLE]
    mat = vecs[[row[k] for k in keys]]
    mine = [p for p in qpairs if corpus.turns[p.positive].role == POOLED_ROLE]
    out: dict[int, tuple[str, ...]] = {}
    for start in range(0, len(mine), 64):
        block = mine[start : start + 64]
        sims = np.stack([qvecs[p.query] for p in block]) @ mat.T
        for p, s in zip(block, sims, strict=True):
            q = by_text[p.query]
            own = set(q.haystack)
            said = {corpus.turns[e].text for e in q.evidence}
            picked: list[str] = []
            for i in np.argsort(-s):  # usually done within the first few dozen
                k = keys[int(i)]
                if k not in own and corpus.turns[k].text not in said:
                    picked.append(k)
                    if len(picked) == pooled:
                        break
            out[id(p)] = tuple(picked)
    return out
