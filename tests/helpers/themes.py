"""Sessions about a few recurring things (garden, bike, job, dinner) and an embedder that
makes turns about one thing similar (``ConceptEmbedder``), for tests of topics and themes;
``theme_of`` finds the theme that groups some sessions."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from localmem.records import SessionIn
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder, session

CONCEPTS = {
    word: i
    for i, words in enumerate(
        [
            ("garden", "tomatoes", "basil", "compost", "watering", "frost"),
            ("bike", "chain", "brakes", "shop", "ride"),
            ("job", "interview", "bank", "clerk"),
            ("pasta", "pesto", "dinner", "cook", "cooked"),
        ]
    )
    for word in words
}


class ConceptEmbedder(HashEmbedder):
    """Words of one concept share a dimension, every word adds hashed noise: turns about
    the same thing are similar, as with a real model, without loading one."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        noise = super().embed(texts)
        out = np.zeros_like(noise)
        for i, text in enumerate(texts):
            for w in re.findall(r"[a-z]+", text.lower()):
                if w in CONCEPTS:
                    out[i, CONCEPTS[w]] += 1.0
            out[i] /= max(float(np.linalg.norm(out[i])), 1.0)
        out += 0.5 * noise
        return out / np.linalg.norm(out, axis=1, keepdims=True)


GARDEN = [
    ("Ana", "My garden tomatoes and basil need compost and watering."),
    ("Ben", "Garden tomatoes love compost; basil loves watering."),
    ("Ana", "Watering the garden tomatoes and basil every evening."),
]


GARDEN_AGAIN = [
    ("Ben", "Your garden tomatoes and basil look great after the compost."),
    ("Ana", "Watering the garden tomatoes and basil paid off."),
]


GARDEN_FROST = [
    ("Ana", "Frost in the garden, the tomatoes and basil need compost."),
    ("Ben", "Keep watering the garden tomatoes and basil after the frost."),
]


BIKE = [
    ("Ben", "My bike chain broke and the bike brakes squeak."),
    ("Ana", "The bike shop can fix the bike chain and brakes."),
    ("Ben", "The shop fixed my bike chain and brakes."),
]


BIKE_AGAIN = [
    ("Ana", "My bike chain and brakes held on the ride to work."),
    ("Ben", "Good, the bike shop did the chain and brakes well."),
]


JOB = [
    ("Ana", "I have a job interview on Monday at the bank."),
    ("Ben", "Good luck with the interview, what job is it?"),
    ("Ana", "A job as a clerk at the bank, the interview is at nine."),
]


DINNER = [
    ("Ben", "We cooked pasta with pesto for dinner."),
    ("Ana", "Pesto pasta is my favourite dinner."),
    ("Ben", "Next dinner we cook pasta with cream."),
]


def six_sessions() -> list[SessionIn]:
    return [
        session("s1", "2024-01-05T10:00:00", *GARDEN),
        session("s2", "2024-02-10T09:00:00", *BIKE),
        session("s3", "2024-03-01T09:00:00", *JOB),
        session("s4", "2024-03-10T09:00:00", *DINNER),
        session("s5", "2024-04-10T09:00:00", *GARDEN_AGAIN),
        session("s6", "2024-05-10T09:00:00", *BIKE_AGAIN),
    ]


def theme_sessions(store: Store) -> dict[int, set[str]]:
    """Each theme's sessions, from the session topics it groups."""
    out: dict[int, set[str]] = {}
    for theme, key in store.conn.execute(
        "SELECT x.theme_id, s.key FROM theme_topics x JOIN topic_turns tt ON tt.topic_id = x.topic_id "
        "JOIN turns t ON t.id = tt.turn_id JOIN sessions s ON s.id = t.session_id"
    ):
        out.setdefault(int(theme), set()).add(str(key))
    return out


def theme_of(store: Store, session_keys: set[str]) -> int:
    found = [t for t, keys in theme_sessions(store).items() if keys == session_keys]
    assert len(found) == 1, theme_sessions(store)
    return found[0]
