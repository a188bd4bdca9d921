"""Semantic edges on a big store: past ``LINK_SCAN_ALL`` cues a new turn's cues are
compared only with the cues of its ``LINK_TURNS`` nearest turns. Checked on real SQLite
stores (the embedder is the hash fake: these tests are about which cues are compared)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from localmem.config import Settings
from localmem.records import SessionIn, TurnIn
from localmem.storage.write import graph
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

_WORDS = [
    "garden",
    "tomato",
    "basil",
    "bike",
    "chain",
    "shop",
    "river",
    "boat",
    "paint",
    "fence",
    "piano",
    "violin",
    "kayak",
    "tent",
    "camera",
    "letter",
]


def _sessions(n: int, seed: int) -> list[SessionIn]:
    rng = random.Random(seed)
    out = []
    for s in range(n):
        turns = tuple(
            TurnIn(text=". ".join(" ".join(rng.sample(_WORDS, 4)) for _ in range(rng.randint(1, 3))) + ".")
            for _ in range(6)
        )
        out.append(SessionIn(key=f"s{s}", turns=turns, started_at=f"2024-01-{1 + s % 28:02d}T10:00:00"))
    return out


def _edges(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch, scan_all: int, turns: int, parts: int = 4
) -> set[tuple]:
    monkeypatch.setattr(graph, "LINK_SCAN_ALL", scan_all)
    monkeypatch.setattr(graph, "LINK_TURNS", turns)
    monkeypatch.setattr(graph, "LINK_NEAR_CUES", 1)  # the test turns have 1-3 cues
    path = tmp_path / f"{name}.db"
    with Store(path, embedder=HashEmbedder(), settings=Settings(db=path)) as store:
        for part in range(parts):  # later writes link against the earlier ones too
            store.write_sessions(_sessions(40 // parts, seed=part))
        rows = store.conn.execute("SELECT src, dst, round(weight, 5) FROM edges WHERE kind = 'semantic'")
        return {tuple(r) for r in rows}


def test_near_turn_cues_covering_every_turn_link_exactly_like_a_full_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = _edges(tmp_path, "full", monkeypatch, scan_all=10**9, turns=10**6)
    near = _edges(tmp_path, "near", monkeypatch, scan_all=0, turns=10**6)
    assert full and near == full


def test_few_near_turns_link_only_among_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # One write: every turn is there when each is linked, so "nearest" means the same below.
    full = _edges(tmp_path, "full", monkeypatch, scan_all=10**9, turns=10**6, parts=1)
    few = _edges(tmp_path, "few", monkeypatch, scan_all=0, turns=8, parts=1)
    assert few and few != full
    with Store(tmp_path / "few.db", embedder=HashEmbedder(), settings=Settings(db=tmp_path / "few.db")) as store:
        view = store.mirrors()
        tm = view.turn
        for a, b, _w in few:
            # the pair was linked from one side: the other is among that side's 8 nearest turns
            near = []
            for x in (a, b):
                at = int(tm.index_of(np.array([x]))[0])
                near.append(set(tm.ids[tm.shortlist(tm.hamming(tm.codes[:, at]), None, 8)].tolist()))
            assert b in near[0] or a in near[1], (a, b)
