"""An ONNX embedder folder for tests: the packaged MiniLM weights (or a given model file)
with the tokenizer and an ``embedder.json``, as ``localmem train`` writes one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from localmem.models import onnx_folder
from localmem.models.embedding import _packaged_onnx, minilm_tokenizer


def make_folder(where: Path, name: str = "packaged-copy", model: Path | None = None) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model or _packaged_onnx(), where / "model.onnx")
    minilm_tokenizer().save(str(where / "tokenizer.json"))
    config = {"format": onnx_folder.FORMAT, "name": name, "dim": 384, "max_tokens": 256, "pooling": "mean"}
    (where / "embedder.json").write_text(json.dumps(config), "utf-8")
    return where


def make_other_folder(where: Path, name: str = "negated-words") -> Path:
    """A real ONNX embedder folder whose weights differ from the packaged model's: its
    int8 word-embedding table negated in place (same graph, same size, same tokenizer),
    so its vectors differ from MiniLM's everywhere. Built in ~0.1 s, no download."""
    from localmem.models.onnx_graph import _fields, _tensor_head

    data = bytearray(_packaged_onnx().read_bytes())
    view = memoryview(data)
    for num, _w, a, b, _s in _fields(view):
        if num != 7:  # ModelProto.graph
            continue
        for gnum, _gw, ga, gb, _gs in _fields(view[a:b]):
            if gnum != 5:  # GraphProto.initializer
                continue
            tensor = view[a + ga : a + gb]
            _name, dtype, dims = _tensor_head(tensor)
            if dtype != 3 or dims != [30522, 384]:  # the int8 word table
                continue
            for tnum, _tw, ta, tb, _ts in _fields(tensor):
                if tnum == 9:  # TensorProto.raw_data
                    lo, hi = a + ga + ta, a + ga + tb
                    q = np.frombuffer(bytes(data[lo:hi]), dtype=np.int8)
                    data[lo:hi] = (-q).astype(np.int8).tobytes()
                    model = where / "negated.onnx"
                    where.mkdir(parents=True, exist_ok=True)
                    view.release()
                    model.write_bytes(bytes(data))
                    return make_folder(where, name, model)
    raise AssertionError("the packaged model has no int8 word table")
