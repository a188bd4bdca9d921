from __future__ import annotations

import json
from pathlib import Path

from localmem.bench.longmemeval import evidence_of, is_built, open_question_store, question_as_of, run, table
from localmem.config import load_settings
from tests.helpers.benchdata import merged_items
from tests.helpers.fakes import HashEmbedder


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


def test_merged_store_dedupes_sessions_at_their_earliest_date(tmp_path: Path) -> None:
    from localmem.bench.lme_merged import merged_sessions, questions

    data = tmp_path / "lme.json"
    data.write_text(json.dumps(merged_items()))
    sessions = {s.key: s for s in merged_sessions(data)}
    assert sorted(sessions) == ["a-only", "b-ev", "c-late", "shared"]
    assert len(sessions["a-only"].turns) == 1  # one copy of a session its haystack repeats
    assert sessions["shared"].started_at is not None and sessions["shared"].started_at.startswith("2023-05-01")
    qs = {q["id"]: q for q in questions(data)}
    assert qs["qa"]["as_of"] == "2023-05-15T23:59:59" and qs["qa"]["evidence"] == ["shared:0"]
    assert qs["qb"]["as_of"] == "2023-06-10T23:59:59" and qs["qb"]["evidence"] == ["b-ev:0"]


def test_merged_bench_asks_each_question_as_of_its_own_date(tmp_path: Path) -> None:
    from localmem.bench.lme_merged import run as run_merged
    from localmem.bench.lme_merged import table as merged_table

    data = tmp_path / "lme.json"
    data.write_text(json.dumps(merged_items()))
    result = run_merged(data, [4000], ["bm25", "localmem"], tmp_path / "w", HashEmbedder(), load_settings())
    assert result["store"]["sessions"] == 4 and result["store"]["turns"] == 5
    for row in result["rows"]:
        # qa's evidence is the shared session's EARLY copy (a later one would be hidden on
        # 05-15); qb's is dated after qa's question; qc's after its own question.
        assert row["single-session-user"] == 100.0, row
        assert row["temporal-reasoning"] == 100.0, row
        assert row["knowledge-update"] == 0.0, row
    assert "one store" in merged_table(result)
    # --workdir: a built store is reused as it is, not rebuilt from a changed file.
    items = merged_items()
    items[1]["haystack_sessions"][1].append({"role": "user", "content": "A new turn."})  # type: ignore[index]
    data.write_text(json.dumps(items))
    again = run_merged(data, [4000], ["bm25"], tmp_path / "w", HashEmbedder(), load_settings())
    assert again["store"] == result["store"]


def test_merged_losses_name_a_fate_for_every_missed_turn(tmp_path: Path) -> None:
    from localmem.bench.lme_losses import FATES
    from localmem.bench.lme_losses import run as run_losses
    from localmem.bench.lme_losses import table as loss_table

    data = tmp_path / "lme.json"
    data.write_text(json.dumps(merged_items()))
    result = run_losses(data, [1000], tmp_path / "w", HashEmbedder(), load_settings())
    lost = {r["question"]: r for r in result["lost"]}
    assert lost["qc"]["fate"] == "date filter"
    assert all(r["fate"] in FATES for r in result["lost"])
    found = sum(r["found"] for r in result["found"])
    assert found + len(result["lost"]) == sum(result["evidence"].values()) == 3
    assert "date filter" in loss_table(result)


def test_haystack_losses_ask_each_question_of_its_own_store(tmp_path: Path) -> None:
    from localmem.bench import lme_haystack_losses
    from localmem.bench.lme_losses import FATES
    from localmem.bench.lme_losses import table as loss_table

    data = tmp_path / "lme.json"
    data.write_text(json.dumps(merged_items()))
    result = lme_haystack_losses.run(data, [12, 1000], tmp_path / "w", HashEmbedder(), load_settings())
    assert sorted(p.name for p in (tmp_path / "w").iterdir() if p.suffix == ".db") == [
        "lme-qa.db", "lme-qb.db", "lme-qc.db"
    ]  # fmt: skip
    assert result["questions"] == 3 and result["evidence"] == {
        "temporal-reasoning": 1, "single-session-user": 1, "knowledge-update": 1
    }  # fmt: skip
    by = {(r["question"], r["budget"]): r for r in result["lost"]}
    assert by[("qc", 1000)]["fate"] == "date filter"  # dated after its question, in its own store too
    found = {(r["type"], r["budget"]): r["found"] for r in result["found"]}
    assert found[("single-session-user", 1000)] == 1 and found[("temporal-reasoning", 1000)] == 1
    # 12 tokens hold no turn line: each visible evidence turn is lost to the budget.
    assert by[("qa", 12)]["fate"] == "scored low" and by[("qb", 12)]["fate"] == "scored low"
    assert all(r["fate"] in FATES for r in result["lost"])
    for b in (12, 1000):
        lost = sum(1 for r in result["lost"] if r["budget"] == b)
        assert lost + sum(n for (_t, bb), n in found.items() if bb == b) == 3
    assert "date filter" in loss_table(result, "per haystack")
