"""The traversal toolkit against a real store: the garden fixture written by the write
path, enriched by the real worker with the scripted generator (keywords, a triple and
facts), plus a topic written the way the topic layer will; and cross-session themes
built by the topic layer over the themes tests' sessions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localmem import toolkit
from localmem.config import Settings
from localmem.enrichment.worker import run_topics, run_worker
from localmem.errors import InputError, NotFound
from localmem.records import SessionIn, TurnIn
from localmem.storage.engine import db
from localmem.storage.write.store import Store
from tests.helpers.fakes import ScriptedGenerator, garden_script
from tests.helpers.themes import ConceptEmbedder, six_sessions, theme_of


@pytest.fixture
def mem(store: Store, garden_sessions: list[SessionIn]) -> Store:
    store.write_sessions(garden_sessions)
    run_worker(store, ScriptedGenerator(garden_script), until_empty=True)
    return store


def tid(store: Store, source_id: str) -> int:
    return int(store.conn.execute("SELECT id FROM turns WHERE source_id = ?", (source_id,)).fetchone()[0])


def test_search_cues_exact_words_and_similarity(mem: Store) -> None:
    page = toolkit.search_cues(mem, "tomatoes")
    assert page.items, "tomatoes is an extracted keyword"
    first = page.items[0]
    assert first.match == "exact" and first.cue.text.lower() == "tomatoes"
    assert "food" in first.cue.tags
    assert first.timestamp and first.speaker
    # all words of a two-word query, found through the statement cues
    hits = toolkit.search_cues(mem, "bike chain", kinds=["statement"])
    assert hits.items[0].match == "all_words"
    assert all(h.cue.kind == "statement" for h in hits.items)
    assert "chain" in hits.items[0].cue.text.lower()
    # similarity reaches cues that share no exact phrase
    sim = toolkit.search_cues(mem, "growing flowers weather", limit=50)
    assert any(h.match in ("similar", "all_words", "some_words") for h in sim.items)


def test_search_cues_paging_and_filters(mem: Store) -> None:
    a = toolkit.search_cues(mem, "tomatoes garden bike", limit=2)
    assert len(a.items) == 2 and a.limit == 2 and a.next_offset == 2 and a.total > 2
    b = toolkit.search_cues(mem, "tomatoes garden bike", limit=2, offset=2)
    assert {h.cue.cue_id for h in a.items}.isdisjoint({h.cue.cue_id for h in b.items})
    big = toolkit.search_cues(mem, "tomatoes", limit=10_000)
    assert big.limit == toolkit.MAX_LIMIT and len(big.items) <= toolkit.MAX_LIMIT
    last = toolkit.search_cues(mem, "tomatoes", limit=5, offset=big.total)
    assert last.items == [] and last.next_offset is None
    early = toolkit.search_cues(mem, "tomatoes", as_of="2024-02-01", limit=50)
    assert early.items and all(h.timestamp and h.timestamp < "2024-02-01" for h in early.items)
    scoped = toolkit.search_cues(mem, "tomatoes bike", scope="s2", limit=50)
    assert scoped.items and all(h.cue.turn_id in {tid(mem, f"s2:{i}") for i in range(3)} for h in scoped.items)
    for bad in ({"limit": 0}, {"offset": -1}, {"kinds": ["nope"]}, {"as_of": "not a date"}):
        with pytest.raises(InputError):
            toolkit.search_cues(mem, "tomatoes", **bad)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        toolkit.search_cues(mem, "   ")


def test_cue_tags_and_turns(mem: Store) -> None:
    tags = toolkit.cue_tags(mem, "Tomatoes")  # any case; every turn where it occurs
    assert [t.tag for t in tags.items] == ["food"]
    assert tags.items[0].turns == 3
    cue_id = tags.items[0].cue_ids[0]
    assert toolkit.cue_tags(mem, cue_id).items == tags.items
    turns = toolkit.cue_turns(mem, "tomatoes", "food")
    assert {t.turn_id for t in turns.items} == {tid(mem, "s1:0"), tid(mem, "s3:0"), tid(mem, "s3:1")}
    assert turns.total == 3
    best = toolkit.cue_turns(mem, "tomatoes", "food", query="first flowers appeared", limit=1)
    assert best.items[0].turn_id == tid(mem, "s3:0") and best.next_offset == 1
    assert toolkit.cue_turns(mem, "tomatoes", "place").items == []
    with pytest.raises(NotFound):
        toolkit.cue_tags(mem, "no such cue")
    with pytest.raises(NotFound):
        toolkit.cue_turns(mem, 999_999)


def test_turn_cues_and_context(mem: Store) -> None:
    t = tid(mem, "s1:1")
    page = toolkit.turn_cues(mem, t)
    item = page.items[0]
    assert item.turn.turn_id == t and item.turn.session == "s1"
    kinds = [c.kind for c in item.cues]
    assert "triple" in kinds and "statement" in kinds
    assert kinds.index("triple") < kinds.index("statement")  # extracted cues first
    small = toolkit.turn_cues(mem, t, limit=1)
    assert len(small.items[0].cues) == 1 and small.total == len(item.cues) and small.next_offset == 1

    ctx = toolkit.turn_context(mem, t, window=1)
    assert [n.offset for n in ctx.neighbours] == [-1, 1]
    assert [n.turn.turn_id for n in ctx.neighbours] == [tid(mem, "s1:0"), tid(mem, "s1:2")]
    assert all(link.kind in ("temporal", "semantic", "antecedent") for link in ctx.links)
    assert len(ctx.links) <= ctx.links_total
    wide = toolkit.turn_context(mem, t, window=99)
    assert len(wide.neighbours) == 2  # the session has three turns
    with pytest.raises(NotFound):
        toolkit.turn_context(mem, 999_999)
    with pytest.raises(InputError):
        toolkit.turn_context(mem, t, window=-1)


def test_turn_context_links_with_edge_kinds(mem: Store) -> None:
    a, b = tid(mem, "s1:0"), tid(mem, "s3:0")
    with db.transaction(mem.conn):
        mem.conn.execute(
            "INSERT OR REPLACE INTO edges(src, dst, kind, weight, reason) VALUES (?, ?, 'antecedent', 0.9, ?)",
            (b, a, "the tomatoes planted earlier"),
        )
    ctx = toolkit.turn_context(mem, b)
    first = ctx.links[0]
    assert (first.kind, first.direction, first.turn.turn_id) == ("antecedent", "out", a)
    assert first.reason == "the tomatoes planted earlier"
    back = toolkit.turn_context(mem, a)
    assert any(lk.kind == "antecedent" and lk.direction == "in" and lk.turn.turn_id == b for lk in back.links)


def test_time_of_turn_and_range(mem: Store) -> None:
    t = toolkit.turn_time(mem, tid(mem, "s2:1"))
    assert t.session == "s2" and t.position == 2 and t.session_turns == 3
    assert t.session_started == "2024-02-10T09:00:00"
    feb = toolkit.turns_between(mem, "2024-02-01", "2024-02-28")
    assert [x.session for x in feb.items] == ["s2"] * 3
    day = toolkit.turns_between(mem, end="2024-01-05")  # a date as the end: the whole day
    assert day.total == 3
    paged = toolkit.turns_between(mem, "2024-01-01", limit=3, offset=3)
    assert paged.total == 8 and [x.session for x in paged.items] == ["s2"] * 3 and paged.next_offset == 6
    scoped = toolkit.turns_between(mem, "2024-01-01", scope="s3")
    assert scoped.total == 2
    with pytest.raises(InputError):
        toolkit.turns_between(mem)
    with pytest.raises(InputError):
        toolkit.turns_between(mem, "2024-03-01", "2024-01-01")
    with pytest.raises(NotFound):
        toolkit.turn_time(mem, 999_999)


def test_person_aspects_and_facts(mem: Store) -> None:
    aspects = toolkit.person_aspects(mem, "ana")
    assert [(a.aspect, a.facts) for a in aspects.items] == [("hobby", 2), ("work", 1)]
    ben = {a.aspect: a.facts for a in toolkit.person_aspects(mem, "Ben").items}
    assert ben == {"hobby": 1, "work": 2}
    facts = toolkit.person_facts(mem, "Ben", "work")
    assert [f.value for f in facts.items] == ["bike", "bike"]
    assert facts.items[0].timestamp >= facts.items[1].timestamp  # type: ignore[operator]
    assert all(f.person == "Ben" and f.session == "s2" for f in facts.items)
    one = toolkit.person_facts(mem, "Ben", limit=1)
    assert one.total == 3 and one.next_offset == 1
    assert toolkit.person_facts(mem, "Nobody").items == []
    with pytest.raises(InputError):
        toolkit.person_aspects(mem, " ")


def test_topics_empty_then_filled(mem: Store) -> None:
    assert toolkit.topics(mem).items  # the worker ran the topic layer after extraction
    with db.transaction(mem.conn):
        mem.conn.execute("DELETE FROM topics")  # as before the topic layer ever ran
    assert toolkit.topics(mem).items == []
    with pytest.raises(NotFound):
        toolkit.topic_turns(mem, 1)
    with db.transaction(mem.conn):
        topic = int(
            mem.conn.execute(
                "INSERT INTO topics(label, summary) VALUES ('gardening', 'tomatoes, basil, mint') RETURNING id"
            ).fetchone()[0]
        )
        for sid in ("s3:0", "s1:0", "s1:2"):
            mem.conn.execute("INSERT INTO topic_turns(topic_id, turn_id) VALUES (?, ?)", (topic, tid(mem, sid)))
    found = toolkit.topics(mem, "basil")
    assert [(t.label, t.turns) for t in found.items] == [("gardening", 3)]
    assert toolkit.topics(mem, "100%_").items == []  # LIKE wildcards are escaped
    turns = toolkit.topic_turns(mem, topic, limit=2)
    assert [t.turn_id for t in turns.items] == [tid(mem, "s1:0"), tid(mem, "s1:2")]
    assert turns.total == 3 and turns.next_offset == 2


@pytest.fixture
def themed(tmp_path: Path) -> Iterator[Store]:
    """Six sessions, garden and bike twice each: two themes over six session topics."""
    s = Store(tmp_path / "themed.db", embedder=ConceptEmbedder(), settings=Settings(db=tmp_path / "themed.db"))
    s.write_sessions(six_sessions())
    run_topics(s)
    yield s
    s.close()


def test_topic_kinds_and_theme_navigation(themed: Store) -> None:
    garden, bike = theme_of(themed, {"s1", "s5"}), theme_of(themed, {"s2", "s6"})
    found = toolkit.topics(themed, kind="theme")
    assert found.total == 2 and {t.topic_id for t in found.items} == {garden, bike}
    assert all(t.kind == "theme" and t.theme_id is None and t.session_topics == 2 for t in found.items)
    loose = toolkit.topics(themed, kind="session", limit=50)
    assert loose.total == 6 and all(t.kind == "session" and t.session_topics is None for t in loose.items)
    assert sorted(t.theme_id or 0 for t in loose.items) == sorted([0, 0, garden, garden, bike, bike])
    assert toolkit.topics(themed, limit=50).total == 8
    assert [t.topic_id for t in toolkit.topics(themed, "garden", kind="theme").items] == [garden]
    with pytest.raises(InputError, match="kind"):
        toolkit.topics(themed, kind="chapter")

    # theme -> its session topics in time order -> their turns; a session topic -> its theme
    members = toolkit.theme_topics(themed, garden)
    assert members.total == 2 and [t.theme_id for t in members.items] == [garden, garden]
    first, later = (toolkit.topic_turns(themed, t.topic_id).items[0].session for t in members.items)
    assert (first, later) == ("s1", "s5")
    assert sum(t.turns for t in members.items) == toolkit.topic_turns(themed, garden).total == 5
    page = toolkit.theme_topics(themed, bike, limit=1, offset=1)
    assert len(page.items) == 1 and page.total == 2 and page.next_offset is None
    with pytest.raises(InputError, match=f"its theme is {garden}"):
        toolkit.theme_topics(themed, members.items[0].topic_id)
    alone = next(t.topic_id for t in loose.items if t.theme_id is None)
    with pytest.raises(InputError, match="in no theme"):
        toolkit.theme_topics(themed, alone)
    with pytest.raises(NotFound):
        toolkit.theme_topics(themed, 10**6)


def test_long_turns_are_clipped_and_whole_on_lookup(store: Store) -> None:
    text = "word " * 400
    res = store.write([TurnIn(text=text.strip(), speaker="Ana")], session="long")
    ref = toolkit.session_turns(store, "long").items[0]
    assert ref.clipped and len(ref.text) <= toolkit.MAX_TEXT_CHARS + 2
    full = toolkit.turn(store, res.turn_ids[0])
    assert full["text"] == text.strip()
    page = toolkit.sessions(store)
    assert page.items[0]["session"] == "long" and page.items[0]["turns"] == 1
    assert toolkit.Page.to_dict(toolkit.session_turns(store, "long"))["items"][0]["clipped"] is True
