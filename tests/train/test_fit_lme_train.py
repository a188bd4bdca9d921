"""``bench fit --lme-train``: a second LongMemEval file (train289 for issue 39) is its own
data set in the fit, on real stores (HashEmbedder stands in for the model)."""

from __future__ import annotations

import json
from pathlib import Path

from localmem.bench import fit
from localmem.config import load_settings
from tests.helpers.fakes import HashEmbedder
from tests.helpers.traindata import ITEMS


def _locomo(tmp_path: Path) -> Path:
    def conv(sid: str) -> dict[str, object]:
        return {
            "sample_id": sid,
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bo",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy called Rex."},
                    {"speaker": "Bo", "dia_id": "D1:2", "text": "Cute! What does he eat?"},
                ],
                "session_2_date_time": "10:00 am on 1 June, 2023",
                "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Rex learned to sit."}],
            },
            "qa": [
                {"question": "What is the name of Ann's puppy?", "answer": "Rex", "evidence": ["D1:1"], "category": 4},
                {"question": "What did Rex learn?", "answer": "sit", "evidence": ["D2:1"], "category": 4},
            ],
        }

    path = tmp_path / "lo.json"
    path.write_text(json.dumps([conv("c1"), conv("c2")]), "utf-8")
    return path


def test_a_second_lme_file_is_its_own_data_set(tmp_path: Path) -> None:
    train = tmp_path / "train.json"
    train.write_text(json.dumps(ITEMS), "utf-8")
    settings = load_settings(db=tmp_path / "unused.db")
    result = fit.run(
        _locomo(tmp_path), [50, 200], tmp_path / "w", HashEmbedder(), settings,
        lme_train=train, lme_train_workdir=tmp_path / "t", lme_train_limit=2,
    )  # fmt: skip
    assert result["questions"] == {"locomo": 4, "longmemeval-train": 2}
    assert sorted(p.name for p in (tmp_path / "t").glob("lme-*.db")) == ["lme-q1.db", "lme-q2.db"]
    rows = {(r["weights"], r["budget"]) for r in result["rows"]["longmemeval-train"]}
    assert rows == {(w, b) for w in ("shipped", "held-out", "in-sample") for b in (50, 200)}
    # its questions fall in folds by index mod 6, as dev60's do
    assert sorted(k for k in result["fold_weights"] if k.startswith("lme")) == ["lme-fold-0", "lme-fold-1"]
    assert "longmemeval-train evidence recall" in fit.table(result)
