"""``localmem bench latency``: a synthetic store of N turns; ingest turns/s (embedding
included), reconstruct p50/p95 (query embedding included), database size.

Synthetic turns are sentences of pseudo-words drawn with Zipf-like frequencies from a
seeded RNG, so runs compare and lexical selectivity resembles real chat.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from localmem.config import Settings
from localmem.models.embedding import Embedder
from localmem.records import SessionIn, TurnIn
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.bench import synthetic
from localmem.storage.bench.reads import count_edges, count_turns
from localmem.storage.write.store import Store

_PEOPLE = [
    f"{a}{b}" for a in ("Ma", "To", "In", "Ra", "Le", "Om", "Che", "So") for b in ("ya", "mas", "es", "vi", "na")
]
_SYLLABLES = ["ka", "lo", "mi", "ren", "to", "sa", "vel", "dor", "pi", "na", "ru", "es", "tal", "bo", "gi", "fen"]


def _vocabulary(rng: random.Random, size: int = 4000) -> tuple[list[str], list[float]]:
    """Pseudo-words with Zipf-like frequencies, as in real chat (a few very common words,
    a long tail of rare ones) so FTS and vector search see realistic selectivity."""
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))))
    ordered = sorted(words)
    rng.shuffle(ordered)
    return ordered, [1.0 / (rank + 1) ** 1.07 for rank in range(size)]


def synthetic_sessions(n_turns: int, seed: int = 7, per_session: int = 20) -> list[SessionIn]:
    rng = random.Random(seed)
    vocab, weights = _vocabulary(rng)
    sessions = []
    for s in range(0, n_turns, per_session):
        day = s // per_session
        turns = []
        for _ in range(min(per_session, n_turns - s)):
            sentences = [
                " ".join(rng.choices(vocab, weights, k=rng.randint(5, 16))).capitalize() + "."
                for _ in range(rng.randint(1, 3))
            ]
            turns.append(TurnIn(text=" ".join(sentences), speaker=rng.choice(_PEOPLE)))
        start = f"{2020 + day // 336}-{1 + (day // 28) % 12:02d}-{1 + day % 28:02d}T10:00:00"
        sessions.append(SessionIn(key=f"s{day}", turns=tuple(turns), started_at=start, source="synthetic"))
    return sessions


def synthetic_queries(sessions: list[SessionIn], n: int, seed: int = 11) -> list[str]:
    """Questions built from words of random stored turns, naming their speaker."""
    rng = random.Random(seed)
    turns = [t for s in sessions for t in s.turns]
    out = []
    for _ in range(n):
        t = rng.choice(turns)
        words = t.text.rstrip(".").split()
        out.append(f"What did {t.speaker} say about {' '.join(rng.sample(words, min(4, len(words))))}?")
    return out


def run(
    sizes: Sequence[int],
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    queries: int = 100,
    log: Callable[[str], None] = lambda _m: None,
    antecedent_edges: int = 0,
) -> dict[str, Any]:
    rows = []
    for n in sizes:
        path = workdir / f"latency-{n}.db"
        store = Store(path, embedder=embedder, settings=settings)
        try:
            existing = count_turns(store.conn)
            sessions = synthetic_sessions(n)
            t0 = time.perf_counter()
            written = 0
            for i in range(0, len(sessions), 10):
                written += sum(r.new_turns for r in store.write_sessions(sessions[i : i + 10]))
                log(f"{n}: {existing + written} turns")
            ingest_s = time.perf_counter() - t0
            if antecedent_edges:
                add_antecedent_edges(store, antecedent_edges)
            qs = synthetic_queries(sessions, queries)
            reconstruct(store, qs[0])
            times = []
            for q in qs:
                t1 = time.perf_counter()
                reconstruct(store, q, 2000)
                times.append(1000 * (time.perf_counter() - t1))
            times.sort()
            rows.append(
                row := {
                    "turns": n,
                    "ingest_turns_per_s": round(written / ingest_s, 1) if written else None,
                    "reconstruct_p50_ms": round(statistics.median(times), 2),
                    "reconstruct_p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
                    "db_mb": round(store.stats()["bytes"] / 1e6, 1),
                    "antecedent_edges": count_edges(store.conn, "antecedent"),
                }
            )
            log(f"{n}: {row}")
        finally:
            store.close()
    return {"benchmark": "latency", "embedder": embedder.model_id, "rows": rows}


def add_antecedent_edges(store: Store, per_turn: int, seed: int = 0) -> None:
    """``per_turn`` antecedent edges into every turn from random earlier turns (once per
    store): the read cost of CABLE's expansion on a dense graph, no model needed."""
    synthetic.add_antecedent_edges(store.conn, per_turn, seed)


def table(result: dict[str, Any]) -> str:
    cols = ["turns", "ingest_turns_per_s", "reconstruct_p50_ms", "reconstruct_p95_ms", "db_mb", "antecedent_edges"]
    lines = [
        f"latency ({result['embedder']}; ingest includes embedding; reconstruct includes query embedding)",
        " | ".join(f"{c:>19}" for c in cols),
        "-" * (22 * len(cols)),
    ]
    for r in result["rows"]:
        lines.append(" | ".join(f"{r[c]!s:>19}" for c in cols))
    return "\n".join(lines)
