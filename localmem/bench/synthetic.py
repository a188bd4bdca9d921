"""Synthetic stores for ``localmem bench scale``: chat-like turns, written in bulk.

A real store's rows, made without the model and without ``Store.write`` per turn: this
module generates the sessions, the vectors and the semantic edges; the storage side
(``localmem/storage/bench/synthetic.py``) lays out the rows ``Store.write`` would make for them
(sessions, turns, statement cues, FTS, vectors and codes, extraction jobs, temporal edges)
and writes them in one transaction per chunk of ``CHUNK_TURNS`` turns.

The generator (seeded, so runs compare):
- sessions of two speakers; turns per session geometric, mean 20; one session every
  ~6 hours, turns a minute apart;
- a turn has 1 + Geometric(extra) sentences (mean ``cues_per_turn``, default 1.8 as the
  issue estimates for chat exports; LoCoMo has 3.0), each of lognormal length (median 8
  words), so a turn has ~18 words (LoCoMo: 23, median 20);
- words: 75% from a 50,000 pseudo-word vocabulary with Zipf frequencies (exponent 1.0,
  the head acting as stop words), 25% from the session topic's own 40 mid-frequency
  words, so FTS postings have chat-like skew and topical co-occurrence;
- vectors: 300 topic centroids (unit vectors sharing a common direction, as sentence
  embeddings do: mean cosine between unrelated texts ~0.15); a turn's vector is its
  topic centroid plus Gaussian noise (cosine to same-topic turns ~0.5, to others ~0.15),
  a cue's vector its turn's plus smaller noise (~0.75 to its turn). So nearest
  neighbours cluster by topic instead of being uniform noise. Embedding a million turns
  with the real model takes hours on two cores, which is why they are synthetic;
- semantic edges: each cue's ``semantic_k`` most similar cues among the last 64 cues
  of its topic (exact top-k over the whole store is quadratic), weight = their cosine.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from localmem.config import Settings
from localmem.models.embedding import Embedder
from localmem.records import SessionIn, TurnIn
from localmem.storage.bench.synthetic import SemanticEdge, SyntheticWriter
from localmem.storage.write.store import Store

VOCAB = 50_000
TOPICS = 300
TOPIC_WORDS = 40
RING = 64  # semantic-edge candidates per topic: its most recent cues (plus the chunk's)
CHUNK_TURNS = 20_000
GENERATOR = "scale-v1"
_PEOPLE = [f"{a}{b}" for a in ("Ma", "To", "In", "Ra", "Le", "Om", "Che", "So") for b in ("ya", "mas", "es", "vi")]
_SYLLABLES = ["ka", "lo", "mi", "ren", "to", "sa", "vel", "dor", "pi", "na", "ru", "es", "tal", "bo", "gi", "fen"]


@dataclass
class Synth:
    """The seeded generator's fixed parts: vocabulary, topics and their centroids."""

    dim: int
    seed: int = 7
    cues_per_turn: float = 1.8
    rng: np.random.Generator = field(init=False)  # texts
    vrng: np.random.Generator = field(init=False)  # vectors: texts do not depend on how turns are chunked
    vocab: list[str] = field(init=False)
    cum: np.ndarray = field(init=False)
    topic_words: np.ndarray = field(init=False)
    centroids: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.vrng = np.random.default_rng(self.seed + 1)
        words: list[str] = []
        for n in range(1, 5):  # all 1..4-syllable words, short ones first (the frequent ones)
            grid = np.array(np.meshgrid(*[np.arange(16)] * n, indexing="ij")).reshape(n, -1).T
            words.extend("".join(_SYLLABLES[i] for i in row) for row in grid)
        self.vocab = [w for w in dict.fromkeys(words)][:VOCAB]
        p = 1.0 / np.arange(1, len(self.vocab) + 1)
        self.cum = np.cumsum(p / p.sum())
        self.topic_words = self.rng.integers(200, 5000, size=(TOPICS, TOPIC_WORDS))
        common = _unit(self.rng.standard_normal(self.dim))
        self.centroids = _unit(0.45 * common + _unit(self.rng.standard_normal((TOPICS, self.dim)))).astype(np.float32)

    def sessions(self, n_turns: int, first_session: int = 0) -> Iterator[tuple[SessionIn, np.ndarray]]:
        """Sessions with ``n_turns`` turns in all, each with its turns' topics."""
        made, s = 0, first_session
        rng = self.rng
        base = np.datetime64("2019-01-01T08:00:00")
        while made < n_turns:
            size = min(n_turns - made, max(2, int(rng.geometric(1 / 20))))
            topic = int(rng.integers(TOPICS))
            topics = np.where(rng.random(size) < 0.7, topic, rng.integers(TOPICS, size=size))
            a, b = rng.choice(len(_PEOPLE), 2, replace=False)
            start = base + np.timedelta64(s * 6 * 3600 + int(rng.integers(3600)), "s")
            turns = []
            texts = self._texts(topics)
            for i in range(size):
                ts = str(start + np.timedelta64(60 * i, "s"))
                speaker = _PEOPLE[a if i % 2 == 0 else b]
                turns.append(TurnIn(text=texts[i], speaker=speaker, timestamp=ts))
            yield SessionIn(key=f"s{s}", turns=tuple(turns), source="synthetic", started_at=str(start)), topics
            made += size
            s += 1

    def _texts(self, topics: np.ndarray) -> list[str]:
        """One text per topic: sentences of Zipf words, some from the topic's own."""
        rng = self.rng
        p_stop = 1 / self.cues_per_turn
        n_sent = 1 + np.minimum(rng.geometric(p_stop, len(topics)) - 1, 20) if p_stop < 1 else np.ones(len(topics), int)
        sent_topic = np.repeat(topics, n_sent)
        lengths = np.maximum(2, np.rint(rng.lognormal(math.log(8), 0.5, len(sent_topic))).astype(np.int64))
        idx = np.minimum(np.searchsorted(self.cum, rng.random(int(lengths.sum()))), len(self.vocab) - 1)
        own = rng.random(len(idx)) < 0.25
        word_topic = np.repeat(sent_topic, lengths)
        idx[own] = self.topic_words[word_topic[own], rng.integers(TOPIC_WORDS, size=int(own.sum()))]
        words = [self.vocab[i] for i in idx.tolist()]
        sentences: list[str] = []
        at = 0
        for n in lengths.tolist():
            sentences.append(" ".join(words[at : at + n]).capitalize() + ".")
            at += n
        out: list[str] = []
        at = 0
        for n in n_sent.tolist():
            out.append(" ".join(sentences[at : at + n]))
            at += n
        return out

    def turn_vectors(self, topics: np.ndarray) -> np.ndarray:
        noise = self.vrng.standard_normal((len(topics), self.dim), dtype=np.float32)
        return _unit(self.centroids[topics] + 1.05 * noise / math.sqrt(self.dim)).astype(np.float32)

    def cue_vectors(self, turn_vecs: np.ndarray) -> np.ndarray:
        noise = self.vrng.standard_normal(turn_vecs.shape, dtype=np.float32)
        return _unit(turn_vecs + 0.85 * noise / math.sqrt(self.dim)).astype(np.float32)


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.sqrt(np.einsum("...i,...i->...", m, m))[..., None]  # 40x faster than linalg.norm on float32 rows
    out: np.ndarray = m / norms
    return out


