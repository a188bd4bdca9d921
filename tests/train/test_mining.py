"""Hard-negative mining (``train.mining``): own-haystack negatives, and with ``pooled`` the
best-ranked user turns of the OTHER haystacks, never a copy of the question's evidence.
The embedder is the hash fake (the model boundary): the ranking is by shared words."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from localmem.train import corpus, mining, pairs
from tests.helpers.fakes import HashEmbedder
from tests.helpers.traindata import a, item, u

RUN = "I run along the canal every morning before work, five kilometres."
ITEMS = [
    item(
        "q1",
        "single-session-user",
        "How far do I run every morning along the canal?",
        {
            "s1": [u(RUN, answer=True), a("Nice routine.")],
            "s2": [u("I run errands on Saturday mornings, mostly groceries.")],
        },
    ),
    item(
        "q2",
        "single-session-user",
        "Which city did I move to?",
        {
            "s3": [u("I moved to Lisbon in May with my partner.", answer=True)],
            # another persona's turn on q1's topic: the merged store's confuser
            "s5": [u("My sister runs along the canal every morning too, ten kilometres."), a("Impressive.")],
            # the same words as q1's evidence (LongMemEval reuses sessions): never a negative for q1
            "s6": [u(RUN)],
        },
    ),
]


def _corpus(tmp_path: Path) -> corpus.Corpus:
    path = tmp_path / "train.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(ITEMS, fh)
    return corpus.load(path, [], frozenset())


def _negatives(corp: corpus.Corpus, mined: list[pairs.Pair], query: str) -> list[str]:
    (p,) = [p for p in mined if p.query == query]
    return [corp.turns[k].text for k in p.negatives]


def test_own_haystack_only_by_default(tmp_path: Path) -> None:
    corp = _corpus(tmp_path)
    mined = mining.mine(corp, pairs.question_pairs(corp), HashEmbedder())
    assert _negatives(corp, mined, ITEMS[0]["question"]) == ["I run errands on Saturday mornings, mostly groceries."]


def test_pooled_adds_the_other_haystacks_best_user_turns(tmp_path: Path) -> None:
    corp = _corpus(tmp_path)
    mined = mining.mine(corp, pairs.question_pairs(corp), HashEmbedder(), pooled=1)
    got = _negatives(corp, mined, ITEMS[0]["question"])
    # own haystack first, then the best other-haystack user turn: the sister's run, not the
    # word-for-word copy of the evidence (it ranks higher) and never an assistant turn
    assert got == [
        "I run errands on Saturday mornings, mostly groceries.",
        "My sister runs along the canal every morning too, ten kilometres.",
    ]
    ten = mining.mine(corp, pairs.question_pairs(corp), HashEmbedder(), pooled=10)
    many = _negatives(corp, ten, ITEMS[0]["question"])
    assert RUN not in many and "Impressive." not in many and "Nice routine." not in many
    assert len(many) == len(set(many))
    # q2's pooled negatives come from q1's haystack only: its own turns are never "other"
    q2 = _negatives(corp, ten, ITEMS[1]["question"])
    assert "I moved to Lisbon in May with my partner." not in q2
    assert set(q2) >= {"I run errands on Saturday mornings, mostly groceries."}
