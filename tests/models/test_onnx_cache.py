"""The embedding session's cache (localmem/models/onnx_cache.py) with the real packaged
MiniLM and onnxruntime: saved once, loaded after, bit-identical vectors, and every way
the cache can fail falls back to building the session."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from localmem.models import onnx_cache
from localmem.models.embedding import OnnxMiniLM, _packaged_onnx
from localmem.models.onnx_graph import gather_int8_rows

TEXTS = ["What did Maya say about Lisbon?", "hi", "I switched to the Brooks Ghost shoes, they feel much softer. " * 8]


def options(level: Any) -> Any:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = level
    opts.log_severity_level = 3
    return opts


def built_from_source() -> Any:
    model = gather_int8_rows(_packaged_onnx().read_bytes())
    return onnx_cache.build(ort, model, options(ort.GraphOptimizationLevel.ORT_ENABLE_ALL))


def test_saved_once_then_loaded_with_the_same_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "models"
    first = onnx_cache.session(ort, _packaged_onnx(), options, folder)
    (entry,) = folder.iterdir()
    assert entry.name == onnx_cache.cache_key(ort, _packaged_onnx())
    assert sorted(p.name for p in entry.iterdir()) == sorted([onnx_cache.GRAPH, onnx_cache.WEIGHTS, onnx_cache.SOURCE])
    assert (entry / onnx_cache.SOURCE).read_text("utf-8") == str(_packaged_onnx().resolve())
    # the weights in their own file (the graph alone is small): a load maps them
    assert (entry / onnx_cache.WEIGHTS).stat().st_size > 100 * (entry / onnx_cache.GRAPH).stat().st_size
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in entry.iterdir())
    assert stat.S_IMODE(folder.stat().st_mode) == stat.S_IMODE(entry.stat().st_mode) == 0o700
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary folder left
    # the kernels' pre-packed weights are saved with the graph: a load maps them, packs nothing
    assert b"prepacked" in (entry / onnx_cache.GRAPH).read_bytes()

    built: list[bytes] = []
    real_build = onnx_cache.build
    monkeypatch.setattr(onnx_cache, "build", lambda *a: built.append(b"") or real_build(*a))
    second = onnx_cache.session(ort, _packaged_onnx(), options, folder)
    assert not built  # loaded from the files, nothing built
    assert onnx_cache.same_output(first, second) and onnx_cache.same_output(second, built_from_source())


def test_the_plain_form_is_saved_when_the_prepacked_one_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runtime whose pre-packed form does not load to the same output still gets a cached
    session: the plain weights, checked the same way."""
    folder = tmp_path / "models"
    real_same = onnx_cache.same_output

    def prepacked_differs(a: Any, b: Any) -> bool:
        (graph,) = folder.glob(f".*.tmp/{onnx_cache.GRAPH}")
        return b"prepacked" not in graph.read_bytes() and real_same(a, b)

    monkeypatch.setattr(onnx_cache, "same_output", prepacked_differs)
    onnx_cache.session(ort, _packaged_onnx(), options, folder)
    (entry,) = folder.iterdir()
    assert entry.name == onnx_cache.cache_key(ort, _packaged_onnx())
    assert b"prepacked" not in (entry / onnx_cache.GRAPH).read_bytes()
    monkeypatch.undo()
    assert onnx_cache.same_output(onnx_cache.session(ort, _packaged_onnx(), options, folder), built_from_source())


def test_the_plain_form_is_saved_when_the_prepacked_one_cannot_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runtime that refuses to save the pre-packed form (its build raises) still gets a
    cached session, the plain weights', and no marker that would stop every later try."""
    folder = tmp_path / "models"
    real_build = onnx_cache.build

    def refuses_prepacked(ort_: Any, model: bytes, opts: Any) -> Any:
        asked = ""
        with contextlib.suppress(RuntimeError):  # an option never set reads as an error
            asked = opts.get_session_config_entry("session.save_external_prepacked_constant_initializers")
        if asked == "1":
            raise RuntimeError("this runtime cannot save pre-packed weights")
        return real_build(ort_, model, opts)

    monkeypatch.setattr(onnx_cache, "build", refuses_prepacked)
    s = onnx_cache.session(ort, _packaged_onnx(), options, folder)
    (entry,) = folder.iterdir()
    assert entry.name == onnx_cache.cache_key(ort, _packaged_onnx())
    assert b"prepacked" not in (entry / onnx_cache.GRAPH).read_bytes()
    assert onnx_cache.same_output(s, built_from_source())


