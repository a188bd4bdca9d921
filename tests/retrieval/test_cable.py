"""CABLE: write-time antecedent construction (localmem/enrichment/antecedent.py) and read-time
expansion (localmem/retrieval/cable.py), on real stores; only the chat model is faked."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from localmem.config import CableParams, RetrievalParams, Settings
from localmem.enrichment import antecedent
from localmem.enrichment.antecedent_prompts import FALLBACK, FOCUS, GENERIC
from localmem.enrichment.worker import run_worker
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.layers.queue import claim
from localmem.storage.write.store import Store
from tests.helpers.cable import CableFake, Enriching, make_store, story
from tests.helpers.fakes import HashEmbedder, session


def tid(store: Store, source_id: str) -> int:
    return int(store.conn.execute("SELECT id FROM turns WHERE source_id = ?", (source_id,)).fetchone()[0])


def ids_before(store: Store, turn_id: int) -> set[int]:
    """Earlier turns by (time, session, place), computed independently of the code under test."""
    rows = store.conn.execute("SELECT id, ts, session_id, ord FROM turns").fetchall()
    key = {int(r[0]): (r[1] or "", int(r[2]), int(r[3])) for r in rows}
    return {t for t, k in key.items() if k < key[turn_id]}


# --- construction -----------------------------------------------------------------


def test_only_earlier_turns_are_candidates(tmp_path: Path) -> None:
    with make_store(tmp_path, CableParams(subtraction=False)) as store:
        new = tid(store, "s2:0")  # packing boxes
        # queries that match later turns best: they must still never come back
        gen = CableFake(queries=lambda text: ["first day new office team", "ferry commute minutes", "Seattle offer"])
        out = antecedent.construct(store, gen, new, store.settings.cable)
        earlier = ids_before(store, new)
        assert out.retrieved and set(out.retrieved) <= earlier
        assert set(out.direct) <= earlier and set(out.candidates) <= earlier
        assert tid(store, "s1:0") in out.retrieved  # the Seattle offer was found
        assert all(link.src in earlier for link in out.links)


def test_subtraction_removes_exactly_the_direct_set(tmp_path: Path) -> None:
    gen = CableFake(queries=lambda text: ["Seattle software job offer", "movers sofa", "Ben congratulations step"])
    with make_store(tmp_path, CableParams(kb=2, kh=4)) as store:
        new = tid(store, "s3:0")
        out = antecedent.construct(store, gen, new, store.settings.cable)
        assert len(out.direct) == 2
        assert set(out.candidates) == set(out.retrieved) - set(out.direct)
        assert set(out.direct) & set(out.retrieved), "the case must exercise an overlap"
        without = antecedent.construct(store, gen, new, replace(store.settings.cable, subtraction=False))
        assert set(without.candidates) == set(without.retrieved) == set(out.retrieved)
        # best retrieval score first
        scores = [out.retrieved[t] for t in out.candidates]
        assert scores == sorted(scores, reverse=True)


def test_rejected_candidates_make_no_edge(tmp_path: Path) -> None:
    seattle = "I got an offer for a software job in Seattle starting in March."
    gen = CableFake(queries=lambda text: ["Seattle job offer", "sofa movers"], accept=lambda cur, old: old == seattle)
    with make_store(tmp_path, CableParams(kb=1, verify_batch=2)) as store:
        new = tid(store, "s2:0")
        store.conn.execute("INSERT INTO jobs(kind, turn_id) VALUES ('antecedent', ?)", (new,))
        jobs = claim(store.conn, 1, kind=antecedent.KIND)
        assert antecedent.run_jobs(store, gen, jobs) == 1
        edges = store.conn.execute(
            "SELECT src, dst, kind, weight, reason FROM edges WHERE kind = 'antecedent'"
        ).fetchall()
        assert edges == [(tid(store, "s1:0"), new, "antecedent", 0.8, edges[0][4])]
        assert edges[0][4].startswith("because")
        run = store.conn.execute(
            "SELECT candidates, accepted, calls, variant, queries FROM antecedent_runs WHERE turn_id = ?", (new,)
        ).fetchone()
        n_verify = gen.kinds().count("verify")
        assert run[0] >= 2 and run[1] == 1 and run[2] == 1 + n_verify and run[3] == "full"
        assert n_verify == -(-run[0] // 2)  # batches of two candidates
        assert json.loads(run[4]) == ["Seattle job offer", "sofa movers"]
        # the job is done and a second run writes nothing
        again = antecedent.Outcome(new, links=[antecedent.Link(tid(store, "s1:1"), 1.0, "x")])
        assert not antecedent.write(store, jobs[0], again, "m", "full")
        assert store.conn.execute("SELECT count(*) FROM edges WHERE kind = 'antecedent'").fetchone()[0] == 1


def test_no_verification_links_every_candidate_without_verify_calls(tmp_path: Path) -> None:
    gen = CableFake(queries=lambda text: ["Seattle job offer"], accept=lambda cur, old: False)
    with make_store(tmp_path, CableParams(verification=False, kb=1)) as store:
        out = antecedent.construct(store, gen, tid(store, "s2:0"), store.settings.cable)
        assert gen.kinds() == ["queries"]
        assert [link.src for link in out.links] == out.candidates and out.candidates
        assert all(link.reason == "unverified" for link in out.links)
        assert store.settings.cable.variant == "no-verification"


def test_query_prompt_follows_memory_type_or_generic_switch(tmp_path: Path) -> None:
    with make_store(tmp_path) as store:
        new = tid(store, "s2:0")
        store.conn.execute(
            "INSERT INTO turn_enrichment(turn_id, memory_type, type_source) VALUES (?, 'plan', 'model')", (new,)
        )
        gen = CableFake(queries=lambda text: ["a", "b", "c", "d"])  # one too many
        out = antecedent.construct(store, gen, new, replace(store.settings.cable, nq=3))
        assert FOCUS["plan"] in gen.calls[0][1][-1]["content"]
        assert out.memory_type == "plan" and out.queries == ["a", "b", "c"]
        gen2 = CableFake()
        antecedent.construct(store, gen2, new, replace(store.settings.cable, generic_queries=True))
        assert GENERIC in gen2.calls[0][1][-1]["content"]
        gen3 = CableFake()
        antecedent.construct(store, gen3, tid(store, "s2:2"), store.settings.cable)  # untyped
        assert FALLBACK in gen3.calls[0][1][-1]["content"]


def test_low_information_and_first_turns_cost_no_call(tmp_path: Path) -> None:
    gen = CableFake()
    with make_store(tmp_path) as store:
        thanks = antecedent.construct(store, gen, tid(store, "s3:1"), store.settings.cable)
        first = antecedent.construct(store, gen, tid(store, "s1:0"), store.settings.cable)
        assert thanks.skipped == "low information" and first.skipped == "no earlier turns"
        assert gen.calls == []


def test_worker_runs_antecedent_jobs_after_extraction(tmp_path: Path) -> None:
    fake = CableFake(queries=lambda text: ["Seattle job offer"], accept=lambda cur, old: "Seattle" in old)

    with make_store(tmp_path, CableParams(enabled=True, kb=1)) as store:  # tiny store: B would cover it all
        stats = run_worker(store, Enriching(fake), until_empty=True)  # type: ignore[arg-type]
        n = store.conn.execute("SELECT count(*) FROM turns").fetchone()[0]
        assert stats.turns == n and stats.antecedent_turns == n
        assert store.conn.execute("SELECT count(*) FROM antecedent_runs").fetchone()[0] == n
        dst = {r[0] for r in store.conn.execute("SELECT dst FROM edges WHERE kind = 'antecedent'")}
        assert tid(store, "s2:0") in dst and stats.antecedent_edges == len(
            store.conn.execute("SELECT 1 FROM edges WHERE kind = 'antecedent'").fetchall()
        )
        report = antecedent.cable_stats(store)
        assert report["turns_processed"] == n and report["edges"] == stats.antecedent_edges
        # a second worker pass finds nothing left to do
        before = len(fake.calls)
        assert run_worker(store, Enriching(fake), until_empty=True).antecedent_turns == 0  # type: ignore[arg-type]
        assert len(fake.calls) == before
    # off (the default) leaves the queue alone
    with Store(tmp_path / "m2.db", embedder=HashEmbedder(), settings=Settings(db=tmp_path / "m2.db")) as off:
        off.write_sessions(story())
        s2 = run_worker(off, Enriching(fake), until_empty=True)  # type: ignore[arg-type]
        assert s2.antecedent_turns == 0 and s2.turns > 0
        waiting = off.conn.execute("SELECT count(*) FROM jobs WHERE kind = 'antecedent' AND state = 'pending'")
        assert waiting.fetchone()[0] == s2.turns


def test_forget_removes_edges_and_runs(tmp_path: Path) -> None:
    gen = CableFake(queries=lambda text: ["Seattle job offer"])
    with make_store(tmp_path, CableParams(kb=1)) as store:
        new = tid(store, "s2:0")
        store.conn.execute("INSERT INTO jobs(kind, turn_id) VALUES ('antecedent', ?)", (new,))
        antecedent.run_jobs(store, gen, claim(store.conn, 1, kind=antecedent.KIND))
        assert store.conn.execute("SELECT count(*) FROM edges WHERE kind = 'antecedent'").fetchone()[0] > 0
        store.forget(session="s2")
        assert store.conn.execute("SELECT count(*) FROM edges WHERE kind = 'antecedent'").fetchone()[0] == 0
        assert store.conn.execute("SELECT count(*) FROM antecedent_runs").fetchone()[0] == 0


# --- expansion ----------------------------------------------------------------------


def link(store: Store, src: str, dst: str, reason: str = "r") -> None:
    store.conn.execute(
        "INSERT INTO edges(src, dst, kind, weight, reason) VALUES (?, ?, 'antecedent', 0.9, ?)",
        (tid(store, src), tid(store, dst), reason),
    )


def expansion_store(tmp_path: Path, n_links: int = 2, **retrieval: Any) -> Store:
    """One seed turn about a ferry; ``n_links`` unrelated turns linked to it."""
    settings = Settings(db=tmp_path / "x.db", retrieval=RetrievalParams(**{"candidates": 1, **retrieval}))
    s = Store(tmp_path / "x.db", embedder=HashEmbedder(), settings=settings)
    lines = [("Ana", f"Note {i}: alpha{i} beta{i} gamma{i} delta{i}.") for i in range(n_links)]
    s.write_sessions(
        [
            session("old", "2023-06-01T10:00:00", *lines),
            session(
                "new",
                "2024-03-05T08:00:00",
                ("Ana", "The ferry commute takes forty minutes each way."),
                ("Ben", "Ferry rides are relaxing."),
            ),
        ]
    )
    return s


def no_model_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any way the read path could reach a chat model now fails the test."""
    from localmem.models import llm, registry

    def boom(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("a model was called at read time")

    monkeypatch.setattr(llm, "get_generator", boom)
    monkeypatch.setattr(registry, "generator_for", boom)
    monkeypatch.setattr(llm.LlamaGenerator, "generate_json", boom)


def test_expansion_follows_in_and_out_edges_with_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    no_model_calls(monkeypatch)
    gen = CableFake()
    with expansion_store(tmp_path, n_links=3, temporal_window=0) as store:
        link(store, "old:0", "new:0", "the move explains the commute")  # in-edge of the seed
        link(store, "new:0", "old:1", "later consequence")  # out-edge (direction only matters for why)
        q = "How long is the ferry commute?"
        off = replace(store.settings.retrieval, cable=False)
        base = reconstruct(store, q, 2000)
        got = {t.turn_id: t for t in base.turns}
        assert got[tid(store, "old:0")].reason == "antecedent"
        assert "earlier context of turn" in got[tid(store, "old:0")].why
        assert "the move explains the commute" in got[tid(store, "old:0")].why
        assert got[tid(store, "old:1")].reason == "antecedent"
        assert "follows from turn" in got[tid(store, "old:1")].why
        assert tid(store, "old:2") not in got  # not linked
        assert base.stats["antecedent"] == 2
        store.settings = replace(store.settings, retrieval=off)
        plain = reconstruct(store, q, 2000)
        assert {tid(store, "old:0"), tid(store, "old:1")}.isdisjoint(t.turn_id for t in plain.turns)
    assert gen.calls == []  # reading never calls a model


def test_expansion_respects_tau(tmp_path: Path) -> None:
    with expansion_store(tmp_path, temporal_window=0, cable_tau=0.99) as store:
        link(store, "old:0", "new:0")
        ctx = reconstruct(store, "How long is the ferry commute?", 2000)
        assert all(t.reason != "antecedent" for t in ctx.turns)


def test_expansion_novelty_filter_theta(tmp_path: Path) -> None:
    from localmem.retrieval.cable import expand
    from localmem.retrieval.packing import Candidate
    from localmem.storage.reads.queries import turn_rows

    with expansion_store(tmp_path, temporal_window=0) as store:
        store.write_sessions(
            [session("dup", "2024-03-05T08:00:00", ("Ana", "The ferry commute takes forty minutes each way."))]
        )
        seed, dup, novel = tid(store, "new:0"), tid(store, "dup:0"), tid(store, "old:0")
        link(store, "dup:0", "new:0")
        link(store, "old:0", "new:0")
        tm = store.turn_mirror()
        qvec = store.embedder.embed(["ferry commute forty minutes"])[0]
        visible = np.ones(len(tm.ids), dtype=bool)

        def run(theta: float) -> list[int]:
            store.settings = replace(store.settings, retrieval=replace(store.settings.retrieval, cable_theta=theta))
            rows = turn_rows(store.conn, [seed])
            out, _n = expand(store, qvec, visible, [Candidate(seed, 1.0, "anchor")], rows, 2000)
            return [c.turn_id for c in out if c.reason == "antecedent"]

        assert run(0.9) == [novel]  # the near-duplicate of the seed is not new information
        assert sorted(run(1.01)) == sorted([dup, novel])


def test_expansion_budget_of_five_and_token_budget_replacing(tmp_path: Path) -> None:
    q = "ferry commute forty minutes"
    with expansion_store(
        tmp_path, n_links=8, temporal_window=0, candidates=2, cable_share=1.0, cable_keep_p=1.0
    ) as store:
        for i in range(8):
            link(store, f"old:{i}", "new:0")
        ctx = reconstruct(store, q, 2000)
        added = [t for t in ctx.turns if t.reason == "antecedent"]
        assert len(added) == 5 and ctx.stats["antecedent"] == 5
        # a budget the model-free result fills: antecedent turns must replace, not append
        store.settings = replace(store.settings, retrieval=replace(store.settings.retrieval, cable=False))
        full = reconstruct(store, q, 2000)
        budget = full.tokens + 2
        plain = reconstruct(store, q, budget)
        assert len(plain.turns) == len(full.turns) >= 2
        store.settings = replace(store.settings, retrieval=replace(store.settings.retrieval, cable=True))
        tight = reconstruct(store, q, budget)
        assert tight.tokens <= budget
        added = [t for t in tight.turns if t.reason == "antecedent"]
        assert added, "an antecedent turn must fit by replacing"
        kept = {t.turn_id for t in tight.turns if t.reason != "antecedent"}
        dropped = [t for t in plain.turns if t.turn_id not in kept]
        assert dropped, "replaced, not appended"
        assert tid(store, "new:0") in kept  # the seed that brought them in stays
        assert min(t.score for t in plain.turns) in [d.score for d in dropped]  # the lowest went first


def test_expansion_never_replaces_likely_evidence(tmp_path: Path) -> None:
    q = "ferry commute forty minutes"
    with expansion_store(tmp_path, n_links=8, temporal_window=0, candidates=2, cable_share=1.0) as store:
        for i in range(8):
            link(store, f"old:{i}", "new:0")
        store.settings = replace(store.settings, retrieval=replace(store.settings.retrieval, cable=False))
        full = reconstruct(store, q, 2000)
        budget = full.tokens + 2
        for keep_p in (1.0, 0.0):
            r = replace(store.settings.retrieval, cable=True, cable_keep_p=keep_p)
            store.settings = replace(store.settings, retrieval=r)
            ctx = reconstruct(store, q, budget)
            kept = {t.turn_id for t in ctx.turns}
            lost = [t for t in full.turns if t.turn_id not in kept]
            if keep_p == 1.0:
                assert lost  # any turn may be replaced
            else:
                assert not lost and ctx.stats["antecedent"] == 0  # no turn is below probability 0


def test_expansion_takes_at_most_its_share_of_the_budget(tmp_path: Path) -> None:
    from localmem.util.text import tokens_for_words, words_for_tokens

    with expansion_store(tmp_path, n_links=8, temporal_window=0, cable_share=0.1) as store:
        for i in range(8):
            link(store, f"old:{i}", "new:0")
        ctx = reconstruct(store, "ferry commute forty minutes", 200)
        added = [t for t in ctx.turns if t.reason == "antecedent"]
        words = sum(len(f"{t.speaker}: {t.text}".split()) for t in added)
        assert added and words <= 0.1 * words_for_tokens(200)
        assert len(added) < 5 and tokens_for_words(words) <= 200


def test_expansion_respects_as_of(tmp_path: Path) -> None:
    with expansion_store(tmp_path, temporal_window=0) as store:
        store.write_sessions([session("later", "2025-01-01T00:00:00", ("Ana", "Sold the car, ferry only now."))])
        link(store, "new:0", "later:0")
        ctx = reconstruct(store, "ferry commute forty minutes", 2000, as_of="2024-06-01")
        assert tid(store, "later:0") not in [t.turn_id for t in ctx.turns]
        ctx2 = reconstruct(store, "ferry commute forty minutes", 2000)
        assert tid(store, "later:0") in [t.turn_id for t in ctx2.turns]


@pytest.mark.parametrize("field", ["kb", "kh", "nq", "verify_batch"])
def test_cable_params_must_be_positive(field: str) -> None:
    from localmem.errors import ConfigError

    with pytest.raises(ConfigError, match=field):
        CableParams(**{field: 0})


def test_queries_drop_prompt_echoes_and_copies_of_the_memory() -> None:
    memory = "We always look forward to our family camping trip and roast marshmallows."
    got = antecedent.clean_queries(
        [
            "search queries",
            "Memory:",
            "We always look forward to our family camping trip",  # the memory again
            "  childhood camping   memories ",
            "childhood camping memories",  # duplicate
            "",
            "why they love the outdoors",
            "fourth one",
        ],
        memory,
        3,
    )
    assert got == ["childhood camping memories", "why they love the outdoors", "fourth one"]


# --- the probe and the real model -----------------------------------------------------


def test_cable_probe_runs_end_to_end_and_credits_built_links(tmp_path: Path) -> None:
    from localmem.bench import cable_probe

    data = cable_probe.load()
    antecedents = {c["name"]: c["sessions"][0]["turns"][0][1] for c in data["cases"]}
    later = {c["sessions"][1]["turns"][0][1]: c["name"] for c in data["cases"]}
    # a perfect model: asks for the case's antecedent, accepts only the expected link
    fake = CableFake(
        queries=lambda text: [antecedents[later[text]]] if text in later else ["nothing"],
        accept=lambda cur, old: cur in later and old == antecedents[later[cur]],
    )

    settings = Settings(db=tmp_path / "unused.db", cable=CableParams(kb=3))
    res = cable_probe.run(Enriching(fake), tmp_path, HashEmbedder(), settings, budget=100)  # type: ignore[arg-type]
    assert res["cases"] == len(data["cases"]) == len(res["rows"])
    built = [r for r in res["rows"] if r["link_built"]]
    assert built, "a perfect verifier must get some expected links through"
    assert all(r["edges"] == 1 for r in built)  # it accepts nothing else
    assert res["evidence_with"] >= res["evidence_without"]
    # filler turns are history, not linked: only the case's own turns had antecedent runs
    assert all(r["linked_turns"] <= 4 for r in res["rows"])
    assert "expected links built" in cable_probe.table(res)


def test_smollm2_builds_antecedent_links_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real llama.cpp path: extraction, then CABLE's construction, then reading."""
    pytest.importorskip("llama_cpp")
    from localmem.errors import ModelError
    from localmem.models import llm
    from localmem.storage.layers import queue

    try:
        gen = llm.get_generator(None, n_ctx=2048, n_threads=1)
    except ModelError as exc:
        pytest.skip(str(exc))
    cable = CableParams(enabled=True, kb=1, kh=2, nq=2, verify_batch=4)  # small, to keep the suite fast
    # a reply cut at the token cap fails its turn; the retry (at once here) gets a larger cap
    monkeypatch.setattr(queue, "BACKOFF_S", 0.0)
    settings = Settings(db=tmp_path / "m.db", cable=cable)
    with Store(tmp_path / "m.db", embedder=HashEmbedder(), settings=settings) as store:
        store.write_sessions(story()[:2])
        stats = run_worker(store, gen, until_empty=True)
        n = store.conn.execute("SELECT count(*) FROM turns").fetchone()[0]
        assert stats.turns == n and stats.antecedent_turns == n
        runs = store.conn.execute("SELECT skipped, candidates, accepted, calls FROM antecedent_runs").fetchall()
        assert len(runs) == n and all(c <= cable.nq * cable.kh for _s, c, _a, _k in runs)
        assert sum(k for *_x, k in runs) == stats.antecedent_calls > 0
        for src, dst in store.conn.execute("SELECT src, dst FROM edges WHERE kind = 'antecedent'"):
            assert src in ids_before(store, dst)

        def boom(*_a: Any, **_k: Any) -> Any:
            raise AssertionError("a model was called at read time")

        monkeypatch.setattr(gen, "generate_json", boom)  # the shared instance: restored after the test
        ctx = reconstruct(store, "Why was Ana packing boxes?", 300)
        assert ctx.tokens <= 300 and ctx.turns


def test_verifier_check_counts_true_and_false_acceptances() -> None:
    from localmem.bench import cable_probe

    data = cable_probe.load()
    truth = {c["sessions"][0]["turns"][0][1] for c in data["cases"]}
    picky = CableFake(accept=lambda cur, old: old in truth)
    res = cable_probe.verifier_check(picky, Settings(cable=CableParams(verify_batch=3)))  # type: ignore[arg-type]
    n = len(data["cases"])
    assert (res["true_links_accepted"], res["false_links_accepted"]) == (n, 0)
    assert res["false_links"] == 2 * n and res["calls"] == n  # three pairs per call
    yes = cable_probe.verifier_check(CableFake(), Settings(cable=CableParams(verify_batch=1)))  # type: ignore[arg-type]
    assert yes["false_links_accepted"] == 2 * n and yes["calls"] == 3 * n
    assert "accepted" in cable_probe.verifier_table(yes)


def test_latency_bench_adds_random_earlier_antecedent_edges_once(tmp_path: Path) -> None:
    from localmem.bench.latency import add_antecedent_edges

    with make_store(tmp_path) as store:
        add_antecedent_edges(store, 2)
        edges = store.conn.execute("SELECT src, dst FROM edges WHERE kind = 'antecedent'").fetchall()
        n = store.conn.execute("SELECT count(*) FROM turns").fetchone()[0]
        assert 0 < len(edges) <= 2 * (n - 1) and all(src < dst for src, dst in edges)
        add_antecedent_edges(store, 2)  # a kept store is not densified twice
        assert len(store.conn.execute("SELECT 1 FROM edges WHERE kind = 'antecedent'").fetchall()) == len(edges)
