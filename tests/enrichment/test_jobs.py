"""The durable queue and the worker, with a scripted generator: what ends up in the
store (cues, tags, types, index rows, edges), exactly-once enrichment, failures and
parking, and a worker process killed with SIGKILL mid-batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from localmem.config import Settings
from localmem.enrichment.layers import layer_stats
from localmem.enrichment.worker import run_worker
from localmem.records import SessionIn
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.layers import queue as jobs
from localmem.storage.write.jobs import EXTRACT, enqueue
from localmem.storage.write.store import Store
from localmem.util.clock import now_iso
from tests.helpers.fakes import HashEmbedder, ScriptedGenerator, session

REPO = Path(__file__).resolve().parents[2]


def story(n: int = 12) -> SessionIn:
    lines = []
    for i in range(n):
        who = "Ana" if i % 2 == 0 else "Ben"
        lines.append((who, f"On trip {i} I visited Lisbon with Oscar{i} by the river."))
    return session("trip", "2024-05-08T10:00:00", *lines)


def extracted(store: Store) -> list[tuple[int, str, str]]:
    return [
        (int(a), str(b), str(c))
        for a, b, c in store.conn.execute(
            "SELECT turn_id, kind, text FROM cues WHERE kind != 'statement' ORDER BY turn_id, id"
        )
    ]


def test_write_queues_one_job_per_new_turn(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    store.write_sessions(garden_sessions)  # nothing new, nothing queued twice
    assert jobs.counts(store.conn) == {"pending": 8, "running": 0, "done": 0, "parked": 0}
    store.conn.execute("DELETE FROM jobs")
    assert jobs.enqueue_missing(store.conn) == 8
    turn_ids = [int(r[0]) for r in store.conn.execute("SELECT id FROM turns")]
    assert enqueue(store.conn, EXTRACT, turn_ids) == 0  # counts the jobs queued, not the turns offered
    assert enqueue(store.conn, "topics", turn_ids[:2] * 2) == 2


def test_worker_stores_grounded_cues_tags_types_and_index_rows(store: Store) -> None:
    store.write_sessions([story(4)])
    gen = ScriptedGenerator()
    stats = run_worker(store, gen, until_empty=True, batch=6)
    assert stats.turns == 4 and stats.calls == 1  # one call for the four turns of the session
    assert jobs.counts(store.conn)["done"] == 4
    cues = extracted(store)
    assert ("keyword" in {k for _, k, _ in cues}) and not any(t == "Atlantis" for _, _, t in cues)
    assert {t for _, _, t in cues} >= {"Lisbon", "Oscar0"}
    # every extracted cue has a vector, an FTS row, a span inside its turn, and tags
    n = len(cues)
    assert store.conn.execute("SELECT count(*) FROM cue_vec v JOIN cues c ON c.id = v.cue_id "
                              "WHERE c.kind != 'statement'").fetchone()[0] == n  # fmt: skip
    assert (
        store.conn.execute(
            "SELECT count(*) FROM extracted_cues_fts WHERE extracted_cues_fts MATCH 'lisbon'"
        ).fetchone()[0]
        >= 4
    )
    for s, e, text in store.conn.execute(
        "SELECT c.span_start, c.span_end, t.text FROM cues c JOIN turns t ON t.id = c.turn_id"
    ):
        assert 0 <= s < e <= len(text)
    assert store.conn.execute("SELECT count(*) FROM cue_tags").fetchone()[0] >= n
    e = layer_stats(store)
    assert e["enriched_turns"] == 4 and e["enriched_pct"] == 100.0 and e["memory_types"]["event"] == 4
    assert e["cues_rejected"] == 4 and e["cues_kept"] == n  # one invented keyword per turn
    # the cue mirror sees the new cues, and a query naming one finds its turn
    assert len(store.mirror("cue").ids) == store.conn.execute("SELECT count(*) FROM cues").fetchone()[0]
    ctx = reconstruct(store, "Who is Oscar2?", budget_tokens=60)
    assert any("Oscar2" in t.text for t in ctx.turns)


def test_each_turn_is_enriched_exactly_once(store: Store) -> None:
    store.write_sessions([story(4)])
    gen = ScriptedGenerator()
    first = jobs.claim(store.conn, 6, owner="elsewhere:1", lease_s=-1)  # a claim that has already lapsed
    assert len(first) == 4
    run_worker(store, gen, until_empty=True)  # takes them over
    before = extracted(store)
    from localmem.enrichment.enrich import enrich_jobs

    # the first owner comes back late with its results: they are dropped
    assert enrich_jobs(store, gen, first) == 0
    store.conn.execute("UPDATE jobs SET state = 'pending'")
    run_worker(store, gen, until_empty=True)  # a re-queued turn is not written twice
    assert extracted(store) == before
    assert store.conn.execute("SELECT count(*) FROM turn_enrichment").fetchone()[0] == 4


def test_failures_back_off_then_park_and_stats_show_it(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from localmem.errors import ModelError

    store.write_sessions([session("s", "2024-01-01T10:00:00", ("Ana", "I met Oscar in Rome."),
                                  ("Ben", "POISON turn about Paris."), ("Ana", "Then Oscar went to Oslo."))])  # fmt: skip

    def script(turns: list[tuple[int, str, str]]) -> dict[str, object]:
        if any("POISON" in t for _, _, t in turns):
            raise ModelError("the model choked")
        return ScriptedGenerator.keywords_from_capitals(turns)

    monkeypatch.setattr(jobs, "BACKOFF_S", 0.0)
    stats = run_worker(store, ScriptedGenerator(script), until_empty=True, max_attempts=2)
    assert stats.turns == 2 and stats.parked == 1
    assert jobs.counts(store.conn) == {"pending": 0, "running": 0, "done": 2, "parked": 1}
    (p,) = layer_stats(store)["parked"]
    assert p["attempts"] == 2 and "the model choked" in str(p["error"])
    assert jobs.retry_parked(store.conn) == 1
    assert jobs.counts(store.conn)["pending"] == 1


def test_backoff_delays_the_retry(store: Store) -> None:
    from tests.helpers.fakes import failing_script

    store.write_sessions([session("s", "2024-01-01T10:00:00", ("Ana", "I met Oscar in Rome."))])
    stats = run_worker(store, ScriptedGenerator(failing_script), until_empty=True)
    assert stats.failed == 1 and jobs.counts(store.conn)["pending"] == 1
    assert jobs.claim(store.conn, 5) == []  # not before its back-off


WORKER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {repo!r})
    from localmem.config import Settings
    from localmem.enrichment.worker import run_worker
    from localmem.storage.write.store import Store
    from tests.helpers.fakes import HashEmbedder, ScriptedGenerator

    def slow(turns):
        time.sleep(0.4)
        return ScriptedGenerator.keywords_from_capitals(turns)

    store = Store({db!r}, embedder=HashEmbedder(), settings=Settings(db={db!r}))
    run_worker(store, ScriptedGenerator(slow), until_empty=True, batch=3)
    """
)


