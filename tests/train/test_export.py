"""Export: int8 rounding as the shipped graph has it, found by value; with the train
extra, the base checkpoint exported this way IS the shipped file, byte for byte."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from localmem.models.embedding import _packaged_onnx
from localmem.train import export
from localmem.train.base import UNUSED, base_folder


def test_quantize_is_symmetric_per_row_or_column() -> None:
    w = np.array([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0]], dtype=np.float32)
    q, s = export.quantize(w, axis=1)
    assert s.shape == (2, 1) and s[0, 0] == np.float32(2.0 / 127)
    assert q.dtype == np.int8 and q[0].tolist() == [64, -127, 32] and q[1].tolist() == [0, 0, 0]
    q, s = export.quantize(w, axis=0)
    assert s.shape == (1, 3) and q[0].tolist() == [127, -127, 127]


def _graph(base: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """What the exporter left: an int8 table (per row), a transposed int8 matrix (per
    column), a float bias under the ``inner.`` prefix, and a shape constant."""
    g: dict[str, np.ndarray] = {}
    g["inner.emb.weight_q"], g["inner.emb.weight_scale"] = export.quantize(base["emb.weight"], axis=1)
    g["val_7_q"], g["val_7_scale"] = export.quantize(base["dense.weight"].T, axis=0)
    g["inner.dense.bias"] = base["dense.bias"]
    g["val_3"] = np.array([1, 2], dtype=np.int64)
    return g


def test_mapping_finds_each_weight_by_value() -> None:
    rng = np.random.default_rng(0)
    base = {
        "emb.weight": rng.normal(size=(6, 4)).astype(np.float32),
        "dense.weight": rng.normal(size=(3, 4)).astype(np.float32),
        "dense.bias": rng.normal(size=3).astype(np.float32),
    }
    assert export.mapping(_graph(base), base) == {
        "inner.emb.weight_q": ("emb.weight", False, True),
        "val_7_q": ("dense.weight", True, True),
        "inner.dense.bias": ("dense.bias", False, False),
    }
    # a checkpoint tensor the graph does not hold, or a graph weight nothing matches: refused
    with pytest.raises(ValueError, match="does not hold: extra"):
        export.mapping(_graph(base), {**base, "extra": np.zeros(2, np.float32)})
    other = dict(base, **{"dense.weight": -base["dense.weight"]})
    with pytest.raises(ValueError, match="val_7_q matches 0"):
        export.mapping(_graph(base), other)


def test_the_base_checkpoint_exports_to_the_shipped_file(tmp_path: Path) -> None:
    pytest.importorskip("onnx", reason="the train extra")
    st = pytest.importorskip("safetensors.numpy", reason="the train extra")
    try:
        folder = base_folder()
    except FileNotFoundError:
        pytest.skip("no fp32 MiniLM package installed (the train extra)")
    base = {k: v for k, v in st.load_file(str(folder / "model.safetensors")).items() if k not in UNUSED}
    export.write_folder(tmp_path / "m", base, base, "reexport", "# card\n")
    written = hashlib.sha256((tmp_path / "m" / "model.onnx").read_bytes()).hexdigest()
    assert written == hashlib.sha256(_packaged_onnx().read_bytes()).hexdigest()
