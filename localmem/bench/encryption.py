"""``localmem bench encryption``: what encryption at rest costs, plaintext and encrypted side by side.

For each size, the same synthetic store (``bench.latency``: the same turns, the same
queries, the same embedder) is built twice in one run: once plaintext, once encrypted
(SQLite3MC, ChaCha20-Poly1305, the key from ``$LOCALMEM_KEY`` set for that half only).
Reported per variant: ingest turns/s (embedding included), reconstruct p50/p95, the size on
disk, the time to open a connection (the encrypted one derives its key with PBKDF2 on every
open) and an online backup's time. Rows of one size are next to each other.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from localmem.bench import latency
from localmem.config import Settings
from localmem.models.embedding import Embedder
from localmem.storage.bench import reads
from localmem.storage.copies import backup
from localmem.storage.engine import db, keys

BENCH_KEY = "bench encryption key, not a secret"


@contextmanager
def _key(value: str | None) -> Iterator[None]:
    saved = {k: os.environ.pop(k, None) for k in (keys.KEY_ENV, keys.KEY_FILE_ENV)}
    if value is not None:
        os.environ[keys.KEY_ENV] = value
    try:
        yield
    finally:
        os.environ.pop(keys.KEY_ENV, None)
        for k, v in saved.items():
            if v is not None:
                os.environ[k] = v


def _open_ms(path: Path, times: int = 10) -> float:
    samples = []
    for _ in range(times):
        t0 = time.perf_counter()
        conn = db.connect(path, readonly=True)
        reads.schema_objects(conn)
        conn.close()
        samples.append(1000 * (time.perf_counter() - t0))
    return round(statistics.median(samples), 2)


def run(
    sizes: Sequence[int],
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    queries: int = 100,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    rows = []
    for n in sizes:
        for variant, key in (("plain", None), ("encrypted", BENCH_KEY)):
            folder = workdir / variant
            folder.mkdir(parents=True, exist_ok=True)
            with _key(key):
                res = latency.run([n], folder, embedder, settings, queries, log)
                path = folder / f"latency-{n}.db"
                assert keys.is_encrypted(path) == (key is not None)
                t0 = time.perf_counter()
                backup.backup(path, folder / f"backup-{n}.db", force=True)
                backup_s = time.perf_counter() - t0
                row = dict(res["rows"][0])
                row.update(variant=variant, open_ms=_open_ms(path), backup_s=round(backup_s, 2))
            rows.append(row)
            log(f"{n} {variant}: {row}")
    return {"benchmark": "encryption", "embedder": embedder.model_id, "cipher": keys.cipher_name(), "rows": rows}


COLS = ["turns", "variant", "ingest_turns_per_s", "reconstruct_p50_ms", "reconstruct_p95_ms", "db_mb", "open_ms"]


def table(result: dict[str, Any]) -> str:
    cols = [*COLS, "backup_s"]
    lines = [
        f"encryption cost ({result['cipher']}; {result['embedder']}; ingest includes embedding)",
        " | ".join(f"{c:>18}" for c in cols),
        "-" * (21 * len(cols)),
    ]
    for r in result["rows"]:
        lines.append(" | ".join(f"{r[c]!s:>18}" for c in cols))
    return "\n".join(lines)
