"""The one model-reply parser (localmem/models/replies.py) and the model-call log
(localmem/storage/layers/calls.py): named failure reasons, a bounded log with per-purpose
totals, and every caller of a model leaving its record."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localmem.answering.answer import answer
from localmem.answering.explore import explore
from localmem.enrichment.layers import layer_stats
from localmem.enrichment.worker import run_worker
from localmem.models.replies import PURPOSES, CallRecord, ReplyError, parse_entries, parse_reply, prompt_hash
from localmem.records import SessionIn
from localmem.storage.engine import db
from localmem.storage.layers import calls
from localmem.storage.write.store import Store
from tests.helpers.fakes import ScriptedGenerator, session

LABEL = {
    "type": "object",
    "properties": {"label": {"type": "string"}, "tags": {"type": "array"}},
    "required": ["label", "tags"],
}


def reason(text: str, schema: dict[str, Any] | None = None) -> str:
    with pytest.raises(ReplyError) as err:
        parse_reply(text, schema)
    return err.value.reason


def test_each_bad_reply_has_a_short_named_reason() -> None:
    assert reason("") == reason("  \n ") == "empty"
    assert reason('{"label": "gard') == reason("[1, 2") == reason("{" * 5000) == "truncated"
    assert reason("sorry, I cannot do JSON") == reason('{"a": 1}}') == reason("{'a': 1}") == "not JSON"
    assert reason("[1, 2]") == reason('"text"') == reason("3") == "not an object"
    assert reason('{"label": "x"}', LABEL) == "missing required key 'tags'"
    assert (
        reason('{"label": "  ", "tags": []}', LABEL) == reason('{"label": null, "tags": []}', LABEL) == "empty 'label'"
    )
    assert parse_reply('{"label": "Garden", "tags": []}', LABEL) == {"label": "Garden", "tags": []}  # empty list: fine
    assert parse_reply('```json\n{"label": "Garden", "tags": ["x"]}\n```', LABEL)["tags"] == ["x"]
    err = ReplyError("not JSON", "sorry,\n I cannot do JSON")
    assert str(err) == "model reply not JSON: 'sorry, I cannot do JSON'" and err.exit_code == 6


def test_entries_fail_one_by_one() -> None:
    entry = {"type": "object", "properties": {"type": {}, "keywords": {}}, "required": ["type", "keywords"]}
    schema = {"type": "object", "properties": {"m1": entry, "m2": entry, "m3": entry}, "required": ["m1", "m2", "m3"]}
    ok, failed = parse_entries('{"m1": {"keywords": []}, "m2": {"other": 1}, "m3": []}', schema)
    assert ok == {"m1": {"keywords": []}}
    assert failed == {"m2": "empty 'm2'", "m3": "'m3' is not an object"}
    ok, failed = parse_entries('{"m1": {"type": "event"}, "m2": {"type": "pl', schema)
    assert ok == {"m1": {"type": "event"}} and failed == {"m2": "truncated", "m3": "truncated"}
    for text, why in (("", "empty"), ("no", "not JSON"), ("[]", "not an object"), ('{"m1": {"ty', "truncated")):
        with pytest.raises(ReplyError) as err:
            parse_entries(text, schema)
        assert err.value.reason == why


def test_prompt_hash_is_stable_and_tells_prompts_apart() -> None:
    a = [{"role": "user", "content": "hi"}]
    assert (
        prompt_hash(a)
        == prompt_hash([{"content": "hi", "role": "user"}])
        != prompt_hash([{"role": "user", "content": "ho"}])
    )
    assert len(prompt_hash(a)) == 64


def _rec(i: int, status: str = "ok", purpose: str = "extract") -> CallRecord:
    return CallRecord(purpose, "m", f"h{i}", f"reply {i}" * (1 if i else 2000), status, 10, 2)


def test_the_log_is_bounded_in_the_writing_transaction_and_the_totals_are_not(store: Store) -> None:
    with db.transaction(store.conn):
        calls.write(store.conn, [_rec(i, "ok" if i % 3 else "not JSON") for i in range(12)], max_rows=5)
    rows = store.conn.execute("SELECT prompt_hash, status FROM model_calls ORDER BY id").fetchall()
    assert [h for h, _s in rows] == [f"h{i}" for i in range(7, 12)]  # the newest five
    first = store.conn.execute("SELECT reply, reply_chars FROM model_calls ORDER BY id LIMIT 1").fetchone()
    assert first == ("reply 7", 7)
    calls.log(store.conn, [_rec(0)])  # a long reply is cut, its length kept
    cut = store.conn.execute("SELECT length(reply), reply_chars FROM model_calls ORDER BY id DESC LIMIT 1").fetchone()
    assert cut == (calls.REPLY_CHARS, len("reply 0" * 2000))
    totals = calls.totals(store.conn)
    assert set(totals) == set(PURPOSES) and totals["extract"] == {
        "parsed": 9,
        "unparsed": 4,
        "prompt_tokens": 130,
        "generated_tokens": 26,
    }
    assert calls.recent_failures(store.conn, 2)[0]["status"] == "not JSON"


def test_every_worker_call_is_logged_and_the_log_stays_bounded(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calls, "MAX_ROWS", 3)
    store.write_sessions(
        [session(f"s{i}", f"2024-01-0{i + 1}T10:00:00", ("Ana", f"I met Oscar{i} in Rome.")) for i in range(5)]
    )
    gen = ScriptedGenerator()
    run_worker(store, gen, until_empty=True)
    rows = store.conn.execute("SELECT purpose, model, status, reply, prompt_tokens FROM model_calls").fetchall()
    assert len(rows) == 3  # the newest three
    totals = layer_stats(store)["model_calls"]
    assert totals["extract"]["parsed"] == 5 == len(gen.calls) - totals["topic-label"]["unparsed"]
    # ScriptedGenerator answers a label prompt (no numbered lines) with {}: refused, logged
    assert totals["topic-label"]["unparsed"] == 5 and totals["topic-label"]["parsed"] == 0
    assert {r[2] for r in rows} == {"missing required key 'label'"} and all(r[1] == "test-scripted" for r in rows)


def test_answer_and_explore_leave_records(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    prose = ScriptedGenerator(lambda _t: "Ana planted tomatoes.")
    assert answer(store, prose, "What did Ana plant?").answer == "Ana planted tomatoes."  # prose is still an answer
    good = ScriptedGenerator(lambda _t: {"answer": "Tomatoes."})
    assert answer(store, good, "What did Ana plant?").answer == "Tomatoes."
    empty = ScriptedGenerator(lambda _t: {"answer": ""})
    assert answer(store, empty, "What did Ana plant?").answer == "I don't know."
    rows = store.conn.execute("SELECT purpose, status FROM model_calls ORDER BY id").fetchall()
    assert rows == [("answer", "not JSON"), ("answer", "ok"), ("answer", "empty 'answer'")]

    replies = iter([{"thought": "t", "done": True, "calls": []}, "not json at all"])
    res = explore(store, ScriptedGenerator(lambda _t: next(replies)), "What did Ana plant?")
    assert res.answer == "I don't know."
    got = store.conn.execute("SELECT status FROM model_calls WHERE purpose = 'explore' ORDER BY id").fetchall()
    assert got == [("ok",), ("not JSON",)]
    totals = layer_stats(store)["model_calls"]
    assert totals["answer"]["unparsed"] == 2 and totals["explore"] == {
        "parsed": 1,
        "unparsed": 1,
        "prompt_tokens": totals["explore"]["prompt_tokens"],
        "generated_tokens": totals["explore"]["generated_tokens"],
    }
    assert json.dumps(layer_stats(store))  # stats stay JSON
