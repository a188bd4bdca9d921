"""Extraction logic without a model: the low-information filter, grounding, relative
dates, reply parsing, the schema, and batching with a scripted generator."""

from __future__ import annotations

import json
from typing import Any

from localmem.enrichment.extract import TurnInput, extract, ground_entry, parse, schema
from localmem.enrichment.grounding import candidate_phrases, ground, keyword_memory_type, low_information
from localmem.util import dates

from .conftest import ScriptedGenerator

PEOPLE = ["Caroline", "Melanie"]


def turn(text: str, speaker: str = "Caroline", tid: int = 1, ts: str | None = "2023-05-08T13:56:00") -> TurnInput:
    return TurnInput(tid, speaker, text, ts)


def test_low_information_filter() -> None:
    for text in ("Hey Mel! Good to see you!", "Thanks, Caroline!", "ok", "Bye! Take care.", "Wow, that's so cool!"):
        assert low_information(text, PEOPLE), text
    for text in ("I love Paris.", "Yes, Rome.", "It was on the 5th.", "Cool! [image: a red bike]"):
        assert not low_information(text, PEOPLE), text


def test_keyword_memory_type_fallback() -> None:
    assert keyword_memory_type("I moved to Porto in May.") == "state_change"
    assert keyword_memory_type("I'm going to paint a sunset next week.") == "plan"
    assert keyword_memory_type("I think pottery is the best hobby.") == "opinion"
    assert keyword_memory_type("We went to the beach.") == "event"


def test_ground_finds_spans_and_refuses_what_is_not_there() -> None:
    text = "I went to a LGBTQ support group yesterday and it was so powerful."
    s, e = ground("LGBTQ support group", text)  # type: ignore[misc]
    assert text[s:e] == "LGBTQ support group"
    s, e = ground("support groups", text)  # type: ignore[misc]
    assert text[s:e] == "support group"  # stems match
    assert ground("Atlantis", text) is None
    assert ground("support Atlantis", text) is None  # every content word must be there
    assert ground("it", text) is None  # no content word: never supported


def test_candidate_phrases_split_at_stopwords_and_punctuation() -> None:
    got = candidate_phrases("I'm keen on counseling or working in mental health - I'd love to help.")
    assert "mental health" in got and "counseling" in got
    assert all("I'd" not in c for c in got)


def test_relative_dates() -> None:
    ts = "2023-05-08T13:56:00"  # a Monday
    got = {d.phrase: d.label for d in dates.resolve("Yesterday I ran; last week I swam; next Friday I fly.", ts)}
    assert got == {"Yesterday": "7 May 2023", "last week": "the week of 1 May 2023", "next Friday": "12 May 2023"}
    assert dates.resolve("two days ago", ts)[0].label == "6 May 2023"
    assert dates.resolve("last year", ts)[0].label == "2022"
    assert dates.resolve("yesterday", None) == []


def test_parse_salvages_a_cut_reply_and_refuses_junk() -> None:
    full = json.dumps({"m1": {"type": "event"}, "m2": {"type": "plan", "keywords": []}})
    assert parse(full, 2) == [{"type": "event"}, {"type": "plan", "keywords": []}]
    assert parse(full[:-20], 2) == [{"type": "event"}, {}]
    for junk in ("", "not json", "[1, 2]", '{"x": 1}', "{" * 5000):
        assert parse(junk, 2) is None


