"""The active loop with a scripted model: it follows the model's tool choices, feeds
errors back, respects every bound, keeps a complete trace and stops on Answer; the CLI
commands; one real SmolLM2 exploration end to end (whatever it answers)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from localmem import cli
from localmem.answering.explore import ANSWER_SCHEMA, TOOLS, explore, navigate_schema, validate
from localmem.errors import ModelError
from localmem.models.llm import Generation
from localmem.records import SessionIn
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

Reply = str | dict[str, Any]


class FakeModel:
    """Replies to Navigate calls from ``navigate`` (by round, 0-based) and to the
    Answer call with ``answer``; records every prompt and schema."""

    model_id = "test-fake"

    def __init__(self, navigate: Callable[[int, str], Reply], answer: Reply | None = None) -> None:
        self.navigate = navigate
        self.answer = answer if answer is not None else {"answer": "tomatoes", "support": [1], "confidence": 0.8}
        self.prompts: list[str] = []
        self.kinds: list[str] = []

    def generate_json(
        self, messages: Sequence[dict[str, str]], schema: dict[str, Any], *, max_tokens: int, temperature: float
    ) -> Generation:
        prompt = messages[-1]["content"]
        self.prompts.append(prompt)
        if schema is ANSWER_SCHEMA or "calls" not in schema.get("properties", {}):
            self.kinds.append("answer")
            reply = self.answer
        else:
            self.kinds.append("navigate")
            reply = self.navigate(self.kinds.count("navigate") - 1, prompt)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return Generation(text, sum(len(m["content"].split()) for m in messages), len(text.split()))


def nav(*calls: tuple[str, dict[str, Any]], done: bool = False, thought: str = "look") -> dict[str, Any]:
    return {"thought": thought, "done": done, "calls": [{"tool": t, "args": a} for t, a in calls]}


@pytest.fixture
def filled(store: Store, garden_sessions: list[SessionIn]) -> Store:
    store.write_sessions(garden_sessions)
    return store


def test_follows_tool_choices_and_stops_on_answer(filled: Store) -> None:
    script = [
        nav(("search_cues", {"text": "bike chain"})),
        nav(("turn_context", {"turn_id": 4}), ("turn_time", {"turn_id": 6})),
        nav(done=True, thought="enough"),
    ]
    model = FakeModel(lambda i, _p: script[i], {"answer": "at the shop", "support": [6, 999], "confidence": 3})
    res = explore(filled, model, "Where did Ben take his bike?")
    assert model.kinds == ["navigate", "navigate", "navigate", "answer"]
    assert res.stop_reason == "done" and res.model_rounds == 3 and res.calls == 3
    assert [c.tool for r in res.rounds for c in r.calls] == ["search_cues", "search_cues", "turn_context", "turn_time"]
    assert res.rounds[0].index == 0  # the seed search, no model call
    assert res.rounds[2].calls[0].ok and 4 in res.rounds[2].calls[0].turn_ids
    # the results of round 2 are in the prompt of round 3; evidence per round adds up
    assert "turn_context" in model.prompts[2] and "Main Street" in model.prompts[2]
    added = [t for r in res.rounds for t in r.evidence_added]
    assert added == res.evidence and len(set(added)) == len(added) and {4, 5, 6} <= set(added)
    # support is limited to turns the model was shown; confidence is clamped
    assert res.support == [6] and res.confidence == 1.0 and res.answer == "at the shop"
    assert "[6]" in model.prompts[-1] and "Main Street" in model.prompts[-1]
    d = res.to_dict()
    assert d["rounds"] == 3 and d["calls"] == 3 and len(d["trace"]) == 4
    assert d["prompt_tokens"] > 0 and d["generated_tokens"] > 0
    json.dumps(d)


def test_errors_are_fed_back_not_raised(filled: Store) -> None:
    bad = nav(
        ("no_such_tool", {}),
        ("turn_time", {"turn_id": "seven"}),
        ("turn_time", {"turn": 1}),
        ("search_cues", {}),
        ("turn", {"turn_id": 99999}),
        ("turns_between", {"start": "not a date"}),
        ("turn_time", {"turn_id": "2"}),  # a digit string is accepted
    )
    script: list[Reply] = [bad, "not json at all", {"calls": "x", "done": False, "thought": ""}, nav(done=True)]
    model = FakeModel(lambda i, _p: script[i])
    res = explore(filled, model, "When did Ana plant tomatoes?")
    calls = res.rounds[1].calls
    assert [c.ok for c in calls] == [False] * 6 + [True]
    assert "unknown tool" in calls[0].result and "integer" in calls[1].result
    assert "unknown argument" in calls[2].result and "missing argument" in calls[3].result
    assert "no turn" in calls[4].result and calls[5].result.startswith("error:")
    assert "unknown tool" in model.prompts[1]  # the model read its errors
    assert res.rounds[2].error == "reply was not a JSON object"
    assert res.rounds[3].error == "calls must be a list"
    assert res.stop_reason == "done"


def test_bounds_rounds_calls_and_repeats(filled: Store) -> None:
    many = nav(*[("turn_time", {"turn_id": i}) for i in range(1, 9)])
    model = FakeModel(lambda i, _p: many if i == 0 else nav(("turn", {"turn_id": i + 1})))
    res = explore(filled, model, "anything", max_rounds=3, max_calls=3)
    assert model.kinds == ["navigate"] * 3 + ["answer"] and res.stop_reason == "max_rounds"
    first = res.rounds[1].calls
    assert sum(c.ok for c in first) == 3 and all("at most 3" in c.result for c in first[3:])
    assert navigate_schema(3)["properties"]["calls"]["maxItems"] == 3
    # a repeated call is not run again
    rep = FakeModel(lambda i, _p: nav(("turn", {"turn_id": 1})))
    res = explore(filled, rep, "anything", max_rounds=2)
    assert res.rounds[2].calls[0].result.startswith("error: repeated")
    # no rounds at all: the seed and the answer
    zero = FakeModel(lambda i, _p: nav(done=True))
    res = explore(filled, zero, "tomatoes", max_rounds=0)
    assert zero.kinds == ["answer"] and res.evidence


def test_token_bounds(filled: Store) -> None:
    endless = FakeModel(lambda i, _p: nav(("turn_context", {"turn_id": i % 8 + 1}), ("turn", {"turn_id": i + 1})))
    res = explore(filled, endless, "tomatoes", max_rounds=8, max_tokens=3000, evidence_tokens=300)
    assert res.stop_reason == "max_tokens" and res.model_rounds < 8
    assert res.prompt_tokens + res.generated_tokens <= 3000
    # prompt growth: old rounds are shortened to keep the prompt under the cap
    res = explore(filled, endless, "tomatoes", max_rounds=6, max_prompt_tokens=500)
    assert "(shortened)" in endless.prompts[-2]
    assert max(len(p.split()) for p in endless.prompts) < 900


def test_stalled_and_model_failure(filled: Store) -> None:
    res = explore(filled, FakeModel(lambda i, _p: nav()), "tomatoes")
    assert res.stop_reason == "stalled" and res.model_rounds == 1

    def boom(i: int, _p: str) -> Reply:
        raise ModelError("scripted failure")

    res = explore(filled, FakeModel(boom), "tomatoes")
    assert res.stop_reason == "model_error" and "scripted failure" in res.rounds[-1].error
    assert res.answer  # the answer call still ran over the seed evidence


def test_validate_and_schema_cover_every_tool() -> None:
    schema = navigate_schema(10)
    names = [v["properties"]["tool"]["const"] for v in schema["properties"]["calls"]["items"]["anyOf"]]
    assert names == list(TOOLS)
    assert validate("cue_turns", {"cue": "bike", "tag": None})[1] == {"cue": "bike"}


def test_cli_explore_and_answer(
    filled: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import localmem.models.llm
    import localmem.models.registry

    db = str(filled.path)
    filled.close()
    model = FakeModel(lambda i, _p: nav(done=True), {"answer": "tomatoes", "support": [1], "confidence": 0.5})
    monkeypatch.setattr(localmem.models.registry, "generator_for", lambda settings, m=None: model)
    monkeypatch.setattr(localmem.models.registry, "default_embedder", lambda spec="default": HashEmbedder())
    assert cli.main(["--db", db, "explore", "What did Ana plant?", "--json", "--rounds", "2"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["answer"] == "tomatoes" and out["stop_reason"] == "done" and out["trace"]
    assert cli.main(["--db", db, "answer", "What did Ana plant?", "--explore"]) == 0
    assert "tomatoes" in capsys.readouterr().out
    model.answer = {"answer": "Tomatoes and basil."}
    assert cli.main(["--db", db, "answer", "What did Ana plant?", "--json", "--budget", "300"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["answer"] == "Tomatoes and basil." and out["turns"]


def test_smollm2_explores_end_to_end(filled: Store) -> None:
    pytest.importorskip("llama_cpp")
    from localmem.models import llm

    try:
        gen = llm.get_generator(None, n_ctx=4096, n_threads=1)
    except ModelError as exc:
        pytest.skip(str(exc))
    res = explore(filled, gen, "Where did Ben take his bike?", max_rounds=1, max_calls=2)
    assert res.model_rounds <= 1 and res.calls <= 2 and res.answer
    assert res.stop_reason in {"done", "max_rounds", "stalled", "max_tokens"}
    assert res.prompt_tokens > 0