def test_saving_removes_the_entries_it_supersedes_once_a_week_old(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    week = onnx_cache.STALE_S
    old = time.time() - week - 60

    def entry(name: str, source: str | None, mtime: float, folder_entry: bool = True) -> Path:
        p = folder / name
        if folder_entry:
            p.mkdir()
            (p / onnx_cache.GRAPH).write_bytes(b"g")
            if source is not None:
                (p / onnx_cache.SOURCE).write_text(source, "utf-8")
        else:
            p.write_bytes(b"one self-contained graph")
        os.utime(p, (mtime, mtime))
        return p

    mine = str(_packaged_onnx().resolve())
    superseded = entry("a" * 32, mine, old)  # the same model, an older onnxruntime or format
    legacy_folder = entry("b" * 32, None, old)  # format 2: no source recorded
    legacy_file = entry("c" * 32 + ".onnx", None, old, folder_entry=False)  # format 1
    other_model = entry("d" * 32, "/elsewhere/model.onnx", old)  # another embedder: kept
    recent = entry("e" * 32, mine, time.time() - 60)  # another install's, in use: kept
    (folder / "digests").mkdir()  # not an entry
    (folder / f"{'f' * 32}.unusable").touch()
    onnx_cache.session(ort, _packaged_onnx(), options, folder)
    left = {p.name for p in folder.iterdir()}
    key = onnx_cache.cache_key(ort, _packaged_onnx())
    assert left == {key, other_model.name, recent.name, "digests", f"{'f' * 32}.unusable"}
    assert not superseded.exists() and not legacy_folder.exists() and not legacy_file.exists()


def test_an_entry_already_there_is_kept(tmp_path: Path) -> None:
    """Two processes built at once: the second one's rename finds the first's entry and
    drops its own, so a graph is never paired with another build's weights."""
    folder = tmp_path / "models"
    onnx_cache.session(ort, _packaged_onnx(), options, folder)
    (entry,) = folder.iterdir()
    first = {p.name: p.stat().st_ino for p in entry.iterdir()}
    os.rename(entry / onnx_cache.GRAPH, tmp_path / "aside.onnx")  # the next process does not see it...
    s = onnx_cache.session(ort, _packaged_onnx(), options, folder)  # ...builds, and finds the folder taken
    os.rename(tmp_path / "aside.onnx", entry / onnx_cache.GRAPH)
    assert {p.name: p.stat().st_ino for p in entry.iterdir()} == first
    assert sorted(p.name for p in folder.iterdir()) == [entry.name]  # its own files gone
    assert onnx_cache.same_output(s, built_from_source())


def test_embedder_vectors_identical_with_and_without_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cold = OnnxMiniLM().embed(TEXTS)  # builds and saves
    assert list(onnx_cache.cache_dir().glob(f"*/{onnx_cache.GRAPH}"))
    warm = OnnxMiniLM().embed(TEXTS)  # loads the saved graph
    assert np.array_equal(cold, warm)
    monkeypatch.setattr(onnx_cache, "_ready", lambda folder: False)  # no cache at all
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "none"))
    assert np.array_equal(OnnxMiniLM().embed(TEXTS), cold)


@pytest.mark.parametrize("damaged", [onnx_cache.GRAPH, onnx_cache.WEIGHTS])
def test_a_damaged_entry_is_rebuilt(tmp_path: Path, damaged: str) -> None:
    folder = tmp_path / "models"
    onnx_cache.session(ort, _packaged_onnx(), options, folder)
    (entry,) = folder.iterdir()
    (entry / damaged).write_bytes((entry / damaged).read_bytes()[:1000])  # cut short
    again = onnx_cache.session(ort, _packaged_onnx(), options, folder)
    assert onnx_cache.same_output(again, built_from_source())
    assert (entry / damaged).stat().st_size > 50_000  # written anew


def test_a_graph_that_differs_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "models"
    monkeypatch.setattr(onnx_cache, "same_output", lambda a, b: False)
    onnx_cache.session(ort, _packaged_onnx(), options, folder)
    key = onnx_cache.cache_key(ort, _packaged_onnx())
    assert [p.name for p in folder.iterdir()] == [f"{key}.unusable"]
    onnx_cache.session(ort, _packaged_onnx(), options, folder)  # the marker: not tried again
    assert not [p for p in folder.iterdir() if p.suffix != ".unusable"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_an_unwritable_folder_only_costs_the_build(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir(mode=0o500)
    s = onnx_cache.session(ort, _packaged_onnx(), options, folder)
    assert onnx_cache.same_output(s, built_from_source()) and not list(folder.iterdir())


def test_the_key_follows_the_source(tmp_path: Path) -> None:
    copy = tmp_path / "model.onnx"
    copy.write_bytes(_packaged_onnx().read_bytes())
    before = onnx_cache.cache_key(ort, copy)
    os.utime(copy, ns=(1, 1))
    assert onnx_cache.cache_key(ort, copy) != before
    assert onnx_cache.cache_key(ort, copy) != onnx_cache.cache_key(ort, _packaged_onnx())


def test_same_output_sees_a_difference() -> None:
    class Shifted:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def run(self, names: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
            out = self.inner.run(names, feeds)
            out[0] = np.nextafter(out[0], np.float32(np.inf))  # one ulp up
            return list(out)

    s = built_from_source()
    assert onnx_cache.same_output(s, s) and not onnx_cache.same_output(s, Shifted(s))