def test_ground_entry_keeps_supported_cues_and_counts_the_rest() -> None:
    t = turn("I adopted a puppy called Rex last week in Lisbon.")
    entry: dict[str, Any] = {
        "type": "state_change",
        "keywords": [
            {"k": "Rex", "tag": "pet"},
            {"k": "Rex", "tag": "pet"},  # duplicate
            {"k": "Atlantis", "tag": "place"},  # not in the turn
            {"k": "Caroline", "tag": "person"},  # the speaker's own name says nothing
        ],
        "triples": [
            {"s": "I", "r": "adopted", "o": "puppy called Rex"},
            {"s": "Caroline", "r": "sold", "o": "Rex"},  # relation not in the turn
            {"s": "Caroline", "r": "adopted", "o": "a kitten"},  # object not in the turn
        ],
        "facts": [{"person": "Caroline", "aspect": "pet", "value": "puppy called Rex"}, {"person": "Bob", "value": 3}],
    }
    ex = ground_entry(entry, t, PEOPLE)
    assert ex.memory_type == "state_change" and ex.type_source == "model"
    kinds = {(c.kind, c.text) for c in ex.cues}
    assert kinds == {
        ("keyword", "Rex"),
        ("triple", "Caroline adopted puppy called Rex"),
        ("fact", "Caroline pet: puppy called Rex"),
    }
    for c in ex.cues:
        assert 0 <= c.start < c.end <= len(t.text)
    assert ex.rejected == 1 and ex.duplicates == 1  # lists are cut at their maximum length first
    for bad in (
        {"keywords": [{"k": "Caroline", "tag": "person"}]},  # the speaker's own name: dropped, not stored
        {"triples": [{"s": "Caroline", "r": "sold", "o": "Rex"}]},  # relation not in the turn
        {"triples": [{"s": "Caroline", "r": "adopted", "o": "a kitten"}]},  # object not in the turn
        {"triples": [{"s": "Zed", "r": "adopted", "o": "Rex"}]},  # subject nobody and not in the turn
        {"facts": [{"person": "Melanie", "aspect": "pet", "value": "Rex"}]},  # about someone the turn does not name
        {"facts": [{"person": "Caroline", "aspect": "pet", "value": "Melanie"}]},  # a value that is only a name
        {"facts": [{"person": "Bob", "value": 3}]},
    ):
        got = ground_entry(bad, t, PEOPLE)
        assert [c for c in got.cues if c.kind != "keyword" or c.text != "Rex"] == [], bad
        assert got.rejected + got.duplicates == 1, bad
    junk = ground_entry({"type": "gossip", "keywords": "Rex", "triples": [None, 3]}, t, PEOPLE)
    assert junk.cues == [] and junk.type_source == "keyword" and junk.memory_type == "state_change"


def test_schema_constrains_keywords_to_the_turns_phrases() -> None:
    batch = [turn("I visited the Louvre museum."), turn("Thanks!", "Melanie", 2)]
    sch = schema(batch, PEOPLE)
    assert sch["required"] == ["m1", "m2"]
    kw = sch["properties"]["m1"]["properties"]["keywords"]["items"]["properties"]["k"]["enum"]
    assert "Louvre museum" in kw and "visited" in kw


def test_extract_batches_skips_low_information_and_adds_dates() -> None:
    gen = ScriptedGenerator()
    turns = [
        turn("Hi Melanie!", tid=1),
        turn("Yesterday I met Oscar at the Louvre.", tid=2),
        turn("Thanks!", "Melanie", 3),
        turn("Did Oscar like Paris?", "Melanie", 4),
        turn("He loved Paris and the Seine.", tid=5),
    ]
    res = extract(gen, turns, people=PEOPLE, batch_size=6)
    assert res.calls == 1 and len(gen.calls[0]) == 3  # the two low-information turns never reach the model
    by = {t.turn_id: t for t in res.turns}
    assert by[1].low_info and by[1].cues == [] and by[1].memory_type is None
    texts = {c.text for c in by[2].cues}
    assert {"Oscar", "Louvre", "7 May 2023 (Yesterday)"} <= texts and "Atlantis" not in texts
    assert by[2].rejected == 1  # the invented keyword
    assert [t.turn_id for t in res.turns] == [1, 2, 3, 4, 5]
    two = extract(ScriptedGenerator(), turns, people=PEOPLE, batch_size=2)
    assert two.calls == 2


def test_extract_survives_any_reply() -> None:
    for reply in ("", "garbage", '{"m1": 5}', '{"m1": {"type": 7, "keywords": [[[]]]}}', "{" * 3000):
        gen = ScriptedGenerator(lambda _t, r=reply: r)
        res = extract(gen, [turn("I met Oscar in Paris.")], people=PEOPLE)
        assert len(res.turns) == 1 and res.turns[0].type_source == "keyword"
        assert all(c.kind == "keyword" for c in res.turns[0].cues)
