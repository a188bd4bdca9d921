"""The embedders this machine has: the two built-in ones, and the ONNX embedder folders and GGUF
embedding models in Ollama's and LM Studio's model folders (``localmem models``).

Ollama keeps a model as a manifest (``manifests/<registry>/<namespace>/<model>/<tag>``,
JSON whose layer of media type ``application/vnd.ollama.image.model`` names the weights'
digest) and the weights as a blob (``blobs/sha256-<hex>``, a GGUF file); its folder is
``$OLLAMA_MODELS`` or ``~/.ollama/models``. LM Studio keeps plain files under
``~/.lmstudio/models`` (older versions: ``~/.cache/lm-studio/models``).

Invariants: nothing is loaded or downloaded, only GGUF headers and JSON read
(``gguf_meta``); a GGUF is listed as usable only when its header makes it an embedding
model; a file that cannot be read is reported with why, never a traceback; ``spec`` is
what ``--model`` / ``--embedder`` take to load the entry.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from localmem.errors import LocalmemError
from localmem.models import gguf_meta, onnx_folder, registry
from localmem.models.embedding import OnnxMiniLM

OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
OLLAMA_REGISTRY = "registry.ollama.ai"


@dataclass(frozen=True)
class Found:
    """One model found: where, what, and whether it can embed."""

    name: str
    source: str  # "built-in", "ollama", "lmstudio"
    format: str  # "onnx" or "gguf"
    spec: str  # what --model / --embedder take
    dim: int | None
    architecture: str
    embedding: bool  # usable as an embedder
    note: str = ""  # why not, or what could not be read


def ollama_root() -> Path:
    env = os.environ.get("OLLAMA_MODELS")
    return Path(env).expanduser() if env else Path.home() / ".ollama" / "models"


def lmstudio_roots() -> list[Path]:
    return [Path.home() / ".lmstudio" / "models", Path.home() / ".cache" / "lm-studio" / "models"]


def builtin() -> list[Found]:
    """The packaged embedders: the default one trained for memory, then MiniLM."""
    config = onnx_folder.read_config(registry.TRAINED_FOLDER)
    name, dim = onnx_folder.model_id(registry.TRAINED_FOLDER, config), int(config["dim"])
    return [
        Found(name, "built-in", "onnx", registry.TRAINED, dim, "bert", True, "the default"),
        Found(OnnxMiniLM.model_id, "built-in", "onnx", registry.MINILM, OnnxMiniLM.dim, "bert", True),
    ]


def _gguf(name: str, source: str, path: Path) -> Found:
    try:
        info = gguf_meta.inspect(path)
    except LocalmemError as exc:
        return Found(name, source, "gguf", str(path), None, "", False, str(exc))
    note = "" if info.is_embedding else "a text generator, not an embedding model"
    return Found(name, source, "gguf", str(path), info.dim, info.architecture, info.is_embedding, note)


def _onnx(name: str, source: str, folder: Path) -> Found:
    try:
        cfg = onnx_folder.read_config(folder)
    except LocalmemError as exc:
        return Found(name, source, "onnx", str(folder), None, "", False, str(exc))
    return Found(str(cfg["name"]), source, "onnx", str(folder), int(cfg["dim"]), "onnx", True)


def ollama(root: Path | None = None) -> list[Found]:
    """Every model of an Ollama folder, by its manifests."""
    root = root or ollama_root()
    manifests = root / "manifests"
    out: list[Found] = []
    if not manifests.is_dir():
        return out
    for path in sorted(p for p in manifests.rglob("*") if p.is_file()):
        parts = path.relative_to(manifests).parts
        if len(parts) < 3:
            continue
        *where, model, tag = parts
        prefix = "/".join(where)
        prefix = prefix.removeprefix(f"{OLLAMA_REGISTRY}/library").removeprefix(f"{OLLAMA_REGISTRY}/").strip("/")
        name = f"{prefix + '/' if prefix else ''}{model}:{tag}"
        try:
            manifest = json.loads(path.read_text("utf-8"))
            layers = manifest.get("layers", []) if isinstance(manifest, dict) else []
            digest = next(str(layer["digest"]) for layer in layers if layer.get("mediaType") == OLLAMA_MODEL_LAYER)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, StopIteration, KeyError, TypeError) as exc:
            out.append(Found(name, "ollama", "gguf", str(path), None, "", False, f"unreadable manifest: {exc!r}"))
            continue
        blob = root / "blobs" / digest.replace(":", "-")
        if not blob.is_file():
            out.append(Found(name, "ollama", "gguf", str(blob), None, "", False, "its weights blob is missing"))
            continue
        out.append(_gguf(name, "ollama", blob))
    return out


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        yield Path(dirpath)
        for f in sorted(filenames):
            yield Path(dirpath) / f


def lmstudio(roots: list[Path] | None = None) -> list[Found]:
    """GGUF files and ONNX embedder folders under LM Studio's model folders."""
    out: list[Found] = []
    for root in roots if roots is not None else lmstudio_roots():
        if not root.is_dir():
            continue
        for path in _walk(root):
            rel = str(path.relative_to(root))
            if path.is_dir() and onnx_folder.is_folder(path):
                out.append(_onnx(rel, "lmstudio", path))
            elif path.is_file() and path.suffix.lower() == ".gguf":
                out.append(_gguf(rel, "lmstudio", path))
    return out


def everything() -> list[Found]:
    return builtin() + ollama() + lmstudio()
