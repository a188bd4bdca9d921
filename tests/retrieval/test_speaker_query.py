"""A query that names one speaker is embedded in that speaker's words (real store)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from localmem.config import RetrievalParams, Settings
from localmem.retrieval.pool import candidate_pool
from localmem.retrieval.speaker_query import first_person
from localmem.storage.reads.queries import Filter
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder, session

SPEAKERS = ["Caroline", "Melanie"]


def test_the_named_speaker_speaks_in_the_first_person() -> None:
    assert first_person("What activities does Melanie partake in?", SPEAKERS) == "What activities does I partake in?"
    assert first_person("What do Melanie's kids like?", SPEAKERS) == "What do my kids like?"
    assert first_person("What do melanie’s kids like?", SPEAKERS) == "What do my kids like?"
    assert first_person("When did Caroline Smith move?", ["Caroline Smith", "Melanie"]) == "When did I Smith move?"


def test_two_named_speakers_are_we_or_i_and_you() -> None:
    assert (
        first_person("What do Jon and Gina both have in common?", ["Jon", "Gina"]) == "What do we both have in common?"
    )
    assert first_person("Where is Jon and Gina's shop?", ["Jon", "Gina"]) == "Where is our shop?"
    assert first_person("What did Caroline give Melanie?", SPEAKERS) == "What did I give you?"
    # The first named speaks, whatever order the store lists them in.
    assert first_person("Did Melanie tell Caroline about Caroline's car?", SPEAKERS) == "Did I tell you about your car?"


def test_no_rewrite_without_one_or_two_named_speakers() -> None:
    assert first_person("Did Ann, Bo and Cy meet?", ["Ann", "Bo", "Cy"]) is None  # three
    assert first_person("What did we talk about?", SPEAKERS) is None
    assert first_person("What do Melanies like?", SPEAKERS) is None  # whole words only
    # Chat roles are not people: "the assistant" in a question stays as written.
    assert first_person("What did the assistant suggest?", ["user", "assistant"]) is None
    assert first_person("What did the user ask Melanie?", ["user", "Melanie"]) == "What did the user ask I?"


class RecordingEmbedder(HashEmbedder):
    """The hash embedder, keeping every text it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return super().embed(texts)


def _store(tmp_path: Path, on: bool) -> tuple[Store, RecordingEmbedder]:
    emb = RecordingEmbedder()
    settings = Settings(db=tmp_path / f"{on}.db", retrieval=RetrievalParams(speaker_query=on))
    store = Store(tmp_path / f"{on}.db", embedder=emb, settings=settings)
    store.write_sessions(
        [
            session(
                "s1",
                "2023-05-01T10:00:00",
                ("Caroline", "Melanie, did you finish the painting?"),
                ("Melanie", "I painted a sunset at the lake with my kids."),
            )
        ]
    )
    return store, emb


def test_the_pool_searches_with_the_first_person_vector_when_on(tmp_path: Path) -> None:
    store, emb = _store(tmp_path, on=True)
    try:
        emb.texts.clear()
        pool = candidate_pool(store, "What did Melanie paint with Melanie's kids?", Filter())
        assert pool is not None
        # embedded once, after the mirrors are read: in the speakers' words from the first query on
        assert emb.texts == ["What did I paint with my kids?"]
        assert np.allclose(pool.qvec, emb.embed(["What did I paint with my kids?"])[0])
        # Once the store's speakers are in memory, only the first-person text is embedded.
        emb.texts.clear()
        assert candidate_pool(store, "Where did Melanie paint?", Filter()) is not None
        assert emb.texts == ["Where did I paint?"]
        # A query naming nobody is embedded once, as written.
        emb.texts.clear()
        pool = candidate_pool(store, "Who painted a sunset?", Filter())
        assert pool is not None and emb.texts == ["Who painted a sunset?"]
    finally:
        store.close()


def test_a_speaker_new_since_the_last_read_is_still_seen(tmp_path: Path) -> None:
    store, emb = _store(tmp_path, on=True)
    try:
        assert candidate_pool(store, "What did Caroline ask?", Filter()) is not None  # mirrors in memory
        # Another connection (as another process would) writes a new speaker.
        other = Store(tmp_path / "True.db", embedder=HashEmbedder(), settings=store.settings)
        try:
            other.write_sessions([session("s2", "2023-06-01T10:00:00", ("Jon", "I opened a dance studio."))])
        finally:
            other.close()
        emb.texts.clear()
        pool = candidate_pool(store, "What did Jon open?", Filter())
        assert pool is not None
        # The query is embedded after the snapshot's mirrors are read: Jon's words at once.
        assert emb.texts == ["What did I open?"]
        assert np.allclose(pool.qvec, emb.embed(["What did I open?"])[0])
    finally:
        store.close()


def test_the_setting_off_keeps_the_query_as_written(tmp_path: Path) -> None:
    store, emb = _store(tmp_path, on=False)
    try:
        emb.texts.clear()
        pool = candidate_pool(store, "What did Melanie paint?", Filter())
        assert pool is not None and emb.texts == ["What did Melanie paint?"]
        assert np.allclose(pool.qvec, emb.embed(["What did Melanie paint?"])[0])
    finally:
        store.close()
