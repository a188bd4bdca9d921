"""The write path's vectors stay the same when the way they are computed changes
(batching, length sorting, the late-cue passes of long turns batched across turns,
pipelined writes): turn and statement-cue vectors of a few fixed turns, one of them
past MiniLM's 256-token window, against ``tests/data/embedding_golden.npz``, written by
the write path as it was before issue 15's ingest work (commit c4127fa). Tolerance:
max abs difference 1e-4 per component (what recall figures tolerate; float rounding
from other batch neighbours is ~1e-6). Needs the default model package."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from localmem.config import Settings
from localmem.models.embedding import OnnxMiniLM
from localmem.records import SessionIn, TurnIn
from localmem.storage.write.prepare import statement_spans
from localmem.storage.write.store import Store
from localmem.storage.write.vectorize import turn_vectors

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "embedding_golden.npz"
TOL = 1e-4

LONG = " ".join(
    f"On day {i} of the trip we visited the {w} museum and talked about {v} for a while."
    for i, (w, v) in enumerate(
        zip(
            ["science", "history", "art", "railway", "maritime", "natural", "war", "toy", "glass", "coin"] * 4,
            ["rockets", "kings", "painters", "engines", "ships", "fossils", "treaties", "puzzles", "vases", "gold"] * 4,
            strict=True,
        )
    )
)
TURNS = [
    ("Caroline", "I went to the LGBTQ support group yesterday. It was really powerful.", "2023-05-08T13:56:00"),
    ("Melanie", "That's great! How did it make you feel?", "2023-05-08T13:57:00"),
    ("user", LONG, "2023-05-30T23:40:00"),
    ("assistant", "Sure. Here are three ideas: bake bread. Plant basil! Or read a book?", None),
    ("", "ok", "2024-01-01T00:00:00"),
]


@pytest.fixture(scope="module")
def model() -> OnnxMiniLM:
    return OnnxMiniLM()


@pytest.fixture(scope="module")
def golden() -> tuple[np.ndarray, list[np.ndarray]]:
    g = np.load(GOLDEN)
    cues = np.split(g["cues"], np.cumsum(g["ncues"])[:-1])
    return g["turns"], cues


def specs() -> list[tuple[str, str, str | None, list[tuple[int, int]]]]:
    return [(sp, text, ts, statement_spans(text)) for sp, text, ts in TURNS]


def test_the_long_turn_has_cues_past_the_window(model: OnnxMiniLM) -> None:
    model.embed(["load"])
    assert len(model._tokenizer.encode(LONG).ids) == 256  # truncated: the late cues get passes of their own
    assert len(statement_spans(LONG)) == 40


def test_batched_vectors_match_the_golden(model: OnnxMiniLM, golden: tuple[np.ndarray, list[np.ndarray]]) -> None:
    tv, cv = turn_vectors(model, "span", specs())
    gt, gc = golden
    assert tv.shape == gt.shape and np.abs(tv - gt).max() <= TOL
    assert [c.shape for c in cv] == [c.shape for c in gc]
    assert max(float(np.abs(c - g).max()) for c, g in zip(cv, gc, strict=True)) <= TOL


def test_one_turn_at_a_time_matches_too(model: OnnxMiniLM, golden: tuple[np.ndarray, list[np.ndarray]]) -> None:
    gt, gc = golden
    for i, spec in enumerate(specs()):
        tv, cv = turn_vectors(model, "span", [spec])
        assert np.abs(tv[0] - gt[i]).max() <= TOL
        assert np.abs(cv[0] - gc[i]).max() <= TOL


def test_stored_vectors_of_a_pipelined_write_match(
    tmp_path: Path, model: OnnxMiniLM, golden: tuple[np.ndarray, list[np.ndarray]]
) -> None:
    # Two batches through Store.write_stream: every vector must land on its own turn/cue.
    db = tmp_path / "m.db"
    sessions = [
        SessionIn(key=f"s{i}", turns=(TurnIn(text=text, speaker=sp, timestamp=ts),), source="golden")
        for i, (sp, text, ts) in enumerate(TURNS)
    ]
    gt, gc = golden
    with Store(db, embedder=model, settings=Settings(db=db)) as store:
        list(store.write_stream([(sessions[:2], 0), (sessions[2:], 1)]))
        ids = [int(r[0]) for r in store.conn.execute("SELECT id FROM turns ORDER BY id")]
        assert len(ids) == len(TURNS)
        for i, tid in enumerate(ids):
            blob = store.conn.one("SELECT embedding FROM turn_vec WHERE turn_id = ?", (tid,))[0]
            assert np.abs(np.frombuffer(blob, dtype=np.float32) - gt[i]).max() <= TOL
            cues = store.conn.execute(
                "SELECT v.embedding FROM cues c JOIN cue_vec v ON v.cue_id = c.id "
                "WHERE c.turn_id = ? AND c.kind = 'statement' ORDER BY c.id",
                (tid,),
            ).fetchall()
            got = np.vstack([np.frombuffer(b, dtype=np.float32) for (b,) in cues])
            assert got.shape == gc[i].shape and np.abs(got - gc[i]).max() <= TOL