def build(
    path: Path,
    n_turns: int,
    embedder: Embedder,
    settings: Settings,
    *,
    seed: int = 7,
    cues_per_turn: float = 1.8,
    log: Callable[[str], None] = lambda _m: None,
) -> float:
    """Make (or keep, when it was built with the same recipe) a synthetic store of
    ``n_turns`` turns at ``path``; returns the build time in seconds (0 if kept)."""
    recipe = f"{GENERATOR}:{n_turns}:{seed}:{cues_per_turn}:{embedder.model_id}"
    if path.exists():
        with Store(path, embedder=embedder, settings=settings) as old:
            if old.meta("bench_synthetic") == recipe:
                return 0.0
        for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            p.unlink(missing_ok=True)
    t0 = time.perf_counter()
    Store(path, embedder=embedder, settings=settings).close()  # schema, vector tables, embedder binding
    synth = Synth(embedder.dim, seed, cues_per_turn)
    rings: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    batch: list[tuple[SessionIn, np.ndarray]] = []
    pending = 0
    # One BLAS thread: the semantic edges are many small products, which OpenBLAS's
    # threads make ~10x slower on a loaded machine (12.5 s vs 1.2 s a chunk, measured).
    with SyntheticWriter(path, settings.retrieval.temporal_window) as out, threadpool_limits(limits=1):
        for sess, topics in synth.sessions(n_turns):
            batch.append((sess, topics))
            pending += len(sess.turns)
            if pending >= CHUNK_TURNS:
                _write_chunk(out, synth, batch, rings, settings.retrieval.semantic_k)
                log(f"{n_turns}: {out.turns} turns, {out.cues} cues ({time.perf_counter() - t0:.0f} s)")
                batch, pending = [], 0
        if batch:
            _write_chunk(out, synth, batch, rings, settings.retrieval.semantic_k)
        out.finish(recipe)
    return time.perf_counter() - t0


