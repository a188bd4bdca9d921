"""The PyTorch side (the train extra): the encoder is the shipped model's arithmetic,
span pooling is embed_with_spans', and a training run is repeatable and exports a
folder localmem loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the train extra")
pytest.importorskip("onnx", reason="the train extra")

from localmem.models.embedding import OnnxMiniLM, minilm_tokenizer  # noqa: E402
from localmem.models.registry import default_embedder  # noqa: E402
from localmem.train import corpus, encoder, export, pairs, trainer  # noqa: E402
from localmem.train.base import base_folder  # noqa: E402
from localmem.train.batches import build  # noqa: E402

TEXTS = [
    "I adopted a golden retriever last spring. His name is Max.",
    "[2023-05-20 10:00] user: We moved to Lisbon in May. The flat faces the river!",
    "What breed is my dog?",
]


@pytest.fixture(scope="module")
def base() -> encoder.MiniLM:
    try:
        base_folder()
    except FileNotFoundError:
        pytest.skip("no fp32 MiniLM package installed (the train extra)")
    return encoder.load_base().eval()


def _tokens(model: encoder.MiniLM, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor, list]:  # type: ignore[type-arg]
    encs = minilm_tokenizer().encode_batch(texts)
    longest = max(len(e.ids) for e in encs)
    ids = torch.zeros((len(encs), longest), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, e in enumerate(encs):
        ids[r, : len(e.ids)] = torch.tensor(e.ids)
        mask[r, : len(e.ids)] = 1
    with torch.no_grad():
        return model(ids, mask), mask, encs


def test_encoder_gives_the_shipped_vectors(base: encoder.MiniLM) -> None:
    tokens, mask, _ = _tokens(base, TEXTS)
    ours = encoder.mean_pool(tokens, mask).numpy()
    shipped = OnnxMiniLM().embed(TEXTS)
    assert np.min(np.sum(ours * shipped, axis=1)) > 0.99  # the graph's weights are int8-rounded


def test_span_pool_is_embed_with_spans(base: encoder.MiniLM) -> None:
    text = TEXTS[1]
    spans = [(25, 48), (49, len(text))]
    tokens, _mask, encs = _tokens(base, [text])
    offsets = torch.tensor(encs[0].offsets)
    real = torch.tensor(encs[0].special_tokens_mask) == 0
    select = torch.stack([(real & (offsets[:, 0] < b) & (offsets[:, 1] > a)).float() for a, b in spans])
    ours = encoder.span_pool(tokens, torch.zeros(2, dtype=torch.long), select).numpy()
    _t, (shipped,) = OnnxMiniLM().embed_with_spans([text], [spans])
    assert np.min(np.sum(ours * shipped, axis=1)) > 0.99


def _corpus(tmp_path: Path) -> corpus.Corpus:
    def sess(i: int) -> list[dict[str, object]]:
        return [
            {"role": "user", "content": f"I planted {i} tomato seedlings on the balcony. They need water daily."},
            {"role": "assistant", "content": "What's your plan for the harvest this year?"},
            {"role": "user", "content": f"I want to make sauce from batch {i} and share it with my neighbours."},
        ]

    items = [
        {
            "question_id": f"q{i}",
            "question_type": "single-session-user",
            "question": f"How many tomato seedlings did I plant in batch {i}?",
            "question_date": "2023/05/30 (Tue) 10:00",
            "answer_session_ids": [f"s{i}"],
            "haystack_session_ids": [f"s{i}", f"f{i}"],
            "haystack_dates": ["2023/05/20 (Sat) 10:00"] * 2,
            "haystack_sessions": [
                [dict(t, has_answer=True) if j == 0 else t for j, t in enumerate(sess(i))],
                sess(100 + i),
            ],
        }
        for i in range(6)
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(items))
    return corpus.load(path)


def _run(tmp_path: Path) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], float]:
    c = _corpus(tmp_path)
    qp = [p for p in pairs.question_pairs(c)]
    mined = [pairs.Pair(p.query, p.positive, (p.positive.replace("s", "f", 1),), p.kind) for p in qp]
    model = encoder.load_base()
    before = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    recipe = trainer.Recipe(batch=4, asked=4, sentences=4, threads=1, lr=1e-4)
    answers = trainer.answers_of(c)
    probe = build(
        mined[:4], c.turns, answers, minilm_tokenizer(64), minilm_tokenizer(128), __import__("random").Random(0)
    )
    with torch.no_grad():
        loss_before = float(trainer.loss(model, probe, 1.0)[0])
    trainer.train(model, c, mined, pairs.asked_pairs(c), pairs.sentence_pairs(c), recipe)
    with torch.no_grad():
        loss_after = float(trainer.loss(model, probe, 1.0)[0])
    return before, {k: v.detach().numpy() for k, v in model.state_dict().items()}, loss_after - loss_before


def test_training_is_repeatable_lowers_the_loss_and_exports(base: encoder.MiniLM, tmp_path: Path) -> None:
    before, first, change = _run(tmp_path)
    assert change < 0
    _before, second, _ = _run(tmp_path)
    assert all(np.array_equal(first[k], second[k]) for k in first)  # same seed, same weights
    assert any(not np.array_equal(first[k], before[k]) for k in first)
    export.write_folder(tmp_path / "m", first, before, "test-model", "# card\n")
    emb = default_embedder(str(tmp_path / "m"))
    assert emb.model_id.startswith("test-model@")
    vecs = emb.embed(TEXTS)
    assert vecs.shape == (3, 384) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
