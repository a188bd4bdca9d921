"""An ONNX sentence-embedder folder: loaded by path, embeds like the packaged model when
it holds the packaged weights, has its own model id, and is refused by a store written
with another embedder."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from localmem.errors import ConfigError, EmbedderMismatch
from localmem.models import onnx_folder
from localmem.models.embedding import OnnxMiniLM
from localmem.models.registry import default_embedder
from localmem.records import SessionIn, TurnIn
from localmem.storage.write.store import Store
from tests.helpers.embedders import make_folder

TEXTS = [
    "I adopted a golden retriever named Max last spring.",
    "What breed is my dog?",
    "We moved to Lisbon in May. The flat has a balcony! It faces the river.",
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_folder(tmp_path_factory.mktemp("emb") / "m")


def test_folder_with_the_packaged_weights_embeds_exactly_like_the_default(folder: Path) -> None:
    emb = default_embedder(str(folder))
    assert isinstance(emb, onnx_folder.OnnxFolderEmbedder)
    assert np.array_equal(emb.embed(TEXTS), OnnxMiniLM().embed(TEXTS))
    spans = [[(0, 5)], [], [(0, 20), (21, 44)]]
    a_turns, a_cues = emb.embed_with_spans(TEXTS, spans)
    b_turns, b_cues = OnnxMiniLM().embed_with_spans(TEXTS, spans)
    assert np.array_equal(a_turns, b_turns)
    assert all(np.array_equal(a, b) for a, b in zip(a_cues, b_cues, strict=True))


def test_model_id_names_the_weights(folder: Path, tmp_path: Path) -> None:
    emb = onnx_folder.OnnxFolderEmbedder(folder)
    digest = onnx_folder.weights_digest(folder / "model.onnx")
    assert emb.model_id == f"packaged-copy@{digest[:12]}" != OnnxMiniLM.model_id
    # other weights under the same name: another id
    other = tmp_path / "other.onnx"
    data = bytearray((folder / "model.onnx").read_bytes())
    data[-1] ^= 1  # any other byte: the id follows the bytes, not the name
    other.write_bytes(bytes(data))
    changed = make_folder(tmp_path / "changed", model=other)
    assert onnx_folder.OnnxFolderEmbedder(changed).model_id != emb.model_id


def test_a_store_refuses_vectors_of_another_embedder(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    turn = TurnIn(text="I adopted a dog named Max.", speaker="user", role="user", timestamp="2023-05-01T10:00:00")
    with Store(db, embedder=OnnxMiniLM()) as store:
        store.write_sessions([SessionIn(key="s1", turns=(turn,), started_at="2023-05-01T10:00:00")])
    with pytest.raises(EmbedderMismatch, match="packaged-copy@"):
        Store(db, embedder=onnx_folder.OnnxFolderEmbedder(folder))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: (d / "tokenizer.json").unlink(), "has no tokenizer.json"),
        (lambda d: (d / "embedder.json").write_text("{", "utf-8"), "not readable JSON"),
        (lambda d: _config(d, dim="384"), "key 'dim' must be a positive integer"),
        (lambda d: _config(d, format="other/1"), "key 'format'"),
        (lambda d: _config(d, pooling="cls"), "key 'pooling'"),
        (lambda d: _config(d, name="a@b"), "key 'name'"),
        (lambda d: _config(d, prompt_bar=1.5), "key 'prompt_bar' must be a number between -1 and 1"),
        (lambda d: _config(d, prompt_bar="high"), "key 'prompt_bar'"),
    ],
)
def test_a_bad_folder_is_a_config_error_naming_the_file_or_key(folder: Path, tmp_path: Path, edit, message) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    edit(bad)
    with pytest.raises(ConfigError, match=message):
        default_embedder(str(bad))


def test_a_folder_without_a_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"has no embedder\.json"):
        default_embedder(str(tmp_path))


def _config(folder: Path, **changes: object) -> None:
    path = folder / "embedder.json"
    cfg = json.loads(path.read_text("utf-8"))
    cfg.update(changes)
    path.write_text(json.dumps(cfg), "utf-8")


def test_the_weights_digest_is_remembered_per_file_state(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"weights one")
    cache = tmp_path / "cache"
    real = hashlib.sha256(b"weights one").hexdigest()
    assert onnx_folder.weights_digest(model, cache) == real
    (entry,) = (cache / "digests").iterdir()
    assert entry.stat().st_mode & 0o777 == 0o600 and (cache / "digests").stat().st_mode & 0o777 == 0o700
    entry.write_text("a" * 64, "ascii")  # what a later start reads instead of hashing
    assert onnx_folder.weights_digest(model, cache) == "a" * 64
    model.write_bytes(b"weights two")  # changed in place: another stamp, hashed again
    os.utime(model, ns=(1, 1))
    assert onnx_folder.weights_digest(model, cache) == hashlib.sha256(b"weights two").hexdigest()
    for damaged in (cache / "digests").iterdir():
        damaged.write_text("not a digest", "ascii")
    assert onnx_folder.weights_digest(model, cache) == hashlib.sha256(b"weights two").hexdigest()
    assert real != hashlib.sha256(b"weights two").hexdigest()


def test_an_unwritable_digest_cache_still_gives_the_digest(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"weights")
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x", "utf-8")
    assert onnx_folder.weights_digest(model, blocked) == hashlib.sha256(b"weights").hexdigest()
