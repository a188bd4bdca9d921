"""The topic layer: a job per session groups its turns into labelled topics, with the
model or without it, and later turns extend the session's topics incrementally."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from localmem import toolkit
from localmem.config import Settings
from localmem.enrichment.layers import layer_stats
from localmem.enrichment.topics import KIND, enqueue
from localmem.enrichment.worker import run_topics
from localmem.records import SessionIn, TurnIn
from localmem.storage.layers.queue import claim
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder, ScriptedGenerator, session

REPO = Path(__file__).resolve().parents[2]


def _covered(store: Store) -> tuple[int, int]:
    turns = int(store.conn.execute("SELECT count(*) FROM turns").fetchone()[0])
    inside = int(store.conn.execute("SELECT count(DISTINCT turn_id) FROM topic_turns").fetchone()[0])
    return inside, turns


def test_topics_job_is_incremental(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    stats = run_topics(store)  # no model: keyword labels
    assert stats.jobs == 3 and stats.model_calls == 0 and stats.topics_created >= 3
    inside, turns = _covered(store)
    assert inside == turns == 8
    page = toolkit.topics(store, limit=50)
    assert stats.themes is not None  # themes are topics rows too (tests/enrichment/test_themes.py)
    assert page.total == stats.topics_created + stats.themes.themes_created
    assert all(t.label and t.summary for t in page.items)
    bike = toolkit.topics(store, "bike").items
    assert bike and {t.speaker for t in toolkit.topic_turns(store, bike[0].topic_id).items} <= {"Ana", "Ben"}
    assert run_topics(store).jobs == 0  # nothing new, nothing queued
    # a new turn in session s2 extends its topics; only that session gets a job
    more = SessionIn(
        key="s2",
        started_at="2024-02-10T09:00:00",
        source="test",
        turns=(
            *garden_sessions[1].turns,
            TurnIn(text="The bike shop fixed the chain for ten dollars.", speaker="Ben", source_id="s2:3"),
        ),
    )
    store.write_sessions([more])
    before = toolkit.topics(store, limit=50).total
    again = run_topics(store)
    assert again.jobs == 1 and again.turns == 1
    inside, turns = _covered(store)
    assert inside == turns == 9
    assert toolkit.topics(store, limit=50).total in (before, before + 1)
    assert store.conn.execute("SELECT count(*) FROM jobs WHERE kind = ? AND state = 'done'", (KIND,)).fetchone()[0] == 4


def test_topics_with_a_model_and_a_broken_one(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions[:1])
    gen = ScriptedGenerator(lambda _t: {"label": "Garden planting", "summary": "Ana and Ben talk about the garden."})
    stats = run_topics(store, gen)
    assert stats.model_calls >= 1
    assert toolkit.topics(store, "Garden planting").total >= 1
    store.write_sessions(garden_sessions[1:2])
    run_topics(store, ScriptedGenerator(lambda _t: "not json"))  # falls back to keywords
    assert _covered(store)[0] == 6
    assert json.dumps([t.label for t in toolkit.topics(store, limit=50).items])


def test_worker_runs_the_topic_layer_once_extraction_is_done(
    store: Store, garden_sessions: list[SessionIn], scripted: ScriptedGenerator
) -> None:
    from localmem.enrichment.worker import run_worker

    store.write_sessions(garden_sessions)
    run_worker(store, scripted, until_empty=True)
    inside, turns = _covered(store)
    assert inside == turns == 8
    pending = store.conn.execute("SELECT count(*) FROM jobs WHERE kind = ? AND state = 'pending'", (KIND,)).fetchone()
    assert pending[0] == 0


def test_topic_label_failures_are_logged_counted_and_keyword_labelled(
    store: Store, garden_sessions: list[SessionIn], caplog: pytest.LogCaptureFixture
) -> None:
    store.write_sessions(garden_sessions)
    with caplog.at_level(logging.WARNING, logger="localmem.enrichment.topics"):
        stats = run_topics(store, ScriptedGenerator(lambda _t: "sorry, I cannot do JSON"), themes=False)
    assert stats.model_calls >= 3 and stats.label_failures == stats.model_calls
    warned = [r.getMessage() for r in caplog.records if "topic-label" in r.getMessage()]
    assert len(warned) == stats.model_calls and "not JSON" in warned[0]
    assert all(t.label for t in toolkit.topics(store, limit=50).items)  # keyword labels
    calls = layer_stats(store)["model_calls"]["topic-label"]
    assert (calls["parsed"], calls["unparsed"]) == (0, stats.model_calls)
    rows = store.conn.execute("SELECT purpose, status, reply FROM model_calls").fetchall()
    assert rows and all(r == ("topic-label", "not JSON", "sorry, I cannot do JSON") for r in rows)


def test_topics_jobs_go_through_claim_and_lease(store: Store, garden_sessions: list[SessionIn]) -> None:
    """A topics job another worker holds is neither run nor finished here; one whose
    session has a job running elsewhere waits for it."""
    store.write_sessions(garden_sessions)
    enqueue(store)
    held = claim(store.conn, 1, kind=KIND, batch=False, exclusive=True, owner="elsewhere:1")
    assert len(held) == 1
    stats = run_topics(store, themes=False)
    assert stats.jobs == 2  # the held one is not ours
    state = store.conn.execute("SELECT state, locked_by FROM jobs WHERE id = ?", (held[0].id,)).fetchone()
    assert state == ("running", "elsewhere:1")
    # a newer job of the held session is not claimed while that one runs
    sid = store.conn.execute("SELECT session_id FROM turns WHERE id = ?", (held[0].turn_id,)).fetchone()[0]
    more = SessionIn(key=garden_sessions[0].key, started_at=garden_sessions[0].started_at, source="test",
                     turns=(*garden_sessions[0].turns, TurnIn(text="The basil grew too.", speaker="Ana", source_id="s1:9")))  # fmt: skip
    store.write_sessions([more])
    assert enqueue(store) >= 1
    assert claim(store.conn, 1, kind=KIND, batch=False, exclusive=True) == []
    assert store.conn.execute("SELECT session_id FROM turns WHERE source_id = 's1:9'").fetchone()[0] == sid


TOPIC_WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    from localmem.config import Settings
    from localmem.enrichment.worker import run_topics
    from localmem.storage.write.store import Store
    from tests.helpers.fakes import HashEmbedder, ScriptedGenerator

    def slow(turns):
        time.sleep(0.15)
        return {{"label": "label %d" % os.getpid(), "summary": "a summary"}}

    store = Store({db!r}, embedder=HashEmbedder(), settings=Settings(db={db!r}))
    while not os.path.exists({go!r}):
        time.sleep(0.01)
    stats = run_topics(store, ScriptedGenerator(slow), themes=False)
    print(json.dumps({{"jobs": stats.jobs, "turns": stats.turns, "created": stats.topics_created}}))
    """
)


