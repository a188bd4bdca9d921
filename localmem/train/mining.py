"""Hard negatives for question pairs: the turns of the question's own haystack that the
current model ranks highest, outside its answer sessions.

A turn of an answer session is never a negative: LongMemEval marks only the turns that
state the answer (``has_answer``), and their neighbours often repeat or lead up to it.
Negatives are drawn from the evidence's own role (the user's turns for a question about
what the user said, the assistant's for one about what it said), since the scorer
already separates the two.

Invariants: the ranking is the embedder's cosine between the question and each turn's
stored text, as the dense list computes it; each distinct turn is embedded once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from localmem.models.embedding import Embedder
from localmem.train.corpus import Corpus
from localmem.train.pairs import Pair


def mine(
    corpus: Corpus,
    pairs: Sequence[Pair],
    embedder: Embedder,
    depth: int = 30,
    log: Callable[[str], None] = lambda _m: None,
) -> list[Pair]:
    """``pairs`` with the ``question`` ones given the ``depth`` best-ranked negatives."""
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
    mined: dict[int, Pair] = {}
    for p, cands in jobs:
        if not cands:
            continue
        sims = vecs[[row[k] for k in cands]] @ qvecs[p.query]
        order = np.argsort(-sims)[:depth]
        mined[id(p)] = replace(p, negatives=tuple(cands[i] for i in order))
    return [mined.get(id(p), p) for p in pairs]