def test_worker_killed_mid_batch_loses_nothing_and_enriches_once(tmp_path: Path) -> None:
    db = tmp_path / "mem.db"
    settings = Settings(db=db)
    with Store(db, embedder=HashEmbedder(), settings=settings) as s:
        s.write_sessions([story(12)])
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(repo=str(REPO), db=str(db)))
    proc = subprocess.Popen([sys.executable, str(script)], env={**os.environ, "PYTHONPATH": str(REPO)})
    store = Store(db, embedder=HashEmbedder(), settings=settings)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            c = jobs.counts(store.conn)
            if c["done"] >= 3 and c["running"] > 0:
                break
            assert proc.poll() is None, "the worker ended before it could be killed"
            time.sleep(0.05)
        else:
            pytest.fail("the worker made no progress")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert jobs.counts(store.conn)["running"] > 0  # claimed by a process that is gone
    stats = run_worker(store, ScriptedGenerator(), until_empty=True)
    assert stats.turns > 0
    assert jobs.counts(store.conn) == {"pending": 0, "running": 0, "done": 12, "parked": 0}
    assert store.conn.execute("SELECT count(*) FROM turn_enrichment").fetchone()[0] == 12
    per_turn = store.conn.execute(
        "SELECT count(*) FROM cues WHERE kind = 'keyword' GROUP BY turn_id ORDER BY turn_id"
    ).fetchall()
    assert [r[0] for r in per_turn] == [2] * 12  # Lisbon and OscarN: once each
    store.close()