def many_sessions(n: int = 8) -> list[SessionIn]:
    topics = ["garden tomatoes basil", "bike chain repair", "ferry commute office", "piano lessons practice"]
    return [
        session(
            f"s{i}",
            f"2024-0{1 + i % 9}-0{1 + i % 8}T10:00:00",
            *[
                ("Ana" if j % 2 == 0 else "Ben", f"Talk {i}.{j} about {topics[(i + j // 2) % 4]} today.")
                for j in range(4)
            ],
        )
        for i in range(n)
    ]


def test_two_worker_processes_never_do_a_topics_job_twice(tmp_path: Path) -> None:
    """Two real processes run the topic layer on one store at once: every job is done
    by exactly one of them, every turn is in exactly one session topic, and there are
    exactly as many topics as one process alone makes."""
    db, go = tmp_path / "mem.db", tmp_path / "go"
    with Store(db, embedder=HashEmbedder(), settings=Settings(db=db)) as s:
        s.write_sessions(many_sessions())
    with Store(tmp_path / "ref.db", embedder=HashEmbedder(), settings=Settings(db=tmp_path / "ref.db")) as ref:
        ref.write_sessions(many_sessions())
        run_topics(ref, themes=False)
        expected = ref.conn.execute("SELECT count(*) FROM topics WHERE kind = 'session'").fetchone()[0]
    script = tmp_path / "worker.py"
    script.write_text(TOPIC_WORKER.format(db=str(db), go=str(go)))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    time.sleep(1.0)  # both import and open the store, then start together
    go.write_text("go")
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _out, err in outs]
    done = [json.loads(out.strip().splitlines()[-1]) for out, _err in outs]
    with Store(db, embedder=HashEmbedder(), settings=Settings(db=db)) as s:
        conn = s.conn
        finished = conn.execute("SELECT count(*) FROM jobs WHERE kind = ? AND state = 'done'", (KIND,)).fetchone()[0]
        assert sum(d["jobs"] for d in done) == finished == 8  # no job done twice
        assert all(d["jobs"] > 0 for d in done), done  # both really worked
        twice = conn.execute(
            "SELECT tt.turn_id FROM topic_turns tt JOIN topics p ON p.id = tt.topic_id AND p.kind = 'session' "
            "GROUP BY tt.turn_id HAVING count(*) > 1"
        ).fetchall()
        assert twice == []
        assert _covered(s) == (32, 32)
        topics = conn.execute("SELECT count(*) FROM topics WHERE kind = 'session'").fetchone()[0]
        assert topics == expected == sum(d["created"] for d in done)
        assert (
            conn.execute("SELECT count(*) FROM topics WHERE id NOT IN (SELECT topic_id FROM topic_turns)").fetchone()[0]
            == 0
        )
