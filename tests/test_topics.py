"""The topic layer: a job per session groups its turns into labelled topics, with the
model or without it, and later turns extend the session's topics incrementally."""

from __future__ import annotations

import json

from localmem import toolkit
from localmem.enrichment.topics import KIND
from localmem.enrichment.worker import run_topics
from localmem.records import SessionIn, TurnIn
from localmem.storage.store import Store

from .conftest import ScriptedGenerator


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
    assert stats.themes is not None  # themes are topics rows too (tests/test_themes.py)
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