def test_bench_extraction_reports_the_issue_keys(tmp_path: Path) -> None:
    import json

    from localmem.bench import extraction
    from tests.helpers.benchdata import locomo_doc

    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(locomo_doc()))
    res = extraction.run(data, ScriptedGenerator(), tmp_path, HashEmbedder(), Settings(db=tmp_path / "x.db"), limit=2)
    for key in ("turns", "turns_per_s", "model_calls_per_turn", "prompt_tokens_per_turn",
                "generated_tokens_per_turn", "cues_per_turn", "rejected_cue_rate"):  # fmt: skip
        assert isinstance(res[key], int | float), key
    assert res["turns"] == 2 and res["model_calls_per_turn"] == 0.5  # two turns of one session, one call
    assert res["cues_per_turn"] == 1.0 and res["rejected_cue_rate"] == 0.5  # "Rex", "Look" kept; "Atlantis" not
    assert "turns_per_s" in extraction.table(res)


def test_a_model_that_cannot_load_claims_nothing(store: Store) -> None:
    from localmem.errors import ModelError

    class Broken(ScriptedGenerator):
        def load(self) -> None:
            raise ModelError("llama-cpp-python is not installed")

    store.write_sessions([story(2)])
    with pytest.raises(ModelError):
        run_worker(store, Broken(), until_empty=True)
    assert jobs.counts(store.conn) == {"pending": 2, "running": 0, "done": 0, "parked": 0}


def test_idle_worker_runs_a_theme_pass_left_over(tmp_path: Path) -> None:
    """Every turn is in a topic but the theme pass still has work (it never ran, or a
    forget left a theme to relabel): the idle worker runs it, and stats count it."""
    from localmem.enrichment.worker import run_topics
    from tests.helpers.themes import ConceptEmbedder, six_sessions

    with Store(tmp_path / "t.db", embedder=ConceptEmbedder(), settings=Settings(db=tmp_path / "t.db")) as store:
        store.write_sessions(six_sessions())
        run_topics(store, themes=False)
        run_worker(store, ScriptedGenerator(), until_empty=True)
        assert (store.stats()["topics"], store.stats()["themes"]) == (6, 2)
        theme = store.conn.execute("SELECT id FROM topics WHERE kind = 'theme' ORDER BY id").fetchone()[0]
        one = store.conn.execute("SELECT turn_id FROM topic_turns WHERE topic_id = ? LIMIT 1", (theme,)).fetchone()
        store.forget([one[0]])
        assert store.conn.execute("SELECT themed FROM topics WHERE id = ?", (theme,)).fetchone()[0] == 0
        run_worker(store, ScriptedGenerator(), until_empty=True)
        assert store.conn.execute("SELECT count(*) FROM topics WHERE themed = 0").fetchone()[0] == 0


def test_watch_runs_the_worker_only_when_a_model_is_configured(tmp_path: Path) -> None:
    import threading

    from localmem.cli import _watch_worker

    assert _watch_worker(Settings(db=tmp_path / "a.db")) is None
    missing = Settings(db=tmp_path / "a.db", model=str(tmp_path / "nope.gguf"))
    from localmem.errors import ModelError

    with pytest.raises(ModelError, match="model file not found"):
        _watch_worker(missing)
    pytest.importorskip("llama_cpp")
    from localmem.models.llm import embedded_model_path

    loop = _watch_worker(Settings(db=tmp_path / "a.db", model=str(embedded_model_path())))
    assert callable(loop)
    stop = threading.Event()
    stop.set()  # opens the store, loads the model, sees the stop and returns
    loop(stop)


