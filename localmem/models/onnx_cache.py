"""The embedding model's onnxruntime session, built once per machine and then loaded ready-made.

Building the MiniLM session from the packaged graph costs a process ~150 ms of CPU before
its first query: reading 23 MB, the int8 word-table edit (:mod:`localmem.models.onnx_graph`),
parsing, graph optimisation and constant folding (measured in docs/benchmarks.md, "Start-up").
onnxruntime can save the graph as it stands after those steps (``optimized_model_filepath``);
a session loaded from that file with optimisation off skips them all. The first process
that builds a session saves it under the user cache dir; later ones load it. It is saved
as a folder ``<key>/``: the graph (``model.onnx``, ~140 kB) and its weights beside it
(``model.data``, ~97 MB, onnxruntime's external initializers), which onnxruntime maps
rather than parses: ~35 ms to load against ~110 ms for one self-contained file. The int8
MatMul weights are saved as the kernels lay them out (pre-packed:
``session.save_external_prepacked_constant_initializers``), so a load maps them instead of
packing them again: ~14 ms less per process, the same output bit for bit (measured in
docs/benchmarks.md, "Start-up"); where that form does not load to the same output, the
plain weights (~55 MB) are saved instead.

Invariants:
- a cached graph is used only if it gives the same output, bit for bit: when it is saved,
  a probe batch (rows of different lengths, padding included) runs through both the
  freshly built session and one loaded from the saved file, and the file is kept only if
  every number is equal; otherwise an ``.unusable`` marker for that key stops further tries
  and every process builds the session as before;
- the key names everything the saved graph depends on: the source model's path, size and
  modification time, onnxruntime's version, the graph edit's version, the saved format's
  version, the machine and its CPU flags; anything else changes a new key. An entry records
  its source model's path; saving one removes the entries it supersedes (the same model's,
  or an older localmem's that recorded none) once they are a week old (``prune``), so
  upgrades do not pile up ~100 MB folders, and two installs sharing the folder do not
  remove each other's on every start;
- never an error of its own: a cache folder that cannot be made or written, or a file that
  cannot be loaded, falls back to building the session from the model (a file that fails
  to load is removed);
- an entry is written whole or not at all: both files are written in a temporary folder,
  checked there, and the folder renamed into place, which fails when another process put
  its entry there first (then this one is dropped): a graph is never paired with another
  build's weights. Folders of mode 700, files of mode 600 (the graph is the public model's:
  nothing secret, but no other user may swap it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs

EDIT_VERSION = 1  # bump when gather_int8_rows changes what it writes
FORMAT = 3  # what an entry is: 3, a folder of the graph and its external weights, pre-packed
# where onnxruntime can (2: not pre-packed; 1: one .onnx file)
GRAPH, WEIGHTS = "model.onnx", "model.data"
SOURCE = "source.txt"  # the source model's path: a newer entry of the same source supersedes it
STALE_S = 7 * 86400  # a superseded entry older than this is removed when another is saved
PROVIDERS = ["CPUExecutionProvider"]
# Options for a level: onnxruntime's GraphOptimizationLevel value -> SessionOptions.
Options = Callable[[Any], Any]


def cache_dir() -> Path:
    """Where built sessions are kept: ``models`` in the user cache dir ($XDG_CACHE_HOME)."""
    return Path(platformdirs.user_cache_dir("localmem")) / "models"


def session(ort: Any, source: Path, options: Options, folder: Path | None = None) -> Any:
    """A session of the MiniLM graph at ``source`` (with its word table kept int8), loaded
    from the cache when a checked copy is there, else built (and saved when it can be)."""
    folder = cache_dir() if folder is None else folder
    key = cache_key(ort, source)
    saved = folder / key
    if (saved / GRAPH).is_file():
        try:
            return _load(ort, saved, options)
        except Exception:  # onnxruntime raises its own types: a damaged entry is rebuilt below
            shutil.rmtree(saved, ignore_errors=True)
    # lazy: the graph edit (~3 ms of imports) runs only when no saved session is there
    from localmem.models.onnx_graph import gather_int8_rows

    model = gather_int8_rows(source.read_bytes())
    if (folder / f"{key}.unusable").exists() or not _ready(folder):
        return build(ort, model, options(ort.GraphOptimizationLevel.ORT_ENABLE_ALL))
    built = None
    differs = 0  # forms whose saved files gave another output (or none)
    for prepacked in (True, False):
        tmp = folder / f".{key}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            built, usable = _save(ort, model, options, tmp, prepacked)
            if not usable:
                differs += 1
                continue
            (tmp / SOURCE).write_text(str(source.resolve()), "utf-8")
            for f in tmp.iterdir():
                os.chmod(f, 0o600)
            os.rename(tmp, saved)  # fails when another process's entry is there already: keep that one
            prune(folder, key, source)
            return built
        except OSError:  # this form cannot be saved (a full disk, an option this runtime refuses)
            if saved.exists():  # another process's entry is there: use it next time
                break
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if differs == 2:  # neither form loads to the same output: not tried again for this key (every start would pay)
        with contextlib.suppress(OSError):
            (folder / f"{key}.unusable").touch(mode=0o600)
    return built if built is not None else build(ort, model, options(ort.GraphOptimizationLevel.ORT_ENABLE_ALL))


def prune(folder: Path, key: str, source: Path, now: float | None = None) -> list[Path]:
    """Remove the entries ``key``'s supersedes, and return them: those of the same source
    model (an older onnxruntime, localmem or model file) and those an older localmem saved
    (no source recorded: format 1's ``<key>.onnx`` files, format 2's folders), once older
    than ``STALE_S``. Entries of other models are kept: another embedder may be in use. The
    age keeps two installs that share this folder from removing each other's on every
    start. Never an error: what cannot be removed stays."""
    now = time.time() if now is None else now
    mine = str(source.resolve())
    gone = []
    for p in folder.iterdir():
        name = p.name.removesuffix(".onnx") if p.is_file() else p.name
        if name == key or len(name) != 32 or not all(c in "0123456789abcdef" for c in name):
            continue
        try:
            if now - p.stat().st_mtime < STALE_S:
                continue
            if p.is_dir():
                recorded = p / SOURCE
                if recorded.exists() and recorded.read_text("utf-8") != mine:
                    continue
                shutil.rmtree(p)
            else:
                p.unlink()
            gone.append(p)
        except OSError:
            continue
    return gone


def _save(ort: Any, model: bytes, options: Options, tmp: Path, prepacked: bool) -> tuple[Any, bool]:
    """A session built from ``model`` with its optimised graph saved in the new folder
    ``tmp`` (with the kernels' pre-packed weights when ``prepacked``), and whether the saved
    files load to a session giving the same output."""
    tmp.mkdir(mode=0o700)
    opts = options(ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    opts.optimized_model_filepath = str(tmp / GRAPH)
    # the weights in a file of their own beside the graph, which a load maps
    opts.add_session_config_entry("session.optimized_model_external_initializers_file_name", WEIGHTS)
    opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    if prepacked:  # the int8 MatMul weights as the kernels lay them out: a load maps them instead of packing
        opts.add_session_config_entry("session.save_external_prepacked_constant_initializers", "1")
    try:
        built = build(ort, model, opts)
    except Exception as exc:  # the optimised graph could not be written: the caller builds without saving
        raise OSError(f"cannot save the optimised graph: {exc}") from exc
    try:
        usable = same_output(built, _load(ort, tmp, options))
    except Exception:  # nothing saved, or files onnxruntime cannot read back or run
        usable = False
    return built, usable


def _load(ort: Any, entry: Path, options: Options) -> Any:
    """The session saved in the folder ``entry``, optimisation off (it was done)."""
    return ort.InferenceSession(
        str(entry / GRAPH), sess_options=options(ort.GraphOptimizationLevel.ORT_DISABLE_ALL), providers=PROVIDERS
    )


def cache_key(ort: Any, source: Path) -> str:
    st = source.stat()
    parts = [
        str(source.resolve()),
        str(st.st_size),
        str(st.st_mtime_ns),
        str(ort.__version__),
        str(EDIT_VERSION),
        str(FORMAT),
        os.uname().machine,
        _cpu_flags(),
    ]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def _cpu_flags() -> str:
    """The first CPU's feature flags (Linux), so a cache folder shared by machines with
    different instruction sets never hands one of them the other's graph."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _ready(folder: Path) -> bool:
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return os.access(folder, os.W_OK)
    except OSError:
        return False


def probe_feeds() -> dict[str, np.ndarray]:
    """Three rows of different lengths (WordPiece ids of MiniLM's vocabulary), padded."""
    rows = [
        [101, 2054, 2106, 5070, 2360, 2055, 1996, 4440, 2000, 11929, 1029, 102],
        [101, 1045, 4149, 1037, 2047, 3579, 1012, 102],
        [101, 7592, 102],
    ]
    longest = max(len(r) for r in rows)
    ids = np.zeros((len(rows), longest), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def same_output(a: Any, b: Any) -> bool:
    """Whether two sessions give equal outputs, bit for bit, on the probe batch and on
    each of its rows alone."""
    names = {i.name for i in a.get_inputs()}  # token_type_ids is optional (embedder folders)
    feeds = {k: v for k, v in probe_feeds().items() if k in names}
    lengths = probe_feeds()["attention_mask"].sum(axis=1)
    batches = [feeds] + [{k: v[i : i + 1, : int(lengths[i])] for k, v in feeds.items()} for i in range(len(lengths))]
    for f in batches:
        for x, y in zip(a.run(None, f), b.run(None, f), strict=True):
            if not np.array_equal(np.asarray(x), np.asarray(y)):
                return False
    return True


def build(ort: Any, model: bytes, opts: Any) -> Any:
    """An onnxruntime session of ``model``, loaded through a path where the OS can name
    memory (a memfd): given the bytes themselves, onnxruntime keeps a copy of them for
    the session's life (+22 MB resident, measured), and from a path it does not."""
    if not hasattr(os, "memfd_create"):
        return ort.InferenceSession(model, sess_options=opts, providers=PROVIDERS)
    fd = os.memfd_create("localmem-embedding-model")
    try:
        named = f"/proc/self/fd/{fd}"
        if not os.path.exists(named):  # no /proc mounted (some sandboxes)
            return ort.InferenceSession(model, sess_options=opts, providers=PROVIDERS)
        try:
            with os.fdopen(os.dup(fd), "wb") as out:
                out.write(model)
        except OSError:  # a file-size limit (ulimit -f) counts a memfd too: load from the bytes
            return ort.InferenceSession(model, sess_options=opts, providers=PROVIDERS)
        return ort.InferenceSession(named, sess_options=opts, providers=PROVIDERS)
    finally:
        os.close(fd)  # the memory goes with the last descriptor
