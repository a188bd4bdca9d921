"""``localmem bench sync --join N``: how fast a new device joins. A source device ingests
N turns (plain ingest, the embedder's speed) and gets a model-derived cue on every turn
(through the door, as enrichment writes them); it exports everything to a folder; an
empty store then folds that folder. Reports turns/s of both and how long the fold spends
outside embedding (the fold's own cost)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from localmem.config import Settings
from localmem.memory import open_store
from localmem.records import SessionIn, TurnIn
from localmem.storage.bench import sync_checks
from localmem.sync.export import export
from localmem.sync.fold import fold
from localmem.sync.keys import Keyring


class _Timed:
    """Wraps an embedder to add up the time spent in it."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.seconds = inner, 0.0
        self.model_id, self.dim = inner.model_id, inner.dim

    def embed(self, texts: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - t0


def _sessions(turns: int) -> list[SessionIn]:
    out = []
    for s in range(0, turns, 20):
        out.append(
            SessionIn(
                key=f"history-{s // 20}",
                source="bench",
                turns=tuple(
                    TurnIn(
                        text=f"Session {s // 20}, message {t}: the plan for week {t} of project {s % 97} changed again.",
                        speaker="Ana" if t % 2 == 0 else "Assistant",
                        role="user" if t % 2 == 0 else "assistant",
                        timestamp=f"2023-{1 + (s // 20) % 12:02d}-{1 + t:02d}T10:00:00",
                    )
                    for t in range(min(20, turns - s))
                ),
            )
        )
    return out


def join(workdir: Path, turns: int) -> dict[str, Any]:
    folder = workdir / "join-folder"
    folder.mkdir(parents=True, exist_ok=True)
    src_db, dst_db = workdir / "join-source.db", workdir / "join-new.db"
    with open_store(Settings(db=src_db)) as src:
        t0 = time.perf_counter()
        src.write_sessions(_sessions(turns))
        ingest_s = time.perf_counter() - t0
        sync_checks.bench_derive(src.conn, "bench-model", n=turns)
        t0 = time.perf_counter()
        exported = export(src, folder, Keyring())
        export_s = time.perf_counter() - t0
    with open_store(Settings(db=dst_db)) as dst:
        timed = _Timed(dst.embedder)
        dst.embedder = timed
        c0, t0 = time.process_time(), time.perf_counter()
        done = fold(dst, folder, Keyring())
        fold_s, cpu = time.perf_counter() - t0, time.process_time() - c0
        same = sync_checks.fingerprint(dst.conn)
    with open_store(Settings(db=src_db)) as src:
        ref = sync_checks.fingerprint(src.conn)
    return {
        "turns": turns,
        "ingest_turns_per_s": round(turns / ingest_s, 1),
        "export_s": round(export_s, 2),
        "segments": exported.segments,
        "segment_bytes_per_turn": round(exported.bytes / turns, 1),
        "fold_turns_per_s": round(done.applied.turns / fold_s, 1),
        "fold_s": round(fold_s, 2),
        "fold_embedding_s": round(timed.seconds, 2),
        "fold_other_s": round(fold_s - timed.seconds, 2),
        "fold_cpu_ms_per_turn": round(1000 * cpu / max(1, done.applied.turns), 2),
        "derived_folded": done.applied.derived,
        "identical": same == ref,
    }
