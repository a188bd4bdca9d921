"""``localmem bench cable-probe``: hand-written antecedent cases, end to end.

Each case (``localmem/data/cable_probe.json``) is a short history: an earlier turn
that explains a later one in different words (a signed job contract, then packing
boxes), two filler sessions, and a question worded like the later turn. Per case, a
fresh store is written, the worker runs extraction and CABLE's construction with the
given model, and the question is reconstructed with and without CABLE at a small
budget. Reported: whether the expected antecedent link was built, evidence found
with and without CABLE, edges, model calls and seconds.

The stores are rebuilt on every run (``workdir/probe-NAME.db``), so switches never mix.

``verifier_check`` (``--verifier``) asks only the verification question, no store: per
case the true antecedent and two filler turns against the later turn, batched as the
construction batches them. A model fit for CABLE accepts the first and rejects the rest.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from localmem.bench.metrics import localmem_nocable
from localmem.config import Settings
from localmem.enrichment import antecedent
from localmem.enrichment.antecedent import cable_stats
from localmem.enrichment.antecedent_prompts import line
from localmem.enrichment.enrich import enrich_jobs
from localmem.enrichment.stats import WorkerStats
from localmem.errors import InputError
from localmem.models.embedding import Embedder
from localmem.models.llm import Generator
from localmem.records import SessionIn, TurnIn
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.bench.reads import antecedent_reason, turn_id_of_source
from localmem.storage.bench.synthetic import drop_jobs_outside_sessions
from localmem.storage.layers.queue import claim
from localmem.storage.write.store import Store


def load(path: Path | None = None) -> dict[str, Any]:
    packaged = resources.files("localmem") / "data" / "cable_probe.json"
    text = path.read_text("utf-8") if path else packaged.read_text("utf-8")
    data = json.loads(text)
    if not isinstance(data, dict) or not data.get("cases"):
        raise InputError("no 'cases' in the probe file", path=str(path or "cable_probe.json"))
    return data


def sessions(case: dict[str, Any], filler: list[dict[str, Any]]) -> list[SessionIn]:
    """The case's sessions and the filler ones (speakers A/B become the case's people)."""
    people = {"A": case["people"][0], "B": case["people"][1]}
    out = []
    for s in [*case["sessions"], *filler]:
        turns = tuple(
            TurnIn(text=text, speaker=people.get(who, who), source_id=f"{s['key']}:{i}")
            for i, (who, text) in enumerate(s["turns"])
        )
        out.append(SessionIn(key=s["key"], turns=turns, started_at=s["started"], source=f"probe:{case['name']}"))
    return sorted(out, key=lambda x: x.started_at or "")


def _enrich(store: Store, gen: Generator, settings: Settings, case_sessions: set[str]) -> WorkerStats:
    """Extraction, then CABLE's construction, for the case's own turns only: filler
    turns are history that is searched, not enriched or linked, which keeps a probe run
    to minutes on a CPU. Construction runs whatever ``[cable] enabled`` says."""
    drop_jobs_outside_sessions(store.conn, sorted(case_sessions))
    stats = WorkerStats()
    for kind, step, batch in (
        ("extract", enrich_jobs, settings.extract_batch),
        (antecedent.KIND, antecedent.run_jobs, 1),
    ):
        while jobs := claim(store.conn, batch, kind=kind):
            step(store, gen, jobs, stats)
    return stats


def run(
    gen: Generator,
    workdir: Path,
    embedder: Embedder,
    settings: Settings,
    budget: int = 100,
    path: Path | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    data = load(path)
    rows = []
    for case in data["cases"]:
        db = workdir / f"probe-{case['name']}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        t0 = time.perf_counter()
        with Store(db, embedder=embedder, settings=settings) as store:
            store.write_sessions(sessions(case, data.get("filler", [])))
            stats = _enrich(store, gen, settings, {s["key"] for s in case["sessions"]})
            src, dst = (turn_id_of_source(store.conn, s) for s in case["link"])
            linked = antecedent_reason(store.conn, src, dst)
            ev = set(case["evidence"])
            on = reconstruct(store, case["question"], budget)
            off = localmem_nocable(store, case["question"], budget)
            built = cable_stats(store)
        rows.append(
            {
                "case": case["name"],
                "link_built": linked is not None,
                "link_reason": linked or "",
                "evidence_without": sum(t.source_id in ev for t in off.turns) / len(ev),
                "evidence_with": sum(t.source_id in ev for t in on.turns) / len(ev),
                "antecedent_turns_added": sum(t.reason == "antecedent" for t in on.turns),
                "edges": built["edges"],
                "turns": stats.turns,
                "linked_turns": stats.antecedent_turns,
                "calls": stats.antecedent_calls,
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
        log(f"{case['name']}: link {'built' if linked is not None else 'missing'}, {built['edges']} edges")
    n = len(rows)
    return {
        "benchmark": "cable-probe",
        "model": gen.model_id,
        "variant": settings.cable.variant,
        "budget": budget,
        "cases": n,
        "links_built": sum(r["link_built"] for r in rows),
        "evidence_without": round(sum(r["evidence_without"] for r in rows) / n, 3),
        "evidence_with": round(sum(r["evidence_with"] for r in rows) / n, 3),
        "edges_per_turn": round(sum(r["edges"] for r in rows) / max(1, sum(r["linked_turns"] for r in rows)), 3),
        "calls_per_turn": round(sum(r["calls"] for r in rows) / max(1, sum(r["linked_turns"] for r in rows)), 3),
        "rows": rows,
    }


def table(result: dict[str, Any]) -> str:
    cols = ["case", "link_built", "evidence_without", "evidence_with", "antecedent_turns_added", "edges", "calls"]
    lines = [
        f"CABLE probe, {result['cases']} cases, model {result['model']}, variant {result['variant']}, "
        f"budget {result['budget']} tokens",
        " | ".join(f"{c:>16}" for c in cols),
        "-" * (19 * len(cols)),
    ]
    for r in result["rows"]:
        lines.append(" | ".join(f"{r[c]!s:>16}" for c in cols))
    lines.append(
        f"expected links built {result['links_built']}/{result['cases']}; evidence found "
        f"{100 * result['evidence_without']:.0f}% without CABLE, {100 * result['evidence_with']:.0f}% with; "
        f"{result['edges_per_turn']} edges and {result['calls_per_turn']} construction calls per turn"
    )
    return "\n".join(lines)


def verifier_check(gen: Generator, settings: Settings, path: Path | None = None) -> dict[str, Any]:
    """The verifier alone on the probe's true pairs and on filler pairs."""
    data = load(path)
    filler = [t for s in data.get("filler", []) for t in s["turns"]]
    if len(filler) < 2:
        raise InputError("the probe file needs filler turns for the verifier check", path=str(path or ""))
    true_ok = false_ok = negatives = calls = 0
    t0 = time.perf_counter()
    for k, case in enumerate(data["cases"]):
        people = {"A": case["people"][0], "B": case["people"][1]}
        (s1, s2) = case["sessions"][:2]
        current = line(s2["turns"][0][0], s2["turns"][0][1], s2["started"])
        pairs = [(line(s1["turns"][0][0], s1["turns"][0][1], s1["started"]), True)]
        for j in (3 * k % len(filler), (3 * k + 7) % len(filler)):
            who, text = filler[j]
            pairs.append((line(people.get(who, who), text, s1["started"]), False))
        out = antecedent.Outcome(0)
        ids = list(range(len(pairs)))
        links = antecedent.verify(gen, out, current, [e for e, _g in pairs], ids, settings.cable.verify_batch)
        calls += out.calls
        accepted = {link.src for link in links}
        for i, (_e, gold) in enumerate(pairs):
            true_ok += gold and i in accepted
            false_ok += (not gold) and i in accepted
            negatives += not gold
    n = len(data["cases"])
    return {
        "benchmark": "cable-probe-verifier",
        "model": gen.model_id,
        "verify_batch": settings.cable.verify_batch,
        "true_links_accepted": true_ok,
        "true_links": n,
        "false_links_accepted": false_ok,
        "false_links": negatives,
        "calls": calls,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def verifier_table(r: dict[str, Any]) -> str:
    return (
        f"CABLE verifier check, model {r['model']}, {r['verify_batch']} candidates per call: accepted "
        f"{r['true_links_accepted']}/{r['true_links']} true links and {r['false_links_accepted']}/{r['false_links']} "
        f"false ones ({r['calls']} calls, {r['seconds']}s)"
    )
