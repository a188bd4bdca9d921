"""Training data: what is read, what is excluded, and the pairs cut from it (no PyTorch
needed)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from localmem.errors import InputError
from localmem.storage.write.vectorize import turn_doc
from localmem.train import corpus, pairs
from tests.helpers.traindata import DOG, ITEMS, SHARED, item, u


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "train.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(ITEMS, fh)
    return path


@pytest.fixture
def held(tmp_path: Path) -> Path:
    path = tmp_path / "dev.json"
    path.write_text(json.dumps([item("d1", "single-session-user", "?", {"s2": [u("x")], "s9": [u(SHARED)]})]))
    return path


def test_turns_are_the_text_a_store_embeds_with_cue_spans(data: Path) -> None:
    c = corpus.load(data)
    t = c.turns["s1:0"]
    assert t.doc == turn_doc("user", DOG, "2023-05-20T10:00:00")
    assert [t.doc[x:y] for x, y in t.spans] == [
        "I adopted a golden retriever last spring.",
        "His name is Max and he loves the beach.",
    ]
    assert t.text == DOG
    assert [q.qid for q in c.questions] == ["q1", "q2", "q3"]
    assert c.questions[0].evidence == ("s1:0",) and c.questions[0].answer_sessions == {"s1"}


def test_excluded_sessions_and_texts_never_reach_training(data: Path, held: Path) -> None:
    c = corpus.load(data, [held])
    assert not any(k.startswith("s2:") for k in c.turns)  # the session id dev holds
    assert "s4:0" not in c.turns  # the same text under another id
    assert [q.qid for q in c.questions] == ["q1", "q2"]  # q3's only evidence is gone


def test_a_held_out_fold_takes_its_haystacks_with_it(data: Path) -> None:
    c = corpus.load(data, hold_out=frozenset({"q2"}))
    assert [q.qid for q in c.questions] == ["q1", "q3"]
    assert "s3:0" not in c.turns and not any(k.startswith("s2:") for k in c.turns)  # q2's sessions, shared ones too
    only = corpus.load(data, only=frozenset({"q2"}))
    assert [q.qid for q in only.questions] == ["q2"] and set(only.turns) == {"s3:0"}


def test_folds_split_every_type_in_proportion() -> None:
    items = [{"question_id": f"{t}{i}", "question_type": t} for t in "ab" for i in range(10)]
    folds = [corpus.fold_ids(items, 5, f) for f in range(5)]
    assert all(len(f) == 4 and sum(q.startswith("a") for q in f) == 2 for f in folds)
    assert set().union(*folds) == {i["question_id"] for i in items}


def test_a_file_that_is_not_a_list_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    with pytest.raises(InputError, match="expected a JSON list"):
        corpus.load(bad)


@pytest.mark.parametrize(
    ("asked", "said"),
    [
        ("What's your budget for the gift?", "What's my budget for the gift?"),
        ("How did you infuse your gin?", "How did I infuse my gin?"),
        ("What brings you to this event?", "What brings me to this event?"),
        ("Where are you travelling next?", "Where am I travelling next?"),
        ("What kind of music do you like?", "What kind of music do I like?"),
    ],
)
def test_an_assistant_question_in_the_users_words(asked: str, said: str) -> None:
    assert pairs.in_user_words(asked) == said


def test_question_asked_and_sentence_pairs(data: Path) -> None:
    c = corpus.load(data)
    assert [(p.query, p.positive) for p in pairs.question_pairs(c)] == [
        ("What breed is my dog?", "s1:0"),
        ("Where did I move?", "s3:0"),
        ("What did I buy?", "s4:0"),
    ]
    asked = pairs.asked_pairs(c)
    assert [(p.query, p.positive, p.negatives) for p in asked] == [
        ("What's my favourite thing to do with Max?", "s1:2", ("s1:0",))
    ]
    sent = pairs.sentence_pairs(c)
    assert {p.query for p in sent} == {"I adopted a golden retriever last spring."}
    (p,) = sent
    assert p.doc is not None and p.query not in p.doc.doc and p.doc.text == "His name is Max and he loves the beach."
    assert p.doc.doc.startswith("[2023-05-20 10:00] user: ") and p.negatives == ("s1:2",)
