from __future__ import annotations

import json
from pathlib import Path

from localmem.bench.longmemeval import evidence_of, is_built, open_question_store, question_as_of, run, table
from localmem.config import load_settings
from tests.conftest import HashEmbedder


def _item(qid: str) -> dict[str, object]:
    return {
        "question_id": qid,
        "question_type": "temporal-reasoning",
        "question": "Which did I adopt first, the cat or the dog?",
        "question_date": "2023/05/21 (Sun) 10:30",
        "answer": "the cat",
        "haystack_session_ids": ["s1", "s2"],
        "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/21 (Sun) 18:59"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "I adopted a cat.", "has_answer": True},
                {"role": "assistant", "content": "Nice!"},
            ],
            [{"role": "user", "content": "   "}, {"role": "user", "content": "I adopted a dog.", "has_answer": True}],
        ],
        "answer_session_ids": ["s1", "s2"],
    }


def test_questions_are_asked_as_of_the_end_of_their_day() -> None:
    # The second evidence session is dated 18:59 on the question's day, after its 10:30.
    item = _item("q1")
    assert question_as_of(item) == "2023-05-21T23:59:59"
    assert evidence_of(item) == ["s1:0", "s2:1"]


def test_a_store_is_built_only_when_it_holds_every_non_empty_turn(tmp_path: Path) -> None:
    data = tmp_path / "lme.json"
    item = _item("q1")
    data.write_text(json.dumps([item]))
    path = tmp_path / "lme-q1.db"
    assert not is_built(path, item)
    store = open_question_store(path, data, "q1", HashEmbedder(), load_settings())
    store.close()
    assert is_built(path, item)
    bigger = _item("q1")
    bigger["haystack_sessions"][1].append({"role": "user", "content": "One more turn."})  # type: ignore[index]
    assert not is_built(path, bigger)


def test_session_recall_at_5_in_both_forms(tmp_path: Path) -> None:
    # Two answer sessions; only s1 says anything about the question, so a method that
    # ranks matching turns finds one of the two: share 50%, any-session 100%.
    item = _item("q2")
    item["question"] = "Where did I see the zebra quartz?"
    ids = [f"s{i}" for i in range(1, 9)]
    item["haystack_session_ids"] = ids
    item["haystack_dates"] = [f"2023/05/0{i} (Mon) 09:00" for i in range(1, 9)]
    item["haystack_sessions"] = [
        [{"role": "user", "content": "I saw the zebra quartz at the museum.", "has_answer": True}],
        *[[{"role": "user", "content": f"Weather talk number {i}."}] for i in range(2, 8)],
        [{"role": "user", "content": "Lunch was soup.", "has_answer": True}],
    ]
    item["answer_session_ids"] = ["s1", "s8"]
    data = tmp_path / "lme.json"
    data.write_text(json.dumps([item]))
    result = run(data, [500], ["bm25"], tmp_path, HashEmbedder(), load_settings())
    rows = {r["budget"]: r for r in result["rows"]}
    assert rows["sess@5"]["all"] == 50.0
    assert rows["any@5"]["all"] == 100.0
    assert "any@5" in table(result)
