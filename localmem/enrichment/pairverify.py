"""CABLE's construction with a verifier that needs no model: a learned pair classifier.

For each turn m_i without an antecedent run (oldest first):

1. skipped when low-information (``grounding.low_information``) or first in the store;
2. antecedent queries from the turn itself, no model: its named entities (capitalised
   words that are not a sentence's first, and the session's people it names) with its
   rarest content words, and its rarest content words alone (idf over the store's turns);
3. B = top-Kb turns for the turn's own text, H = union of top-Kh per query (best
   probability and best rank kept), both with the read path's ranking
   (``pool.retrieve``) over turns strictly earlier than m_i; C = H minus B (all of H
   with ``subtraction`` off);
4. each candidate is judged by a logistic classifier over pair features
   (:data:`PAIR_FEATURES`): accepted when P(antecedent) >= the weights' threshold, at
   most ``max_links`` per turn, most probable first;
5. one transaction per turn (``storage/layers/pairlinks.py``): the run in ``antecedent_runs`` and
   the links as ``antecedent`` edges through the door, ``model`` = :data:`MODEL_ID`.

The weights are fitted on LoCoMo dev by ``localmem bench cable-fit``
(``localmem/bench/cable_fit.py``): positives are pairs of evidence turns of the same
multi-hop question, negatives the other candidates C of the same construction (same
topic by construction: the searches found them). Nothing here imports the model layer:
it runs without the ``llm`` extra.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from localmem.enrichment.grounding import low_information, stem
from localmem.retrieval.pool import earlier_mask, retrieve
from localmem.storage.layers import pairlinks
from localmem.storage.layers.edges import AntecedentRun
from localmem.storage.reads.queries import STOPWORDS, Filter
from localmem.storage.vectors.stored import epoch_seconds, turn_vectors
from localmem.storage.write.changes import LinkWrite
from localmem.storage.write.store import Store

MODEL_ID = "pairclf-v1"
PAIR_FEATURES = ("cos", "hp", "hrank", "in_b", "ent", "rare", "same_spk", "gap", "same_sess", "near")


@dataclass(frozen=True)
class PairWeights:
    # `localmem bench cable-fit --data locomo_dev.json --no-subtraction`, fitted on all
    # five conversations (docs/cable.md, "A verifier without a model"): 210 positives
    # among 52,343 candidates, so no threshold gives precise links; 0.05 keeps ~0.1 a turn.
    coef: tuple[float, ...] = (-0.32, 0.36, -0.4, 0.5, -0.04, 1.08, 2.06, 0.01, -0.55, 0.48)
    intercept: float = -7.05
    threshold: float = 0.05

    def probability(self, feats: np.ndarray) -> np.ndarray:
        z = feats @ np.asarray(self.coef, dtype=np.float64) + self.intercept
        out: np.ndarray = 1.0 / (1.0 + np.exp(-z))
        return out


DEFAULT_PAIR_WEIGHTS = PairWeights()

_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’-]*")


@dataclass
class Vocabulary:
    """Word statistics of a store: per-turn stems and entities, document frequencies."""

    turns: dict[int, tuple[str, str, str | None, int]]  # id -> speaker, text, ts, session
    stems: dict[int, frozenset[str]]
    ents: dict[int, frozenset[str]]
    df: Counter[str]
    people: frozenset[str]

    def idf(self, s: str) -> float:
        return math.log((1 + len(self.turns)) / (1 + self.df[s]))


def entities(text: str, people: frozenset[str]) -> frozenset[str]:
    """Capitalised words that do not open a sentence, and the people named (lower case)."""
    out = set()
    for m in _TOKEN.finditer(text):
        w = m.group(0)
        before = text[: m.start()].rstrip()
        opens = not before or before[-1] in ".!?\"'("
        if w[0].isupper() and (not opens or w.lower() in people) and w.lower() not in STOPWORDS and w != "I":
            out.add(w.lower().strip("'’"))
    return frozenset(out)


def vocabulary(store: Store) -> Vocabulary:
    rows = pairlinks.turn_words(store.conn)
    people = frozenset(p.lower() for _i, spk, _t, _ts, _s in rows for p in spk.split() if p)
    turns = {i: (spk, text, ts, sid) for i, spk, text, ts, sid in rows}
    stems = {i: _stems(text) for i, _spk, text, _ts, _s in rows}
    ents = {i: entities(text, people) for i, _spk, text, _ts, _s in rows}
    df: Counter[str] = Counter(s for v in stems.values() for s in v)
    return Vocabulary(turns, stems, ents, df, people)


def _stems(text: str) -> frozenset[str]:
    words = (w.lower().replace("’", "'") for w in _TOKEN.findall(text))
    return frozenset(stem(w) for w in words if w not in STOPWORDS and len(w) > 2)


def antecedent_queries(text: str, voc: Vocabulary, nq: int = 2) -> list[str]:
    """Step 2: entities with the rarest content words, then the rarest content words."""
    words = [w for w in _TOKEN.findall(text) if w.lower() not in STOPWORDS and len(w) > 2]
    uniq = list(dict.fromkeys(words))
    rare = sorted(uniq, key=lambda w: -voc.idf(stem(w.lower())))[:6]
    ents = [w for w in uniq if w.lower() in entities(text, voc.people)]
    queries = []
    if ents:
        queries.append(" ".join(dict.fromkeys([*ents, *rare[:3]])))
    if rare:
        queries.append(" ".join(rare))
    return list(dict.fromkeys(q for q in queries if q))[:nq]


@dataclass
class Construction:
    """One turn's searches and its candidates' pair features (rows of ``feats``)."""

    turn_id: int
    skipped: str = ""
    queries: list[str] = field(default_factory=list)
    direct: list[int] = field(default_factory=list)
    retrieved: dict[int, tuple[float, int]] = field(default_factory=dict)  # H: best prob, best rank
    candidates: list[int] = field(default_factory=list)
    feats: np.ndarray = field(default_factory=lambda: np.zeros((0, len(PAIR_FEATURES))))


def construct(
    store: Store, voc: Vocabulary, turn_id: int, kb: int = 15, kh: int = 15, subtraction: bool = True
) -> Construction:
    """Steps 1-3 and the features of step 4, for one turn: no writes."""
    out = Construction(turn_id)
    if turn_id not in voc.turns:
        out.skipped = "turn forgotten"
        return out
    _speaker, text, _ts, _sid = voc.turns[turn_id]
    if low_information(text, sorted(voc.people)):
        out.skipped = "low information"
        return out
    if not earlier_mask(store.turn_mirror(), turn_id).any():
        out.skipped = "no earlier turns"
        return out
    out.queries = antecedent_queries(text, voc)
    if not out.queries:
        return out
    flt = Filter(before=turn_id)
    out.direct = [t for t, _p in retrieve(store, text, flt, kb)]
    for q in out.queries:
        for rank, (t, p) in enumerate(retrieve(store, q, flt, kh)):
            old = out.retrieved.get(t, (0.0, rank))
            out.retrieved[t] = (max(p, old[0]), min(rank, old[1]))
    blocked = set(out.direct) if subtraction else set()
    out.candidates = sorted((t for t in out.retrieved if t not in blocked), key=lambda t: (-out.retrieved[t][0], t))
    out.feats = pair_features(store, voc, turn_id, out.candidates, out.retrieved, set(out.direct))
    return out


def pair_features(
    store: Store, voc: Vocabulary, i: int, cands: Sequence[int], h: dict[int, tuple[float, int]], b: set[int]
) -> np.ndarray:
    """The :data:`PAIR_FEATURES` of (m_i, m_j) for each candidate j."""
    if not cands:
        return np.zeros((0, len(PAIR_FEATURES)))
    vecs = turn_vectors(store.conn, [i, *cands], store.embedder.dim)
    cos = vecs[1:] @ vecs[0]
    spk_i, _t, ts_i, sid_i = voc.turns[i]
    ord_i = _ord(store, i)
    rows = []
    for j, c in zip(cands, cos.tolist(), strict=True):
        spk_j, _tj, ts_j, sid_j = voc.turns[j]
        shared = voc.stems[i] & voc.stems[j]
        gap = abs(_epoch(ts_i) - _epoch(ts_j)) / 86400.0
        same = sid_i == sid_j
        rows.append(
            (
                c,
                h[j][0],
                math.log1p(h[j][1]),
                float(j in b),
                math.log1p(len((voc.ents[i] & voc.ents[j]) - {spk_i.lower(), spk_j.lower()})),
                min(sum(voc.idf(s) for s in shared), 30.0) / 10.0,
                float(spk_i == spk_j),
                math.log1p(gap),
                float(same),
                float(same and abs(ord_i - _ord(store, j)) <= 3),
            )
        )
    return np.array(rows, dtype=np.float64)


def _epoch(ts: str | None) -> float:
    return float(epoch_seconds(ts)) if ts else 0.0


def _ord(store: Store, turn_id: int) -> int:
    tm = store.turn_mirror()
    pos = int(tm.index_of(np.array([turn_id], dtype=np.int64))[0])
    return int(tm.ord[pos]) if pos >= 0 else 0


def accepted(out: Construction, weights: PairWeights, max_links: int) -> list[LinkWrite]:
    """Step 4: the candidates the classifier accepts, most probable first."""
    if not out.candidates:
        return []
    prob = weights.probability(out.feats)
    order = [k for k in np.argsort(-prob, kind="stable") if prob[k] >= weights.threshold][:max_links]
    return [
        LinkWrite(out.candidates[k], out.turn_id, round(float(prob[k]), 4), f"{MODEL_ID} p={prob[k]:.2f}")
        for k in order
    ]


def run_record(out: Construction, links: Sequence[LinkWrite], subtraction: bool) -> AntecedentRun:
    variant = MODEL_ID if subtraction else f"{MODEL_ID},no-subtraction"
    return AntecedentRun(
        out.turn_id, None, out.skipped, out.queries, len(out.direct), len(out.retrieved), len(out.candidates),
        0, 0, 0, variant, MODEL_ID,
    )  # fmt: skip


def link_store(
    store: Store, weights: PairWeights = DEFAULT_PAIR_WEIGHTS, max_links: int = 3, subtraction: bool = False
) -> dict[str, int]:
    """Steps 1-5 for every turn without a run; returns turns processed and links written."""
    voc = vocabulary(store)
    done = links_written = 0
    for tid in pairlinks.unlinked_turns(store.conn):
        out = construct(store, voc, tid, subtraction=subtraction)
        links = accepted(out, weights, max_links)
        if pairlinks.commit_pair_links(store.conn, run_record(out, links, subtraction), links):
            done += 1
            links_written += len(links)
    return {"turns": done, "links": links_written}
