"""An embedder's own scorer weights (``scorer.json`` beside ``embedder.json``): every read
with that embedder scores with them, a malformed file is refused naming the file and the
field, and an embedder without one reads with the built-in weights, unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from localmem.config import Settings
from localmem.errors import ConfigError
from localmem.memory import open_store
from localmem.models.embedding import OnnxMiniLM
from localmem.records import TurnIn
from localmem.retrieval import scorer_file
from localmem.retrieval.pool import retrieve
from localmem.retrieval.reconstruct import reconstruct
from localmem.retrieval.scorer import DEFAULT_WEIGHTS, FEATURES, Weights
from localmem.storage.reads.queries import Filter
from localmem.storage.write.store import Store
from tests.helpers.cli import run as run_cli
from tests.helpers.embedders import make_folder
from tests.helpers.fakes import HashEmbedder

QUERY = "Where did I park the blue bicycle?"
TURNS = [
    TurnIn("I parked the blue bicycle behind the library.", speaker="user", role="user"),
    TurnIn("Lunch was a bowl of ramen with too much chili in it, and a green tea afterwards.", speaker="user"),
    TurnIn("The weather turned cold and grey over the whole long weekend at the coast.", speaker="user"),
]


class FolderHash(HashEmbedder):
    """The hash embedder with a model folder, as an ONNX embedder folder has one."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder


def _doc(model_id: str, **change: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": scorer_file.FORMAT,
        "embedder": model_id,
        "features": list(FEATURES),
        "coef": list(DEFAULT_WEIGHTS.coef),
        "intercept": DEFAULT_WEIGHTS.intercept,
    }
    doc.update(change)
    return doc


def _write(folder: Path, doc: dict[str, Any]) -> Path:
    path = folder / scorer_file.SCORER_NAME
    path.write_text(json.dumps(doc), "utf-8")
    return path


def test_the_folders_scorer_changes_the_ranking_of_every_read(tmp_path: Path) -> None:
    emb = FolderHash(tmp_path / "model")
    with Store(tmp_path / "m.db", embedder=emb, settings=Settings(db=tmp_path / "m.db")) as store:
        store.write(TURNS, session="s1")
        before = [t for t, _p in retrieve(store, QUERY, Filter(), 3)]
        assert "behind the library" in reconstruct(store, QUERY, 40).text
        # weights that prefer long turns and dislike the words and vectors the query shares
        inverted = [0.0] * len(FEATURES)
        for name, value in (("bm_n", -6.0), ("de_rel", -6.0), ("cd_rel", -6.0), ("logw", 4.0)):
            inverted[FEATURES.index(name)] = value
        _write(emb.folder, _doc(emb.model_id, coef=inverted, intercept=-3.0))
        after = [t for t, _p in retrieve(store, QUERY, Filter(), 3)]
        assert after[0] != before[0] and sorted(after) == sorted(before)
        assert "behind the library" not in reconstruct(store, QUERY, 40).text
        # an explicit weights argument still wins over the folder's
        assert [t for t, _p in retrieve(store, QUERY, Filter(), 3, DEFAULT_WEIGHTS)] == before


def test_without_a_scorer_file_the_built_in_weights_read(tmp_path: Path) -> None:
    assert scorer_file.weights_for(OnnxMiniLM()) is DEFAULT_WEIGHTS
    assert scorer_file.weights_for(HashEmbedder()) is DEFAULT_WEIGHTS
    assert scorer_file.weights_for(FolderHash(tmp_path / "bare")) is DEFAULT_WEIGHTS
    # the MiniLM weights as fitted (docs/benchmarks.md); a change here changes every default read
    assert (
        Weights(
            coef=(2.348, 2.43, 2.914, 1.056, 1.55, 1.242, 0.658, 2.91, 0.852, -5.06, 4.31, *[0.0] * 7),
            intercept=-11.561,
        )
        == DEFAULT_WEIGHTS
    )


def test_written_weights_read_back_and_a_rewrite_is_seen(tmp_path: Path) -> None:
    emb = FolderHash(tmp_path / "model")
    path = scorer_file.scorer_path(emb)
    assert path == emb.folder / "scorer.json"
    w = Weights(coef=tuple(float(i) / 7 for i in range(len(FEATURES))), intercept=-2.5)
    scorer_file.write_weights(path, w, emb.model_id, {"by": "a test"})
    assert scorer_file.weights_for(emb) == w
    w2 = Weights(coef=w.coef, intercept=-1.25)
    scorer_file.write_weights(path, w2, emb.model_id, {"by": "a test"})
    assert scorer_file.weights_for(emb) == w2
    assert json.loads(path.read_text("utf-8"))["fitted"] == {"by": "a test"}
    with pytest.raises(ConfigError, match="'coef', feature 'bm_n'"):
        scorer_file.write_weights(path, Weights(coef=(float("nan"),) * len(FEATURES)), emb.model_id, {})
    assert scorer_file.weights_for(emb) == w2 and not (emb.folder / "scorer.json.tmp").exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"features": list(reversed(FEATURES))}, "'features'"),
        ({"features": list(FEATURES[:-1])}, "'features'"),
        ({"coef": [1.0] * (len(FEATURES) - 1)}, "'coef'"),
        ({"coef": ["2.3", *[0.0] * (len(FEATURES) - 1)]}, "'coef', feature 'bm_n'"),
        ({"coef": [0.0, float("inf"), *[0.0] * (len(FEATURES) - 2)]}, "'coef', feature 'de_rel'"),
        ({"intercept": float("nan")}, "'intercept'"),
        ({"intercept": None}, "'intercept'"),
        ({"format": "other/1"}, "'format'"),
        ({"embedder": "someone-else@0123456789ab"}, "'embedder'"),
    ],
)
def test_a_malformed_scorer_file_is_refused_naming_the_field(
    tmp_path: Path, change: dict[str, Any], field: str
) -> None:
    emb = FolderHash(tmp_path / "model")
    path = _write(emb.folder, _doc(emb.model_id, **change))
    with pytest.raises(ConfigError) as err:
        scorer_file.weights_for(emb)
    assert str(path) in str(err.value) and field in str(err.value)


def test_a_store_with_a_broken_scorer_file_is_refused_when_it_opens(tmp_path: Path) -> None:
    folder = make_folder(tmp_path / "model")
    (folder / "scorer.json").write_text("{not json", "utf-8")
    db = tmp_path / "m.db"
    with pytest.raises(ConfigError, match=r"scorer\.json: not readable JSON"):
        open_store(Settings(db=db, embedder=str(folder)))
    proc = run_cli("--embedder", str(folder), "--db", str(db), "query", QUERY, check=False)
    assert proc.returncode == 2, proc.stderr
    assert str(folder / "scorer.json") in proc.stderr and "Traceback" not in proc.stderr
