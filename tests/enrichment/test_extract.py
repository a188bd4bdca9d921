"""Extraction logic without a model: the low-information filter, grounding, relative
dates, reply parsing, the schema, and batching with a scripted generator."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localmem.enrichment.extract import TurnInput, extract, ground_entry, parse, schema
from localmem.enrichment.grounding import candidate_phrases, ground, keyword_memory_type, low_information
from localmem.models.replies import ReplyError
from localmem.util import dates
from tests.helpers.fakes import ScriptedGenerator

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
    batch = [turn("I met Oscar in Paris.", tid=7), turn("We ate at a cafe in Lyon.", tid=9)]
    full = json.dumps({"m1": {"type": "event"}, "m2": {"type": "plan", "keywords": []}})
    assert parse(full, batch, PEOPLE) == ({7: {"type": "event"}, 9: {"type": "plan", "keywords": []}}, {})
    # cut after m1: m1 is kept, m2 failed as truncated (not an empty success)
    assert parse(full[:-20], batch, PEOPLE) == ({7: {"type": "event"}}, {9: "truncated"})
    # a reply without m2's key, or an entry that says nothing, fails that turn only
    assert parse('{"m1": {"type": "event"}}', batch, PEOPLE)[1] == {9: "missing required key 'm2'"}
    assert parse('{"m1": {"type": "event"}, "m2": {}}', batch, PEOPLE)[1] == {9: "empty 'm2'"}
    assert parse('{"m1": {"type": "event"}, "m2": 5}', batch, PEOPLE)[1] == {9: "'m2' is not an object"}
    reasons = {"": "empty", "not json": "not JSON", "[1, 2]": "not an object", "{" * 5000: "truncated"}
    for junk, reason in reasons.items():
        with pytest.raises(ReplyError) as err:
            parse(junk, batch, PEOPLE)
        assert err.value.reason == reason
    assert parse('{"x": 1}', batch, PEOPLE) == ({}, {7: "missing required key 'm1'", 9: "missing required key 'm2'"})


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


def test_extract_fails_the_turns_a_bad_reply_does_not_cover() -> None:
    """A reply that is not the JSON asked for is a failure of its turns, never an
    empty success; a reply that says "nothing here" (an entry with empty lists) is one."""
    turns = [turn("I met Oscar in Paris.", tid=1), turn("Yesterday we ate in Lyon.", tid=2)]
    cases = {
        "": "empty",
        "sorry, I cannot do JSON": "not JSON",
        '{"m1": 5, "m2": 5}': "'m1' is not an object",
        '{"m1": {"type": "event", "keywords": [], "triples": [], "facts": []}}': "missing required key 'm2'",
        "{" * 3000: "truncated",
    }
    for reply, status in cases.items():
        gen = ScriptedGenerator(lambda _t, r=reply: r)
        res = extract(gen, turns, people=PEOPLE)
        assert len(res.turns) == 2 and res.unparsed_calls == 1
        assert [r.status for r in res.records] == [status] and res.records[0].reply == reply
        assert res.turns[1].error and res.turns[1].cues == []  # no date cue either: the turn is not done
    nothing = {"type": "event", "keywords": [], "triples": [], "facts": []}
    res = extract(ScriptedGenerator(lambda _t: {"m1": nothing, "m2": nothing}), turns, people=PEOPLE)
    assert res.failed == [] and res.unparsed_calls == 0 and res.records[0].status == "ok"
    assert [c.text for c in res.turns[1].cues] == ["7 May 2023 (Yesterday)"]
    odd = extract(ScriptedGenerator(lambda _t: '{"m1": {"type": 7, "keywords": [[[]]]}, "m2": {"type": "x"}}'), turns)
    assert odd.failed == [] and odd.turns[0].type_source == "keyword"  # junk content: grounding rejects it


def test_a_retry_gets_a_larger_token_cap() -> None:
    caps: list[int] = []

    class Capped(ScriptedGenerator):
        def generate_json(self, messages: Any, schema: Any, *, max_tokens: int, temperature: float) -> Any:
            caps.append(max_tokens)
            return super().generate_json(messages, schema, max_tokens=max_tokens, temperature=temperature)

    for attempt in (1, 2, 3, 4):
        extract(Capped(), [turn("I met Oscar in Paris.")], people=PEOPLE, attempt=attempt)
    assert caps == [116, 216, 416, 416]