def test_extracted_cues_never_change_the_model_free_scores(tmp_path: Path, garden_sessions: list[SessionIn]) -> None:
    """ "off": the same context as a store never enriched; "fill": extra candidates
    only, every turn both pools share keeps its score; "all": cues are scored too."""
    from dataclasses import replace

    from localmem.config import RetrievalParams

    plain = Store(tmp_path / "plain.db", embedder=HashEmbedder(), settings=Settings(db=tmp_path / "plain.db"))
    rich = Store(tmp_path / "rich.db", embedder=HashEmbedder(), settings=Settings(db=tmp_path / "rich.db"))
    for s in (plain, rich):
        s.write_sessions(garden_sessions)
    run_worker(rich, ScriptedGenerator(), until_empty=True)
    assert rich.conn.execute("SELECT count(*) FROM cues WHERE kind = 'keyword'").fetchone()[0] > 0

    def ask(s: Store, mode: str, q: str, budget: int) -> dict[str, float]:
        s.settings = replace(s.settings, retrieval=RetrievalParams(extracted_cues=mode))
        return {t.text: t.score for t in reconstruct(s, q, budget_tokens=budget).turns}

    for q in ("What did Ana plant next to the tomatoes?", "Where did Ben take the bike?", "Main Street"):
        for budget in (20, 40, 80, 4000):
            base = ask(plain, "fill", q, budget)
            assert ask(rich, "off", q, budget) == base
            wider = ask(rich, "fill", q, budget)
            assert all(wider[t] == base[t] for t in base)  # nothing model-free is displaced
        ask(rich, "all", q, 80)  # runs
    with pytest.raises(Exception, match="extracted_cues"):
        RetrievalParams(extracted_cues="some")
    plain.close()
    rich.close()


# --- model failure is failure (issue 12 item 2) ---------------------------------------


