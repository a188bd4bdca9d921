"""The int8 word-table edit of an ONNX graph: bit-identical output on real onnxruntime,
left alone wherever the pattern does not hold exactly."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from localmem.errors import ModelError
from localmem.models import onnx_graph
from localmem.models.embedding import OnnxMiniLM, _packaged_onnx
from localmem.models.onnx_graph import GraphFormatError, gather_int8_rows

_b, _i = onnx_graph._enc_bytes, onnx_graph._enc_int


def _session(model: bytes | str) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])


def _tensor(name: str, arr: np.ndarray) -> bytes:
    dtype = {np.dtype(np.int8): 3, np.dtype(np.float32): 1}[arr.dtype]
    dims = b"".join(_i(1, d) for d in arr.shape)
    return dims + _i(2, dtype) + _b(8, name.encode()) + _b(9, arr.tobytes())


def _value_info(name: str, elem_type: int, rank: int) -> bytes:
    shape = b"".join(_b(1, _b(2, f"d{k}".encode())) for k in range(rank))  # symbolic dims
    tensor_type = _i(1, elem_type) + _b(2, shape)
    return _b(1, name.encode()) + _b(2, _b(1, tensor_type))


def _tiny_model(scale_shape: tuple[int, int], cast_twice: bool = False) -> bytes:
    """ids -> Gather(Mul(Cast(q), s), ids), hand-encoded like the packaged model."""
    rng = np.random.default_rng(3)
    q = rng.integers(-127, 128, size=(7, 4)).astype(np.int8)
    s = rng.uniform(0.001, 0.01, size=scale_shape).astype(np.float32)
    enc = onnx_graph._enc_node
    nodes = [
        enc("Cast", ["q"], ["qf"], "cast", {"to": 1}),
        enc("Mul", ["qf", "s"], ["table"], "mul", {}),
        enc("Gather", ["table", "ids"], ["out"], "gather", {"axis": 0}),
    ]
    outputs = [_value_info("out", 1, 3)]
    if cast_twice:  # the dequantized table has a second reader, so it must stay whole
        nodes.append(enc("ReduceSum", ["table"], ["total"], "sum", {"keepdims": 0}))
        outputs.append(_value_info("total", 1, 0))
    graph = b"".join(_b(1, n) for n in nodes) + _b(2, b"tiny")
    graph += _b(5, _tensor("q", q)) + _b(5, _tensor("s", s))
    graph += _b(11, _value_info("ids", 7, 2)) + b"".join(_b(12, o) for o in outputs)
    opset = _b(1, b"") + _i(2, 17)
    return _i(1, 8) + _b(7, graph) + _b(8, opset)


def _run(model: bytes, ids: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(x) for x in _session(model).run(None, {"ids": ids})]


def test_tiny_model_is_rewritten_and_gives_the_same_bits() -> None:
    model = _tiny_model((7, 1))
    edited = gather_int8_rows(model)
    assert edited != model
    assert b"gather_int8" in edited
    assert gather_int8_rows(edited) is edited  # nothing left to rewrite
    ids = np.array([[0, 6, 3], [2, 2, 5]], dtype=np.int64)
    before, after = _run(model, ids), _run(edited, ids)
    assert before[0].shape == (2, 3, 4)
    np.testing.assert_array_equal(before[0], after[0])


@pytest.mark.parametrize("scale_shape", [(1, 4), (7, 4)])
def test_a_scale_that_is_not_per_row_is_left_alone(scale_shape: tuple[int, int]) -> None:
    # Gathering a per-column (1, 4) or full (7, 4) scale by row id would be wrong.
    model = _tiny_model(scale_shape)
    assert gather_int8_rows(model) is model


def test_a_table_with_another_reader_is_left_alone() -> None:
    model = _tiny_model((7, 1), cast_twice=True)
    assert gather_int8_rows(model) is model
    _run(model, np.array([[1]], dtype=np.int64))  # the hand-made model itself is valid


def test_packaged_model_gives_bit_identical_token_vectors() -> None:
    raw = _packaged_onnx().read_bytes()
    edited = gather_int8_rows(raw)
    assert edited is not raw and len(edited) < len(raw) + 1024
    assert gather_int8_rows(edited) is edited
    rng = np.random.default_rng(0)
    original, rewritten = _session(str(_packaged_onnx())), _session(edited)
    for rows, length in ((1, 9), (3, 40), (2, 256)):
        ids = rng.integers(1000, 30000, size=(rows, length)).astype(np.int64)
        ids[:, 0], ids[:, -1] = 101, 102
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        np.testing.assert_array_equal(original.run(None, feed)[0], rewritten.run(None, feed)[0])


def test_bytes_that_are_not_a_model_are_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GraphFormatError):
        gather_int8_rows(b"\x0a\xff\xff\xff\xff\x0f")  # a field longer than the buffer
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"\x0f not a model")
    with pytest.raises(ModelError, match="cannot load embedding model"):
        OnnxMiniLM(model_path=bad).embed(["hello"])
