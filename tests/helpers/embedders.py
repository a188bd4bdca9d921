"""An ONNX embedder folder for tests: the packaged MiniLM weights (or a given model file)
with the tokenizer and an ``embedder.json``, as ``localmem train`` writes one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from localmem.models import onnx_folder
from localmem.models.embedding import _packaged_onnx, minilm_tokenizer


def make_folder(where: Path, name: str = "packaged-copy", model: Path | None = None) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model or _packaged_onnx(), where / "model.onnx")
    minilm_tokenizer().save(str(where / "tokenizer.json"))
    config = {"format": onnx_folder.FORMAT, "name": name, "dim": 384, "max_tokens": 256, "pooling": "mean"}
    (where / "embedder.json").write_text(json.dumps(config), "utf-8")
    return where
