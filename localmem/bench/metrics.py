"""Evidence recall at a token budget, and the baselines it is compared against.

Rule of the metric: an evidence turn counts as found only when it is among the
context's turns AND its full original text appears in the context text. Every method
is packed by the same ``reconstruct.pack`` / ``render`` under the same token counter.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from localmem.errors import InputError
from localmem.records import Context, EvidenceTurn
from localmem.retrieval.packing import Candidate, pack, quote, render, rrf
from localmem.retrieval.pool import visible_mask
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.bench.reads import turns_newest_first
from localmem.storage.reads import queries
from localmem.storage.reads.queries import Filter
from localmem.storage.vectors.stored import turn_vectors
from localmem.storage.write.store import Store
from localmem.util.text import count_words, tokens_for_words


def read_benchmark(data: Path, what: str) -> list[Any]:
    """A benchmark file's top-level JSON list, or an InputError naming the file."""
    try:
        items = json.loads(data.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read {what} data: {exc}", path=str(data)) from exc
    if not isinstance(items, list):
        raise InputError(f"expected a JSON list of {what} items", path=str(data))
    return items


_DIA = re.compile(r"^D\d+:\d+$")


def clean_evidence(raw: Iterable[str]) -> tuple[list[str], int]:
    """Split malformed entries like "D8:6; D9:17", drop unusable ones; return the ids
    and how many raw entries were unusable."""
    ids: list[str] = []
    bad = 0
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item)):
            part = part.strip()
            if not part:
                continue
            if _DIA.match(part):
                if part not in ids:
                    ids.append(part)
            else:
                bad += 1
    return ids, bad


def found_fraction(ctx: Context, evidence: Sequence[str]) -> float:
    if not evidence:
        return 0.0
    by_id = {t.source_id: t for t in ctx.turns}
    # The text must appear whole, as the context quotes it (line breaks followed by the
    # quote indent; packing.unquote gives the stored text back).
    hit = sum(1 for e in evidence if e in by_id and quote(by_id[e].text) in ctx.text)
    return hit / len(evidence)


@dataclass
class Tally:
    """Mean recall and all-found share, per group."""

    sums: dict[str, float] = field(default_factory=dict)
    full: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, group: str, frac: float) -> None:
        for g in (group, "all"):
            self.sums[g] = self.sums.get(g, 0.0) + frac
            self.full[g] = self.full.get(g, 0) + (1 if frac >= 1.0 - 1e-9 else 0)
            self.counts[g] = self.counts.get(g, 0) + 1

    def mean(self, group: str) -> float:
        n = self.counts.get(group, 0)
        return self.sums.get(group, 0.0) / n if n else math.nan

    def all_found(self, group: str) -> float:
        n = self.counts.get(group, 0)
        return self.full.get(group, 0) / n if n else math.nan


Method = Callable[[Store, str, int, "str | None"], Context]


def _context(store: Store, query: str, ranked: list[tuple[int, float]], budget: int) -> Context:
    n = len(ranked)
    cands = [Candidate(t, float(n - i), "anchor") for i, (t, _s) in enumerate(ranked)]
    rows = queries.turn_rows(store.conn, [c.turn_id for c in cands])
    chosen = pack(cands, rows, budget)
    text, ordered = render(chosen, rows)

    turns = tuple(
        EvidenceTurn(
            c.turn_id,
            rows[c.turn_id].source_id,
            rows[c.turn_id].session_key,
            rows[c.turn_id].session_id,
            rows[c.turn_id].ts,
            rows[c.turn_id].speaker,
            rows[c.turn_id].text,
            c.reason,
            c.score,
            0,
        )
        for c in ordered
    )
    return Context(query, text, tokens_for_words(count_words(text)), budget, turns)


def _ranked_turns(store: Store, query: str, as_of: str | None, lexical: bool, dense: bool) -> list[tuple[int, float]]:
    """Every visible turn ranked by bm25, by cosine, or by RRF of both."""
    tm = store.turn_mirror()
    visible = visible_mask(store, tm, Filter(as_of=as_of))
    lists: list[list[tuple[int, float]]] = []
    if lexical:
        ids, scores = queries.lexical(store.conn, "turns_fts", query, limit=-1)
        pos = tm.index_of(ids)
        ok = (pos >= 0) & visible[np.maximum(pos, 0)]
        order = np.argsort(-scores, kind="stable")
        lists.append([(int(ids[i]), float(scores[i])) for i in order if ok[i]])
    if dense:
        vecs = turn_vectors(store.conn, tm.ids, store.embedder.dim)  # every turn: a baseline on small stores
        sims = np.where(visible, vecs @ store.embedder.embed([query])[0], -np.inf)
        order = np.argsort(-sims, kind="stable")
        lists.append([(int(tm.ids[i]), float(sims[i])) for i in order if np.isfinite(sims[i])])
    if len(lists) == 1:
        return lists[0]
    fused = rrf(lists, 60.0)
    return sorted(fused.items(), key=lambda kv: -kv[1])


def bm25(store: Store, query: str, budget: int, as_of: str | None = None) -> Context:
    return _context(store, query, _ranked_turns(store, query, as_of, True, False), budget)


def dense(store: Store, query: str, budget: int, as_of: str | None = None) -> Context:
    return _context(store, query, _ranked_turns(store, query, as_of, False, True), budget)


def hybrid(store: Store, query: str, budget: int, as_of: str | None = None) -> Context:
    return _context(store, query, _ranked_turns(store, query, as_of, True, True), budget)


def recent(store: Store, query: str, budget: int, as_of: str | None = None) -> Context:
    """Full history, truncated to the most recent turns that fit (what a chat client
    that replays history would send)."""
    return _context(store, query, [(tid, 0.0) for tid in turns_newest_first(store.conn, as_of)], budget)


def localmem_method(store: Store, query: str, budget: int, as_of: str | None = None) -> Context:
    return reconstruct(store, query, budget, as_of=as_of)


def localmem_nocable(store: Store, query: str, budget: int, as_of: str | None = None) -> Context:
    """reconstruct without CABLE's antecedent expansion (the ablation's baseline)."""
    saved = store.settings
    store.settings = replace(saved, retrieval=replace(saved.retrieval, cable=False))
    try:
        return reconstruct(store, query, budget, as_of=as_of)
    finally:
        store.settings = saved


METHODS: dict[str, Method] = {
    "bm25": bm25,
    "dense": dense,
    "rrf": hybrid,
    "recent": recent,
    "localmem": localmem_method,
    "localmem-nocable": localmem_nocable,
}
