from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np

from localmem.records import TurnIn
from localmem.retrieval.features import asks_assistant, in_window, relative_age
from localmem.retrieval.pool import candidate_pool
from localmem.retrieval.scorer import DEFAULT_WEIGHTS, FEATURES
from localmem.storage.reads.queries import Filter
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder


def test_asks_assistant_only_for_questions_about_its_words() -> None:
    assert asks_assistant("I'm looking back at our previous conversation about the Seco de Cordero recipe.")
    assert asks_assistant("Can you remind me what was the average improvement in framerate?")
    assert asks_assistant("What was the hotel you recommended in Rome?")
    assert not asks_assistant("Where does my sister Emily live?")
    assert not asks_assistant("Can you recommend a show for me to watch tonight?")


def test_relative_age_runs_from_the_question_back_to_the_oldest_turn() -> None:
    ts = np.array(["2023-01-01T00:00:00", "2023-01-11T00:00:00", "", "2023-01-21T00:00:00"], dtype="U19")
    assert relative_age(ts, None).tolist() == [1.0, 0.5, 0.5, 0.0]
    assert np.allclose(relative_age(ts, "2023-01-31T00:00:00"), [1.0, 2 / 3, 0.5, 1 / 3])
    assert relative_age(np.array(["", ""], dtype="U19"), None).tolist() == [0.5, 0.5]
    assert relative_age(np.array(["2023-01-01T00:00:00"] * 2), None).tolist() == [0.5, 0.5]


def test_in_window_allows_a_week_of_slack_after_the_span() -> None:
    ts = np.array(["2023-01-31T10:00:00", "2023-02-01T00:00:00", "2023-03-07T23:00:00", "2023-03-08T00:00:00", ""])
    span = (date(2023, 2, 1), date(2023, 2, 28))
    assert in_window(ts, span).tolist() == [0.0, 1.0, 1.0, 0.0, 0.0]
    assert in_window(ts, None).tolist() == [0.0] * 5


def test_pool_features_mark_assistant_turns_and_the_question_window(tmp_path: Path) -> None:
    with Store(tmp_path / "m.db", embedder=HashEmbedder()) as store:
        store.write(
            [TurnIn("I adopted a cat named Miso.", speaker="user", role="user", timestamp="2023-02-10T09:00:00"),
             TurnIn("Cats like Miso enjoy window perches.", speaker="assistant", role="assistant",
                    timestamp="2023-02-10T09:00:00")],
            session="s1",
        )  # fmt: skip
        store.write(
            [TurnIn("My cat Miso now sleeps all day.", speaker="user", role="user", timestamp="2023-05-01T09:00:00")],
            session="s2",
        )
        pool = candidate_pool(
            store, "What did you suggest for my cat Miso in February?", Filter(as_of="2023-05-30T00:00:00")
        )
        assert pool is not None
        assert pool.feats.shape == (3, len(FEATURES)) and len(DEFAULT_WEIGHTS.coef) == len(FEATURES)
        f = {name: pool.feats[:, i].tolist() for i, name in enumerate(FEATURES)}
        assert f["asst"] == [0.0, 1.0, 0.0]
        assert f["asst_q"] == [0.0, 1.0, 0.0]
        assert f["user_q"] == [1.0, 0.0, 1.0]
        assert f["inwin"] == [1.0, 1.0, 0.0]
        assert f["age"][2] < f["age"][0] == f["age"][1]
        assert max(f["scent"]) == 0.0 and min(f["scent"]) <= 0.0
