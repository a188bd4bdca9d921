"""The model card says what the run record says: data, exclusions, base, recipe, time."""

from __future__ import annotations

from localmem.train import card

# trainer.Recipe's fields (trainer needs torch; the card does not)
RECIPE = {"epochs": 2, "batch": 32, "lr": 2e-5, "asked": 250, "sentences": 250, "cue_weight": 1.0}
RECIPE |= {"max_tokens": 128, "query_tokens": 64, "seed": 1, "threads": 2}


def record(cached: bool, fold: dict[str, object] | None = None) -> dict[str, object]:
    return {
        "name": "localmem-chat-minilm-l6",
        "data": {"path": "train289.json.gz", "sha256": "1bd865b0" * 8, "excluded": ["dev60.json"]},
        "base": {"folder": "/x", "sha256": "53aa5117" * 8},
        "recipe": RECIPE,
        "held_out": fold,
        "counts": {
            "questions": 282,
            "turns": 116232,
            "question_pairs": 558,
            "asked_pairs": 3999,
            "sentence_pairs": 66439,
        },
        "seconds": {"reading_and_mining": 2700.0, "training": 3125.0, "training_cpu": 1100.5},
        "negatives_from_cache": cached,
        "steps": 68,
        "pairs_trained": 2116,
    }


def test_the_card_states_the_run() -> None:
    text = card.render(record(cached=False))
    for fact in (
        "# localmem-chat-minilm-l6",
        "Apache-2.0",
        "`1bd865b01bd865b0…`",
        "282 questions, 116,232 distinct haystack turns",
        "(dev60.json)",
        "558 question → evidence-turn pairs",
        "2 epoch(s), batch 32, AdamW lr 2e-05",
        "68 steps over 2,116 pairs",
        "training\n  3,125.0 s wall / 1,100.5 s CPU",
        "--data train289.json.gz --exclude\ndev60.json --out DIR",
        "`scorer.json` beside this card",
        "--merged M --write-scorer",
    ):
        assert fact in text, fact
    assert "cache" not in text and "Cross-validation" not in text


def test_the_card_says_when_negatives_came_from_a_cache_and_which_fold_was_held_out() -> None:
    text = card.render(record(cached=True, fold={"fold": 0, "folds": 5, "questions": ["a", "b"]}))
    assert "read from a cache" in text and "fold 0 of 5 held out (2 questions" in text


def test_the_card_names_negatives_from_other_haystacks_and_the_flag_that_reproduces_them() -> None:
    plain = card.render(record(cached=False) | {"negatives": {"own_haystack": 30, "other_haystacks": 0}})
    assert "OTHER haystacks" not in plain and "--pooled-negatives" not in plain
    text = card.render(record(cached=False) | {"negatives": {"own_haystack": 30, "other_haystacks": 30}})
    assert "the 30 user turns of the OTHER haystacks" in text
    assert "dev60.json --pooled-negatives 30 --out DIR" in text
