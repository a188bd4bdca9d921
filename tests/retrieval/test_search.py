"""``retrieval.search``: the browser's search is the read path's own four ranked lists
(``pool.ranked_lists``), fused by reciprocal rank, restricted to the turns a filter allows;
each hit names the lists that hold it."""

from __future__ import annotations

import numpy as np
import pytest

from localmem.errors import InputError
from localmem.retrieval.pool import LIST_NAMES, ranked_lists
from localmem.retrieval.search import search
from localmem.storage.reads.queries import Filter
from localmem.storage.write.store import Store
from tests.helpers.fakes import session


def _fill(store: Store) -> list[int]:
    res = store.write_sessions(
        [
            session(
                "a", "2024-03-01T10:00:00", ("Ana", "We hiked to the glacier lake on Sunday."), ("Ben", "Cold water?")
            ),
            session("b", "2024-03-08T10:00:00", ("Ana", "The bakery on Elm Street sells rye bread."), ("Ben", "Yum.")),
            session(
                "c", "2024-03-15T10:00:00", ("Ben", "The glacier trail was closed after the storm."), ("Ana", "Oh no.")
            ),
        ]
    )
    return [i for r in res for i in r.turn_ids]


def test_search_fuses_the_read_paths_lists(store: Store) -> None:
    ids = _fill(store)
    hits = search(store, "glacier", 10)
    lists = ranked_lists(store, "glacier", Filter(), 10)
    assert {h.turn_id for h in hits} == {t for lst in lists for t in lst}  # nothing the lists did not hold
    lexical = set(lists[LIST_NAMES.index("turn bm25")])
    assert lexical == {ids[0], ids[4]}
    assert {h.turn_id for h in hits[:2]} == lexical  # in several lists: ranked first
    assert all(h.words for h in hits if h.turn_id in lexical)
    assert all(h.lists for h in hits) and all(set(h.lists) <= set(LIST_NAMES) for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    words = search(store, "glacier", 10, match="words")
    assert {h.turn_id for h in words} == lexical and all(not h.meaning for h in words)
    meaning = search(store, "glacier", 10, match="meaning")
    assert meaning and all(not h.words for h in meaning)


def test_search_keeps_to_the_allowed_turns(store: Store) -> None:
    ids = _fill(store)
    allowed = np.array([ids[4], ids[5]], dtype=np.int64)
    assert {h.turn_id for h in search(store, "glacier", 10, allowed)} <= {ids[4], ids[5]}
    assert search(store, "glacier", 10, np.array([], dtype=np.int64)) == []
    with pytest.raises(InputError, match="needs words"):
        search(store, "  ", 10)
    with pytest.raises(InputError, match="match must be"):
        search(store, "glacier", 10, match="vibes")
