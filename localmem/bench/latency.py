"""``localmem bench latency``: a synthetic store of N turns; ingest turns/s (embedding
included), reconstruct p50/p95 (query embedding included), database size.

Synthetic turns are built from a fixed vocabulary with a seeded RNG so runs compare.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from localmem.config import Settings
from localmem.embedding import Embedder
from localmem.records import SessionIn, TurnIn
from localmem.store import Store

_PEOPLE = ["Maya", "Tomas", "Ines", "Ravi", "Lena", "Omar", "Chen", "Sofia"]
_VERBS = ["visited", "painted", "cooked", "booked", "read about", "talked about", "fixed", "planned", "lost", "found"]
_THINGS = [
    "the old bike",
    "a pottery class",
    "the garden shed",
    "a trip to Lisbon",
    "the new job",
    "a marathon plan",
    "grandma's recipe",
    "the piano lesson",
    "a camping weekend",
    "the broken laptop",
    "a birthday party",
    "the book club",
    "a dog shelter",
    "the tax forms",
    "a yoga retreat",
    "the science fair",
]
_TAILS = [
    "yesterday.",
    "last week.",
    "and it went well.",
    "but it was harder than expected.",
    "with my sister.",
    "again!",
]


def synthetic_sessions(n_turns: int, seed: int = 7, per_session: int = 20) -> list[SessionIn]:
    rng = random.Random(seed)
    sessions = []
    for s in range(0, n_turns, per_session):
        day = s // per_session
        turns = []
        for _i in range(min(per_session, n_turns - s)):
            who = rng.choice(_PEOPLE)
            sentences = [
                f"I {rng.choice(_VERBS)} {rng.choice(_THINGS)} {rng.choice(_TAILS)}" for _ in range(rng.randint(1, 3))
            ]
            turns.append(TurnIn(text=" ".join(sentences), speaker=who))
        start = f"2024-{1 + (day // 28) % 12:02d}-{1 + day % 28:02d}T10:00:00"
        sessions.append(SessionIn(key=f"s{day}", turns=tuple(turns), started_at=start, source="synthetic"))
    return sessions


def run(
    sizes: Sequence[int],
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    queries: int = 100,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    rows = []
    rng = random.Random(11)
    for n in sizes:
        path = workdir / f"latency-{n}.db"
        store = Store(path, embedder=embedder, settings=settings)
        try:
            existing = int(store.conn.execute("SELECT count(*) FROM turns").fetchone()[0])
            sessions = synthetic_sessions(n)
            t0 = time.perf_counter()
            written = 0
            for i in range(0, len(sessions), 10):
                written += sum(r.new_turns for r in store.write_sessions(sessions[i : i + 10]))
                log(f"{n}: {existing + written} turns")
            ingest_s = time.perf_counter() - t0
            qs = [f"What did {rng.choice(_PEOPLE)} do with {rng.choice(_THINGS)}?" for _ in range(queries)]
            store.reconstruct(qs[0])
            times = []
            for q in qs:
                t1 = time.perf_counter()
                store.reconstruct(q, 2000)
                times.append(1000 * (time.perf_counter() - t1))
            times.sort()
            rows.append(
                row := {
                    "turns": n,
                    "ingest_turns_per_s": round(written / ingest_s, 1) if written else None,
                    "reconstruct_p50_ms": round(statistics.median(times), 2),
                    "reconstruct_p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
                    "db_mb": round(store.stats()["bytes"] / 1e6, 1),
                }
            )
            log(f"{n}: {row}")
        finally:
            store.close()
    return {"benchmark": "latency", "embedder": embedder.model_id, "rows": rows}


def table(result: dict[str, Any]) -> str:
    cols = ["turns", "ingest_turns_per_s", "reconstruct_p50_ms", "reconstruct_p95_ms", "db_mb"]
    lines = [
        f"latency ({result['embedder']}; ingest includes embedding; reconstruct includes query embedding)",
        " | ".join(f"{c:>19}" for c in cols),
        "-" * (22 * len(cols)),
    ]
    for r in result["rows"]:
        lines.append(" | ".join(f"{r[c]!s:>19}" for c in cols))
    return "\n".join(lines)