def test_a_model_that_cannot_do_json_enriches_nothing_and_parks(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each bad reply is a failed attempt: back-off, retry, parked after the limit,
    counted per purpose; no turn is ever marked enriched."""
    store.write_sessions([story(4)])
    gen = ScriptedGenerator(lambda _t: "sorry, I cannot do JSON")
    stats = run_worker(store, gen, until_empty=True, max_attempts=2)
    assert jobs.counts(store.conn) == {"pending": 4, "running": 0, "done": 0, "parked": 0}
    assert store.conn.execute("SELECT count(*) FROM turn_enrichment").fetchone()[0] == 0
    assert stats.failed == 4 and stats.turns == 0 and stats.unparsed_calls == 1
    waits = store.conn.execute("SELECT not_before, last_error FROM jobs WHERE kind = 'extract'").fetchall()
    assert all(nb > now_iso() and "not JSON" in err and "sorry" in err for nb, err in waits)
    assert jobs.claim(store.conn, 5) == []  # not before the back-off
    monkeypatch.setattr(jobs, "BACKOFF_S", 0.0)
    store.conn.execute("UPDATE jobs SET not_before = NULL")
    again = run_worker(store, gen, until_empty=True, max_attempts=2)
    assert again.parked == 4 and again.calls == 4  # each retried alone
    assert jobs.counts(store.conn) == {"pending": 0, "running": 0, "done": 0, "parked": 4}
    e = layer_stats(store)
    assert e["enriched_turns"] == 0 and e["enriched_pct"] == 0.0
    assert e["model_calls"]["extract"]["parsed"] == 0 and e["model_calls"]["extract"]["unparsed"] == 5
    assert all("not JSON" in str(p["error"]) for p in e["parked"])
    assert e["recent_reply_failures"][0]["status"] == "not JSON"


def test_a_reply_missing_one_turn_fails_that_turn_only(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    store.write_sessions([story(3)])

    def skip_m2(turns: list[tuple[int, str, str]]) -> dict[str, object]:
        got = ScriptedGenerator.keywords_from_capitals(turns)
        got.pop("m2", None)
        return got

    stats = run_worker(store, ScriptedGenerator(skip_m2), until_empty=True)
    ids = [r[0] for r in store.conn.execute("SELECT id FROM turns ORDER BY ord")]
    enriched = [r[0] for r in store.conn.execute("SELECT turn_id FROM turn_enrichment ORDER BY turn_id")]
    assert enriched == [ids[0], ids[2]] and stats.turns == 2 and stats.failed == 1
    state = store.conn.execute("SELECT state, attempts, last_error FROM jobs WHERE turn_id = ? AND kind = 'extract'",
                               (ids[1],)).fetchone()  # fmt: skip
    assert state == ("pending", 1, "missing required key 'm2'")
    monkeypatch.setattr(jobs, "BACKOFF_S", 0.0)
    store.conn.execute("UPDATE jobs SET not_before = NULL")
    later = run_worker(store, ScriptedGenerator(), until_empty=True)
    assert later.turns == 1 and jobs.counts(store.conn)["done"] == 3
    totals = layer_stats(store)["model_calls"]["extract"]
    assert (totals["parsed"], totals["unparsed"]) == (1, 1)


def test_a_reply_cut_at_the_cap_keeps_the_finished_turns(store: Store) -> None:
    store.write_sessions([story(2)])
    full = json.dumps(ScriptedGenerator.keywords_from_capitals([(1, "Ana", "I saw Lisbon"), (2, "Ben", "I saw Porto")]))
    stats = run_worker(store, ScriptedGenerator(lambda _t: full[: full.index('"m2"') + 12]), until_empty=True)
    assert stats.turns == 1 and stats.failed == 1
    errors = [
        r[0] for r in store.conn.execute("SELECT last_error FROM jobs WHERE state = 'pending' AND kind = 'extract'")
    ]
    assert errors == ["truncated"]


def test_cli_stats_shows_refused_replies_per_purpose(tmp_path: Path) -> None:
    from localmem.models.registry import embedder_for

    settings = Settings(db=tmp_path / "m.db")
    with Store(settings.db, embedder=embedder_for(settings), settings=settings) as s:
        s.write_sessions([story(2)])
        run_worker(s, ScriptedGenerator(lambda _t: "sorry, I cannot do JSON"), until_empty=True)
    cmd = [sys.executable, "-m", "localmem", "--db", str(settings.db), "stats"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
    assert "enrichment    0 of 2 turns (0.0%)" in out
    assert "extract 0 parsed / 1 unparsed" in out and "topic-label 0 parsed / 1 unparsed" in out
    assert "refused extract reply" in out and "not JSON: 'sorry, I cannot do JSON'" in out
    full = json.loads(subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=300, check=True).stdout)
    assert full["enrichment"]["model_calls"]["extract"]["unparsed"] == 1
    assert full["enrichment"]["jobs"]["pending"] == 2


def test_drain_waits_out_the_back_off_until_done_or_parked(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """``localmem enrich`` drains: a turn whose reply was cut is retried after its
    back-off (alone, with a larger cap) instead of being left pending."""
    monkeypatch.setattr(jobs, "BACKOFF_S", 0.2)
    store.write_sessions([story(3)])
    caps: list[int] = []

    class CutOnce(ScriptedGenerator):
        def generate_json(self, messages: Any, schema: Any, *, max_tokens: int, temperature: float) -> Any:
            out = super().generate_json(messages, schema, max_tokens=max_tokens, temperature=temperature)
            if "m1" not in schema.get("properties", {}):
                return out  # a topic label
            caps.append(max_tokens)
            if len(caps) == 1:
                cut = out.text[: out.text.index('"m3"')].rstrip(", ")
                return type(out)(cut, out.prompt_tokens, out.generated_tokens)  # cut before m3
            return out

    stats = run_worker(store, CutOnce(), until_empty=True, drain=True)
    assert stats.turns == 3 and stats.failed == 1 and jobs.counts(store.conn)["done"] == 3
    assert caps == [316, 216]  # the retry, alone, at twice the cap
    store.write_sessions([session("s2", "2024-06-01T10:00:00", ("Ana", "I met Oscar in Rome."))])
    bad = run_worker(store, ScriptedGenerator(lambda _t: ""), until_empty=True, drain=True, max_attempts=2)
    assert bad.failed == 2 and bad.parked == 1
    assert jobs.counts(store.conn) == {"pending": 0, "running": 0, "done": 3, "parked": 1}
