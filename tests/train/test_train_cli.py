"""``localmem train`` through real subprocesses: help, the held-out ranking check with
the real default embedder, and a clear error where PyTorch is missing."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.embedders import make_folder
from tests.helpers.traindata import ITEMS


def run(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "localmem", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=os.environ.copy())


def test_help() -> None:
    for args in (["train", "--help"], ["train", "embedder", "--help"], ["train", "eval", "--help"]):
        proc = run(*args)
        assert proc.returncode == 0 and "usage: localmem train" in proc.stdout


def test_eval_ranks_held_out_evidence_per_embedder(tmp_path: Path) -> None:
    data = tmp_path / "lme.json"
    data.write_text(json.dumps(ITEMS))
    folder = make_folder(tmp_path / "copy")
    proc = run("train", "eval", "--data", str(data), "--model", "minilm", "--model", str(folder), "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # the 5 user turns: no evidence turn is the assistant's, so its 2 turns are not ranked
    assert result["questions"] == 3 and result["turns"] == 5
    default, copy = result["rows"]  # MiniLM and a folder of its own weights
    assert default["embedder"] == "all-MiniLM-L6-v2-onnx-int8" and copy["embedder"].startswith("packaged-copy@")
    # the same weights rank the same; on a haystack of 1-2 sessions every list finds all
    assert {k: v for k, v in default.items() if k != "embedder"} == {k: v for k, v in copy.items() if k != "embedder"}
    assert default["haystack turn@10"] == 100.0
    assert "| embedder |" in proc.stdout


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="PyTorch is installed here")
def test_training_without_torch_says_what_to_install(tmp_path: Path) -> None:
    proc = run("train", "embedder", "--data", str(tmp_path / "x.json"), "--out", str(tmp_path / "m"))
    assert proc.returncode != 0
    assert "train extra" in proc.stderr and "Traceback" not in proc.stderr


def test_a_bad_fold_is_refused(tmp_path: Path) -> None:
    proc = run("train", "eval", "--data", str(tmp_path / "x.json"), "--fold", "5", "--folds", "5")
    assert proc.returncode != 0 and "--fold must be in 0..4" in proc.stderr


def test_eval_on_a_sample_keeps_every_evidence_turn(tmp_path: Path) -> None:
    data = tmp_path / "lme.json"
    data.write_text(json.dumps(ITEMS))
    proc = run("train", "eval", "--data", str(data), "--sample", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["turns"] == 4 and result["sample"] == 1  # the 3 evidence turns and 1 of the 2 others
    assert "(a random 1 of the distractors)" in proc.stdout
