"""CuePack scoring: the features of a candidate turn and the learned weights that turn
them into the probability that the turn is evidence for the query. Pure functions.

Features (all per candidate turn t of the pool; "lists" are the four ranked lists of
reconstruct: turn bm25, turn cosine, cue cosine, cue bm25):
  bm_n    turn bm25 / best turn bm25
  de_rel  cos(query, turn) - best turn cosine
  cd_rel  best cos(query, cue of t) - best cue cosine
  cb_n    best bm25 of a cue of t / best cue bm25
  spk     1 if the query names exactly one speaker (first name, whole word) and t is theirs
  nb1     best fused list score (RRF, normalised to the best) of t's same-session neighbours at +-1
  nb2     the same at +-2
  sess    best fused list score among pool turns of t's session
  logw    ln(words of t's context line)
  asst    1 if t's speaker is "assistant" (LongMemEval-style logs; 0 for named speakers)
  asst_q  asst, and the query asks what the assistant said ("our previous conversation",
          "you recommended", "remind me what")
  user_q  t's speaker is "user" and the query asks what the assistant said
  ssum    ln(1 + sum of fused list scores of the pool turns of t's session)
  scent   mean cos(query, turns of t's session) - the best such mean in the pool
  age     how far back t lies: 0 at the question's time (as_of, else the newest pool
          turn) .. 1 at the oldest pool turn
  inwin   1 if t's time lies in the span the query names ("in March", "last Saturday",
          "in the past two months"; localmem/util/dates.window), or a week after it
  rrf     t's own fused list score, normalised to the best (0 for a neighbour)
  nlists  how many of the four lists hold t (0..4)

The first nine weights are an L2-regularised logistic regression fitted on the LoCoMo
dev conversations, one row per pool candidate, each row weighted 1 / (evidence turns of
its question in the pool) to match the mean-of-fractions metric; leave-one-conversation-
out validation gave the same recall as the in-sample fit. The other features' weights
are fitted on top of those (the nine and the intercept held fixed) on LoCoMo dev and
LongMemEval-S dev together (``localmem bench fit --lme``; docs/benchmarks.md); a feature
that did not pay on both keeps weight 0. All of them were fitted on MiniLM's features: an
embedder folder carries its own weights in ``scorer.json`` (``scorer_file``), and a read
with that embedder scores with those instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FEATURES = (
    "bm_n", "de_rel", "cd_rel", "cb_n", "spk", "nb1", "nb2", "sess", "logw",
    "asst", "asst_q", "user_q", "ssum", "scent", "age", "inwin", "rrf", "nlists",
)  # fmt: skip


@dataclass(frozen=True)
class Weights:
    # The first nine: `localmem bench fit --data locomo_dev.json`, "fitted on all", with
    # span-pooled cue vectors (the default; see README). asst and asst_q: fitted on top of
    # them (`bench fit ... --lme longmemeval_s_dev60.json --free asst,asst_q`,
    # docs/benchmarks.md); user_q, ssum, scent, age and inwin did not pay there and stay 0.
    coef: tuple[float, ...] = (
        2.348, 2.43, 2.914, 1.056, 1.55, 1.242, 0.658, 2.91, 0.852,
        -5.06, 4.31, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    )  # fmt: skip
    intercept: float = -11.561

    def probability(self, feats: np.ndarray) -> np.ndarray:
        z = feats @ np.asarray(self.coef, dtype=np.float64) + self.intercept
        out: np.ndarray = 1.0 / (1.0 + np.exp(-z))
        return out


DEFAULT_WEIGHTS = Weights()


def mentioned_speaker(query: str, speakers: Sequence[str]) -> str | None:
    """The one speaker whose first name the query mentions as a whole word, else None."""
    q = query.lower()
    hits = []
    for s in speakers:
        first = s.lower().split()[0] if s.strip() else ""
        if first and re.search(r"\b" + re.escape(first) + r"\b", q):
            hits.append(s)
    return hits[0] if len(hits) == 1 else None


def value_order(prob: np.ndarray, words: np.ndarray) -> np.ndarray:
    """Candidate order for packing: expected evidence per word, best first; ties keep
    the given (chronological) order."""
    order: np.ndarray = np.argsort(-(prob / np.maximum(words, 1)), kind="stable")
    return order


def log_words(words: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.log(np.maximum(words, 1).astype(np.float64))
    return out
