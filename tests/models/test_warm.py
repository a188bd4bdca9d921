"""The embedder warmed in a thread of its own (``registry.warm``) for an in-process query:
the opening store gets that very embedder, its vectors are the ones a cold load gives,
and nothing that goes wrong while warming reaches the caller but through the read itself.
With the real packaged MiniLM and onnxruntime; the CLI cases are real subprocesses."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from localmem.config import load_settings
from localmem.models import registry
from localmem.models.embedding import OnnxMiniLM

TEXTS = ["What did Maya say about Lisbon?", "hi"]


@pytest.fixture(autouse=True)
def no_leftovers() -> None:
    registry._warming.clear()


def warm_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "localmem-warm-embedder"]


def test_the_store_gets_the_warmed_embedder_with_the_same_vectors(tmp_path: Path) -> None:
    settings = load_settings(db=tmp_path / "m.db", embedder="minilm")
    registry.warm(settings.embedder)
    assert set(registry._warming) == {registry.MINILM}
    warmed = registry._warming[registry.MINILM]
    got = registry.embedder_for(settings)
    assert got is warmed and not registry._warming  # handed over once
    assert registry.embedder_for(settings) is not warmed  # the next opening makes its own
    for t in warm_threads():
        t.join(timeout=120)
    assert isinstance(got, OnnxMiniLM) and got._session is not None  # loaded by the thread
    assert np.array_equal(got.embed(TEXTS), OnnxMiniLM().embed(TEXTS))


def test_the_default_name_warms_the_packaged_default(tmp_path: Path) -> None:
    registry.warm("default")
    assert set(registry._warming) == {registry.TRAINED}
    # a store recording the trained model follows it by that name: the warmed one
    assert registry.default_embedder(registry.TRAINED) is not None and not registry._warming
    for t in warm_threads():
        t.join(timeout=120)


def test_a_bad_setting_is_left_to_the_opening(tmp_path: Path) -> None:
    settings = load_settings(db=tmp_path / "m.db", embedder=str(tmp_path / "missing.gguf"))
    registry.warm(settings.embedder)  # no error here...
    assert not registry._warming and not warm_threads()
    with pytest.raises(Exception, match="not found"):
        registry.embedder_for(settings)  # ...but where the store is opened


def test_a_load_that_fails_fails_in_the_read(tmp_path: Path) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    settings = load_settings(db=tmp_path / "m.db", embedder=str(broken))
    registry.warm(settings.embedder)
    for t in warm_threads():
        t.join(timeout=120)  # the thread ended quietly
    emb = registry.embedder_for(settings)
    with pytest.raises(Exception, match="cannot load embedding model"):
        emb.embed(TEXTS)


@pytest.mark.parametrize("kind", ["notdb", "folder"])
def test_a_query_that_fails_early_exits_cleanly_while_the_model_loads(tmp_path: Path, kind: str) -> None:
    """The store cannot be opened while the warm thread is still loading onnxruntime: the
    process waits for it and exits with the error's code and one line, never a crash."""
    db = tmp_path / "m.db"
    if kind == "notdb":
        db.write_text("this is not an SQLite file " * 40, "utf-8")
    else:
        db.mkdir()
    cmd = [sys.executable, "-m", "localmem", "--embedder", "minilm", "--db", str(db), "query", "what about Lisbon"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert 0 < done.returncode < 64, done.stderr  # an error code of ours, not a signal
    assert done.stderr.startswith("localmem: error:") and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr and not done.stdout