def _write_chunk(
    out: SyntheticWriter,
    synth: Synth,
    batch: list[tuple[SessionIn, np.ndarray]],
    rings: dict[int, tuple[np.ndarray, np.ndarray]],
    k: int,
) -> None:
    all_topics = np.concatenate([t for _, t in batch])
    turn_vecs = synth.turn_vectors(all_topics)
    layout = out.lay_out([s for s, _ in batch])
    cue_vecs = synth.cue_vectors(turn_vecs[layout.cue_pos])
    semantic = _semantic_edges(cue_vecs, layout.cue_turns, all_topics[layout.cue_pos], rings, k)
    out.write(layout, turn_vecs, cue_vecs, semantic)


def _semantic_edges(
    vecs: np.ndarray, turns: np.ndarray, topics: np.ndarray, rings: dict[int, tuple[np.ndarray, np.ndarray]], k: int
) -> list[SemanticEdge]:
    """Each new cue's ``k`` most similar cues of other turns among its topic's recent
    cues (earlier chunks and this one), as (lower turn, higher turn, best cosine)."""
    if k <= 0:
        return []
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    empty = (np.zeros((0, vecs.shape[1]), np.float32), np.zeros(0, np.int64))
    for topic in np.unique(topics):
        rows = np.nonzero(topics == topic)[0]
        old_v, old_t = rings.get(int(topic), empty)
        cand_v = np.concatenate([old_v, vecs[rows]])
        cand_t = np.concatenate([old_t, turns[rows]])
        rings[int(topic)] = (cand_v[-RING:], cand_t[-RING:])
        sims = vecs[rows] @ cand_v.T
        sims[turns[rows][:, None] == cand_t[None, :]] = -np.inf
        kk = min(k, sims.shape[1] - 1)
        if kk <= 0:
            continue
        top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        w = np.take_along_axis(sims, top, axis=1).ravel()
        a = np.repeat(turns[rows], kk)
        b = cand_t[top].ravel()
        ok = np.isfinite(w)
        parts.append((np.minimum(a, b)[ok], np.maximum(a, b)[ok], w[ok]))
    if not parts:
        return []
    lo, hi, w = (np.concatenate(x) for x in zip(*parts, strict=True))
    order = np.lexsort((-w, hi, lo))  # per pair, the best weight first
    lo, hi, w = lo[order], hi[order], w[order]
    first = np.ones(len(lo), dtype=bool)
    first[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
    return list(zip(lo[first].tolist(), hi[first].tolist(), w[first].tolist(), strict=True))
