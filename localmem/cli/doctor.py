"""``localmem doctor``: checks that say what works and what does not, each with detail.

Each check is independent and never raises: a failure is reported, not thrown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import apsw

from localmem.config import Settings
from localmem.memory import generator, open_store
from localmem.models.registry import default_embedder
from localmem.storage import db


def _check(name: str, fn: Callable[[], str]) -> dict[str, Any]:
    try:
        return {"name": name, "ok": True, "detail": fn()}
    except Exception as exc:
        return {"name": name, "ok": False, "detail": f"{type(exc).__name__}: {exc}"}


def run_checks(settings: Settings) -> list[dict[str, Any]]:
    def sqlite() -> str:
        conn = db.connect(":memory:")
        vec = conn.execute("SELECT vec_version()").fetchone()[0]
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        return f"SQLite {apsw.sqlite_lib_version()}, apsw {apsw.apsw_version()}, sqlite-vec {vec}, FTS5 ok"

    def embedder() -> str:
        emb = default_embedder(settings.embedder)
        emb.embed(["warm up"])
        texts = [f"I went hiking with my sister on day {i} of the trip." for i in range(64)]
        t0 = time.perf_counter()
        emb.embed(texts)
        rate = len(texts) / (time.perf_counter() - t0)
        return f"{emb.model_id} ({emb.dim}-d), {rate:.0f} sentences/s"

    def database() -> str:
        if not settings.db.exists():
            return f"{settings.db} does not exist yet (created on first ingest)"

        with open_store(settings) as store:
            s = store.stats()
        return (
            f"{settings.db}: schema v{s['schema_version']}, {s['turns']} turns, {sum(s['cues'].values())} cues, "
            f"{sum(s['edges'].values())} edges; layers: statement cues + temporal/semantic edges"
            + (
                "; extracted cues"
                if s["cues"]["triple"] or s["cues"]["keyword"]
                else "; no extracted cues yet (no model run)"
            )
        )

    def model() -> str:

        gen = generator(settings)
        info = gen.info()
        probe = gen.probe()
        where = (
            f"GPU offload: {info['on_gpu']} of {info['layers']}"
            if info["gpu_offload_supported"] and info["n_gpu_layers"] != 0
            else "CPU only (this llama.cpp build cannot offload to a GPU)"
            if not info["gpu_offload_supported"]
            else "CPU (n_gpu_layers=0 by setting)"
        )
        source = "" if settings.model else " (embedded default; set --model / LOCALMEM_MODEL for quality)"
        return (
            f"{info['model']}{source}: {where}; context {info['n_ctx']} of {info['n_ctx_train']} tokens; "
            f"{info['threads']} threads; {probe['tokens_per_s']} generated tokens/s"
        )

    return [
        _check("storage", sqlite),
        _check("embedder", embedder),
        _check("model", model),
        _check("database", database),
    ]
