"""``localmem train eval``: how high an embedder ranks held-out evidence, list by list.

For LongMemEval questions (one cross-validation fold, or all of a file) the turns of
their haystacks are embedded as a store would embed them (``embed_with_spans``: the turn
vector and its statement cues pooled from the same pass). Per question, each evidence
turn is ranked by turn cosine and by its best cue's cosine among the turns of its own
role (user or assistant: the scorer separates the two already), in its own haystack
("haystack") and over all the fold's haystacks at once ("pooled", the shape of one
store holding many histories). Reported: the mean share of a question's evidence in
the top k of each list, per embedder. The read path's scorer is not involved: this is
the signal the embedder gives it, computed in minutes instead of a bench's hour.

Invariants: every embedder sees the same turns and questions; a turn is embedded once
however many haystacks hold it; vectors may be cached per embedder id in ``cache``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from localmem.models.embedding import Embedder
from localmem.train import corpus

KS = (10, 30, 100)


@dataclass
class Vectors:
    turns: np.ndarray  # (turns, dim)
    cues: np.ndarray  # (cues, dim), grouped by turn in turn order
    starts: np.ndarray  # (turns,) index of each turn's first cue (every turn has >= 1)


def embed(embedder: Embedder, turns: Sequence[corpus.Turn], log: Callable[[str], None]) -> Vectors:
    span_embed = getattr(embedder, "embed_with_spans", None)
    tv, cues, starts = [], [], []
    at, step = 0, 1024
    for s in range(0, len(turns), step):
        chunk = turns[s : s + step]
        # A turn with no statement cue is its own cue, so every turn has a best cue.
        spans = [list(t.spans) or [(t.text_start, len(t.doc))] for t in chunk]
        if span_embed is not None:
            t_vecs, c_vecs = span_embed([t.doc for t in chunk], spans)
        else:
            t_vecs = embedder.embed([t.doc for t in chunk])
            c_vecs = [embedder.embed([t.doc[a:b] for a, b in sp]) for t, sp in zip(chunk, spans, strict=True)]
        tv.append(t_vecs)
        for c in c_vecs:
            starts.append(at)
            cues.append(c)
            at += len(c)
        log(f"{embedder.model_id}: {s + len(chunk)}/{len(turns)} turns embedded")
    return Vectors(np.vstack(tv), np.vstack(cues), np.asarray(starts))


def _cached(
    embedder: Embedder, turns: Sequence[corpus.Turn], cache: Path | None, log: Callable[[str], None]
) -> Vectors:
    if cache is None:
        return embed(embedder, turns, log)
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / (embedder.model_id.replace("/", "_") + f"-{len(turns)}.npz")
    keys = np.asarray([t.key for t in turns])
    if path.is_file():
        z = np.load(path)
        if np.array_equal(z["keys"], keys):
            return Vectors(z["turns"], z["cues"], z["starts"])
    v = embed(embedder, turns, log)
    np.savez(path, keys=keys, turns=v.turns, cues=v.cues, starts=v.starts)
    return v


def _recall(scores: np.ndarray, candidates: np.ndarray, evidence: np.ndarray) -> dict[int, float]:
    """Share of ``evidence`` rows in the top k of ``candidates`` by ``scores``, per k."""
    cand_scores = scores[candidates]
    out = {}
    for k in KS:
        if k >= len(candidates):
            out[k] = 1.0
            continue
        cut = np.partition(-cand_scores, k - 1)[k - 1]
        out[k] = float(np.mean(-scores[evidence] <= cut))
    return out


def score(
    questions: Sequence[corpus.Question], turns: Sequence[corpus.Turn], vecs: Vectors, qvecs: np.ndarray
) -> dict[str, float]:
    """Mean recall@k of each list over ``questions`` (see the module docstring); an
    evidence turn is ranked among the turns of its own role."""
    row = {t.key: i for i, t in enumerate(turns)}
    roles = np.asarray([t.role for t in turns])
    sums: dict[str, float] = {}
    for q, qv in zip(questions, qvecs, strict=True):
        turn_s = vecs.turns @ qv
        cue_s = np.maximum.reduceat(vecs.cues @ qv, vecs.starts)
        own = np.zeros(len(turns), dtype=bool)
        own[[row[k] for k in q.haystack if k in row]] = True
        for key in q.evidence:
            same = roles == roles[row[key]]
            ev = np.asarray([row[key]])
            for lst, s in (("turn", turn_s), ("cue", cue_s)):
                for where, cands in (("haystack", np.flatnonzero(own & same)), ("pooled", np.flatnonzero(same))):
                    for k, v in _recall(s, cands, ev).items():
                        name = f"{where} {lst}@{k}"
                        sums[name] = sums.get(name, 0.0) + v / len(q.evidence)
    return {k: round(100 * v / max(1, len(questions)), 1) for k, v in sums.items()}


def candidates(corp: corpus.Corpus) -> list[corpus.Turn]:
    """The turns an evidence turn is ranked among: every user turn of the questions'
    haystacks, and the assistant turns of the haystacks whose evidence the assistant
    said (assistant turns are long: embedding them all would cost ~5x the time)."""
    asked = {k for q in corp.questions if any(corp.turns[e].role != "user" for e in q.evidence) for k in q.haystack}
    return [t for t in corp.turns.values() if t.role == "user" or t.key in asked]


def sampled(turns: list[corpus.Turn], questions: Sequence[corpus.Question], n: int, seed: int = 1) -> list[corpus.Turn]:
    """``n`` of ``turns`` drawn at random, plus every evidence turn (a cheaper check:
    evidence ranked among a random sample of the distractors)."""
    evidence = {k for q in questions for k in q.evidence}
    rest = [t for t in turns if t.key not in evidence]
    keep = {t.key for t in random.Random(seed).sample(rest, min(n, len(rest)))} | evidence
    return [t for t in turns if t.key in keep]


def run(
    data: Path,
    embedders: Sequence[Embedder],
    fold: int | None = None,
    folds: int = 5,
    cache: Path | None = None,
    log: Callable[[str], None] = lambda _m: None,
    sample: int | None = None,
) -> dict[str, Any]:
    items = corpus.read_items(data)
    chosen = (
        corpus.fold_ids(items, folds, fold) if fold is not None else frozenset(str(i["question_id"]) for i in items)
    )
    corp = corpus.load(data, only=chosen)
    qs = corp.questions
    turns = candidates(corp)
    if sample is not None:
        turns = sampled(turns, qs, sample)
    log(f"{len(qs)} questions, {len(turns)} turns")
    rows = []
    for emb in embedders:
        vecs = _cached(emb, turns, cache, log)
        qvecs = emb.embed([q.text for q in qs])
        rows.append({"embedder": emb.model_id, **score(qs, turns, vecs, qvecs)})
    return {
        "data": str(data),
        "fold": fold,
        "folds": folds,
        "sample": sample,
        "questions": len(qs),
        "turns": len(turns),
        "rows": rows,
    }


def table(result: dict[str, Any]) -> str:
    cols = [c for c in result["rows"][0] if c != "embedder"]
    lines = [
        f"evidence in the top k (%), {result['questions']} questions, {result['turns']} turns"
        + (f", fold {result['fold']} of {result['folds']}" if result["fold"] is not None else "")
        + (f" (a random {result['sample']} of the distractors)" if result.get("sample") else ""),
        "| embedder | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
    ]
    lines += ["| " + " | ".join(str(r[c]) for c in ["embedder", *cols]) + " |" for r in result["rows"]]
    return "\n".join(lines)
