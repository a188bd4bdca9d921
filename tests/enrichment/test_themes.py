"""Cross-session themes: recurring session topics are grouped and labelled, unrelated
ones are not; later sessions join a theme incrementally; the model is optional and its
failures cost labels only; forgetting turns leaves no orphan theme."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localmem import toolkit
from localmem.config import Settings
from localmem.enrichment import themes
from localmem.enrichment.layers import layer_stats
from localmem.enrichment.themes import run_themes
from localmem.enrichment.worker import run_topics
from localmem.errors import ModelError
from localmem.storage.engine import db
from localmem.storage.write.store import Store
from tests.helpers.fakes import ScriptedGenerator, session
from tests.helpers.themes import GARDEN_FROST, ConceptEmbedder, six_sessions, theme_of, theme_sessions


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "mem.db", embedder=ConceptEmbedder(), settings=Settings(db=tmp_path / "mem.db"))
    yield s
    s.close()


def theme_rows(store: Store) -> dict[int, tuple[str, str, str]]:
    rows = store.conn.execute("SELECT id, label, summary, updated_at FROM topics WHERE kind = 'theme'")
    return {int(r[0]): (str(r[1]), str(r[2]), str(r[3])) for r in rows}


def assert_consistent(store: Store) -> None:
    """No topic or theme without turns; a theme's turns are exactly its topics' turns,
    and its topics span at least two sessions."""
    empty = store.conn.execute("SELECT count(*) FROM topics WHERE id NOT IN (SELECT topic_id FROM topic_turns)")
    assert empty.fetchone()[0] == 0
    for theme in theme_rows(store):
        mine = {int(r[0]) for r in store.conn.execute("SELECT turn_id FROM topic_turns WHERE topic_id = ?", (theme,))}
        grouped = {
            int(r[0])
            for r in store.conn.execute(
                "SELECT tt.turn_id FROM theme_topics x JOIN topic_turns tt ON tt.topic_id = x.topic_id "
                "WHERE x.theme_id = ?",
                (theme,),
            )
        }
        assert mine == grouped
        assert len(theme_sessions(store)[theme]) >= 2


def test_recurring_topics_become_themes_and_unrelated_ones_do_not(store: Store) -> None:
    store.write_sessions(six_sessions())
    stats = run_topics(store)  # no model: keyword labels
    assert stats.themes is not None and stats.themes.themes_created == 2 and stats.themes.model_calls == 0
    assert sorted(map(sorted, theme_sessions(store).values())) == [["s1", "s5"], ["s2", "s6"]]
    garden = theme_of(store, {"s1", "s5"})
    label, summary, _ = theme_rows(store)[garden]
    assert "garden" in label and "2 sessions" in summary and "2024-01-05" in summary
    assert_consistent(store)
    # job and dinner recur nowhere: their topics are in no theme
    loose = store.conn.execute(
        "SELECT count(*) FROM topics WHERE kind = 'session' AND id NOT IN (SELECT topic_id FROM theme_topics)"
    ).fetchone()[0]
    assert loose == 2
    # themes are topics: the topic tools list them and reach their turns
    page = toolkit.topics(store, limit=50)
    assert page.total == stats.topics_created + 2
    turns = toolkit.topic_turns(store, garden, limit=50).items
    assert len(turns) == 5 and all("garden" in t.text.lower() for t in turns)
    assert layer_stats(store)["themes"] == 2
    again = run_topics(store)
    assert again.jobs == 0 and again.themes is not None and again.themes.topics_placed == 0


def test_a_new_session_joins_its_theme_and_only_that_theme_is_relabelled(store: Store) -> None:
    def script(lines: list[tuple[int, str, str]]) -> dict[str, Any]:
        if not lines:  # a session topic's prompt: turns, not numbered topics
            return {"label": "a chat", "summary": "Ana and Ben chat."}
        return {"label": f"theme of {len(lines)}", "summary": " | ".join(text for _i, _d, text in lines)}

    gen = ScriptedGenerator(script)
    store.write_sessions(six_sessions())
    first = run_topics(store, gen)
    assert first.themes is not None and first.themes.model_calls == 2
    before = theme_rows(store)
    garden, bike = theme_of(store, {"s1", "s5"}), theme_of(store, {"s2", "s6"})
    assert before[garden][0] == "theme of 2"

    gen.calls.clear()
    store.write_sessions([session("s7", "2024-06-10T09:00:00", *GARDEN_FROST)])
    later = run_topics(store, gen)
    assert later.themes is not None
    assert (later.themes.topics_joined, later.themes.themes_created, later.themes.themes_relabelled) == (1, 0, 1)
    assert [len(c) for c in gen.calls if c] == [3]  # one theme call, about three topics
    after = theme_rows(store)
    assert set(after) == {garden, bike}
    assert after[garden][0] == "theme of 3" and after[bike] == before[bike]
    assert theme_sessions(store)[garden] == {"s1", "s5", "s7"}
    assert_consistent(store)

    # a session topic that grows stays in its theme, and its new turn joins the theme
    grown = session("s7", "2024-06-10T09:00:00", *GARDEN_FROST, ("Ana", "More compost for the garden basil."))
    store.write_sessions([grown])
    last = run_topics(store)
    assert last.themes is not None and last.themes.themes_relabelled == 1 and last.themes.topics_joined == 0
    assert toolkit.topic_turns(store, garden, limit=50).total == 8
    assert_consistent(store)


def test_model_failures_cost_labels_not_themes(store: Store) -> None:
    def broken(lines: list[tuple[int, str, str]]) -> str:
        if lines:
            raise ModelError("scripted failure")
        return "not json"

    store.write_sessions(six_sessions())
    stats = run_topics(store, ScriptedGenerator(broken))
    assert stats.themes is not None and stats.themes.themes_created == 2 and stats.themes.model_calls == 2
    assert stats.themes.label_failures == 2 and stats.label_failures == stats.model_calls > 0  # counted
    assert all(label for label, _s, _u in theme_rows(store).values())  # keyword labels
    assert_consistent(store)


def test_theme_label_failures_are_logged_and_counted(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    def labels(lines: list[tuple[int, str, str]]) -> str | dict[str, str]:
        if lines:  # a theme's prompt: one numbered line per topic
            return '{"label": "cut off'
        return {"label": "a topic", "summary": "a topic summary"}

    store.write_sessions(six_sessions())
    with caplog.at_level("WARNING"):
        stats = run_topics(store, ScriptedGenerator(labels))
    assert stats.themes is not None and stats.themes.label_failures == stats.themes.model_calls == 2
    assert stats.label_failures == 0
    assert len([r for r in caplog.records if "theme-label" in r.getMessage() and "truncated" in r.getMessage()]) == 2
    calls = layer_stats(store)["model_calls"]
    assert (calls["theme-label"]["parsed"], calls["theme-label"]["unparsed"]) == (0, 2)
    assert calls["topic-label"]["parsed"] == stats.model_calls and calls["topic-label"]["unparsed"] == 0
    rows = store.conn.execute("SELECT status, reply FROM model_calls WHERE purpose = 'theme-label'").fetchall()
    assert rows == [("truncated", '{"label": "cut off')] * 2
    assert all(label != "cut off" for label, _s, _u in theme_rows(store).values())  # keyword labels


def test_a_pass_that_dies_writes_nothing_and_the_next_one_does_it_all(store: Store) -> None:
    def crash(lines: list[tuple[int, str, str]]) -> str:
        raise RuntimeError("killed mid-pass")  # not a model error: the pass itself dies

    store.write_sessions(six_sessions())
    run_topics(store, themes=False)
    with pytest.raises(RuntimeError):
        run_themes(store, ScriptedGenerator(crash))
    assert theme_rows(store) == {}
    assert store.conn.execute("SELECT count(*) FROM topics WHERE themed = 0").fetchone()[0] == 6
    assert run_themes(store).themes_created == 2
    assert_consistent(store)


def test_a_pass_that_meets_a_concurrent_change_writes_nothing(store: Store, tmp_path: Path) -> None:
    store.write_sessions(six_sessions())
    run_topics(store, themes=False)

    def meddle(lines: list[tuple[int, str, str]]) -> dict[str, str]:
        other = db.connect(tmp_path / "mem.db")  # another process grows a topic meanwhile
        other.execute("UPDATE topics SET updated_at = '2030-01-01T00:00:00' WHERE id = 1")
        other.close()
        return {"label": "x", "summary": "y"}

    stats = run_themes(store, ScriptedGenerator(meddle))
    assert stats.conflicts == 1 and theme_rows(store) == {}
    assert run_themes(store).themes_created == 2


def test_forgetting_turns_leaves_no_orphan_theme(store: Store) -> None:
    store.write_sessions(six_sessions())
    run_topics(store)
    garden = theme_of(store, {"s1", "s5"})
    # one turn of a theme: the theme keeps its sessions and is labelled again
    one = store.conn.execute(
        "SELECT t.id FROM turns t JOIN sessions s ON s.id = t.session_id WHERE s.key = 's1' AND t.ord = 0"
    ).fetchone()[0]
    store.forget([one])
    assert run_themes(store).themes_relabelled == 1
    assert toolkit.topic_turns(store, garden, limit=50).total == 4
    # a whole session of a two-session theme: no longer recurring, dissolved
    store.forget(session="s5")
    assert run_themes(store).themes_dissolved == 1
    assert garden not in theme_rows(store)
    # both sessions of a theme: it goes with its last turn, before any pass
    store.forget(session="s2")
    store.forget(session="s6")
    assert theme_rows(store) == {}
    assert store.conn.execute("SELECT count(*) FROM theme_topics").fetchone()[0] == 0
    assert_consistent(store)
    assert run_themes(store).themes_created == 0


def test_shared_rare_keywords_tip_a_near_pair_into_a_theme(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    store.write_sessions(six_sessions()[:5])  # garden twice, bike, job, dinner once
    run_topics(store, themes=False)
    plan = themes._Pass(store, themes._read(store.conn))
    a, b = (int(r[0]) for r in store.conn.execute("SELECT id FROM topics ORDER BY id").fetchall()[::4])
    near = float(plan.centroid[a] @ plan.centroid[b])
    assert plan.keywords(a) & plan.keywords(b)  # "garden", "tomatoes", "basil" are in two topics of five
    monkeypatch.setattr(themes, "SIMILAR", near + 0.05)  # just out of reach by the vectors alone
    monkeypatch.setattr(themes, "KEYWORD_BONUS", 0.0)
    assert run_themes(store).themes_created == 0
    store.conn.execute("UPDATE topics SET themed = 0")
    monkeypatch.setattr(themes, "KEYWORD_BONUS", 0.1)
    assert run_themes(store).themes_created == 1


def test_existing_topics_migrate_as_session_topics(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "old.db")
    db.migrate(conn, db.migrations()[:5])
    conn.execute("INSERT INTO sessions(id, source, key) VALUES (1, 'test', 's1')")
    conn.execute("INSERT INTO turns(id, session_id, ord, text, hash, words) VALUES (1, 1, 0, 'hello', 'h1', 1)")
    conn.execute("INSERT INTO topics(id, label) VALUES (1, 'greeting'), (2, 'forgotten before')")
    conn.execute("INSERT INTO topic_turns(topic_id, turn_id) VALUES (1, 1)")
    assert db.migrate(conn, db.migrations()[:6]) == [6]
    rows = conn.execute("SELECT id, kind, themed FROM topics").fetchall()
    assert rows == [(1, "session", 0)]  # the turn-less topic is dropped; the other awaits a theme pass
