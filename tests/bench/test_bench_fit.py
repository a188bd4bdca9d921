"""``bench fit`` end to end on real stores (HashEmbedder): LoCoMo conversations, the
LongMemEval questions per haystack and the same questions asked of one merged store."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from localmem.bench import fit
from localmem.config import load_settings
from localmem.models import registry
from tests.helpers.benchdata import locomo_doc, merged_items
from tests.helpers.cli import run as run_cli
from tests.helpers.fakes import HashEmbedder


def _locomo(tmp_path: Path) -> Path:
    a = locomo_doc()[0]
    a["qa"] = [
        {"question": "What is the name of Ann's puppy?", "answer": "Rex", "evidence": ["D1:1"], "category": 4},
        {"question": "What did Rex learn?", "answer": "sit", "evidence": ["D2:1"], "category": 4},
    ]
    b = copy.deepcopy(a)
    b["sample_id"] = "conv-y"
    path = tmp_path / "lo.json"
    path.write_text(json.dumps([a, b]), "utf-8")
    return path


def test_fit_reports_the_merged_store_as_its_own_data_set(tmp_path: Path) -> None:
    lme = tmp_path / "lme.json"
    lme.write_text(json.dumps(merged_items()), "utf-8")
    # qc sees nothing in its own store (its one session is dated after it): no pool there.
    result = fit.run(
        _locomo(tmp_path), [1000], tmp_path / "w", HashEmbedder(), load_settings(),
        lme=lme, lme_workdir=tmp_path / "h", merged_workdir=tmp_path / "m",
    )  # fmt: skip
    assert result["questions"] == {"locomo": 4, "longmemeval": 2, "longmemeval-merged": 3}
    assert (tmp_path / "m" / "lme-merged.db").is_file()
    merged = {r["weights"]: r for r in result["rows"]["longmemeval-merged"]}
    assert set(merged) == {"shipped", "held-out", "in-sample"}
    # qa and qb find their evidence in the 5-turn store; qc's is dated after its question.
    assert merged["shipped"]["single-session-user"] == 100.0 and merged["shipped"]["knowledge-update"] == 0.0
    # The merged questions share their per-haystack folds: no extra fold weights.
    assert sorted(k for k in result["fold_weights"] if k.startswith("lme")) == [f"lme-fold-{i}" for i in range(3)]
    assert "longmemeval-merged evidence recall" in fit.table(result)


def test_fit_merged_needs_lme(tmp_path: Path) -> None:
    proc = run_cli("bench", "fit", "--data", str(_locomo(tmp_path)), "--merged", str(tmp_path / "m"), check=False)
    assert proc.returncode == 3 and "--merged" in proc.stderr and "--lme" in proc.stderr


@pytest.mark.parametrize(("visible", "want"), [(500, 30), (3000, 30), (12000, 60), (10**6, 120)])
def test_depth_grows_with_the_visible_store_and_is_bounded(visible: int, want: int) -> None:
    from localmem.retrieval.pool import depth

    assert depth(30, 3000, visible) == want
    assert depth(30, 0, visible) == 30


class _FolderHash(HashEmbedder):
    """The hash embedder with a model folder (where an ONNX embedder keeps scorer.json)."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder


def test_write_scorer_puts_the_fitted_weights_where_reads_take_them(tmp_path: Path) -> None:
    from localmem.retrieval import scorer_file

    data, emb = _locomo(tmp_path), _FolderHash(tmp_path / "model")
    first = fit.run(data, [40, 1000], tmp_path / "w", emb, load_settings(), write_scorer=True)
    doc = json.loads((emb.folder / "scorer.json").read_text("utf-8"))
    assert doc["embedder"] == emb.model_id and doc["features"] == first["features"]
    assert [round(c, 3) for c in doc["coef"]] == first["fitted_weights"]["coef"]
    assert doc["fitted"]["questions"] == {"locomo": 4} and set(doc["fitted"]["held_out_recall"]["locomo"]) == {
        "40",
        "1000",
    }
    assert first["scorer_file"] == str(emb.folder / "scorer.json") and "written to" in fit.table(first)

    # the next fit's "shipped" is what a read with this embedder uses now: the weights just written
    def recall(result: dict[str, Any]) -> dict[tuple[str, int], float]:
        return {(r["weights"], r["budget"]): r["all"] for r in result["rows"]["locomo"]}

    assert recall(first)[("shipped", 40)] != recall(first)[("in-sample", 40)]  # the built-in weights differ
    again = recall(fit.run(data, [40, 1000], tmp_path / "w", emb, load_settings()))
    assert all(again[("shipped", b)] == again[("in-sample", b)] for b in (40, 1000))
    assert scorer_file.weights_for(emb) != fit.DEFAULT_WEIGHTS


def test_write_scorer_needs_an_embedder_folder(tmp_path: Path) -> None:
    data = _locomo(tmp_path)
    proc = run_cli("--embedder", "minilm", "bench", "fit", "--data", str(data), "--write-scorer", check=False)
    assert proc.returncode == 3 and "--write-scorer" in proc.stderr and "--embedder FOLDER" in proc.stderr
    # the default is a packaged folder: its shipped weights are never rewritten in place
    shipped = (registry.TRAINED_FOLDER / "scorer.json").read_bytes()
    packaged = run_cli("bench", "fit", "--data", str(data), "--write-scorer", check=False)
    assert packaged.returncode == 3 and "packaged embedder" in packaged.stderr and "--embedder COPY" in packaged.stderr
    assert (registry.TRAINED_FOLDER / "scorer.json").read_bytes() == shipped
