"""Resolve a model setting ("default", a packaged name or a file path) to a backend instance.

The only place that maps user-facing model names to classes, so the CLI, the MCP
server and benchmarks agree on what "default" means.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from localmem.config import Settings
from localmem.errors import ConfigError
from localmem.models import onnx_folder
from localmem.models.embedding import Embedder, OnnxMiniLM

if TYPE_CHECKING:  # loaded where used: a query with an ONNX embedder never needs llama.cpp's side
    from localmem.models.llm import LlamaGenerator

# The packaged embedders, by the spec a setting and a store's record name them with.
# "default" is an alias (of the trained one since issue 39): a store records the
# unambiguous spec, never "default", so a later change of default cannot reread a store
# with another model. Stores written before that recorded "default" with MiniLM's
# model id; the binding (storage/write/binding) loads those by their id, which
# ``default_embedder`` also accepts.
MINILM = "minilm"
TRAINED = "localmem-chat-minilm-l6"
DEFAULT = TRAINED
BUILTIN = (TRAINED, MINILM)
TRAINED_FOLDER = Path(__file__).resolve().parent.parent / "data" / "embedders" / TRAINED


def trained_embedder() -> onnx_folder.OnnxFolderEmbedder:
    """The packaged embedder trained for conversational memory (its folder carries its
    own scorer weights, ``scorer.json``, and model card)."""
    emb = onnx_folder.OnnxFolderEmbedder(TRAINED_FOLDER)
    emb.spec = TRAINED
    return emb


def builtin_id(spec: str) -> str | None:
    """The packaged embedder ``spec`` names, by its spec or model id (``None``: not one)."""
    if spec in ("", "default"):
        return DEFAULT
    if spec in (MINILM, OnnxMiniLM.model_id):
        return MINILM
    if spec == TRAINED or (spec.startswith(TRAINED + "@") and TRAINED_FOLDER.is_dir()):
        return TRAINED
    return None


def default_embedder(spec: str = "default") -> Embedder:
    """The embedder a setting names: "default" (the packaged embedder trained for memory,
    ``localmem-chat-minilm-l6``), "minilm" (the packaged all-MiniLM-L6-v2), a .gguf or a
    .onnx file, or an ONNX sentence-embedder folder (``models/onnx_folder.py``). A packaged
    model's id names it too. Its ``spec`` (how to load it again: the packaged name or the
    absolute path, never "default") is what a store records."""
    which = builtin_id(spec)
    if which == MINILM:
        emb = OnnxMiniLM()
        emb.spec = MINILM
        return emb
    if which == TRAINED:
        return trained_embedder()
    path = Path(spec).expanduser()
    if onnx_folder.is_folder(path):
        folder = onnx_folder.OnnxFolderEmbedder(path)
        folder.spec = str(path.resolve())
        return folder
    if path.is_dir():
        raise ConfigError(f"embedding model folder {path} has no {onnx_folder.CONFIG_NAME}")
    # lazy: the llama.cpp side (~7 ms of imports), only for a GGUF model
    from localmem.models import gguf_meta
    from localmem.models.gguf_embedding import GGUFEmbedder

    if path.suffix.lower() == ".gguf" or gguf_meta.is_gguf(path):
        if not path.is_file():
            raise ConfigError(f"embedding model not found: {path}")
        gguf_meta.require_embedding(path)  # a chat model would load and embed nonsense
        gguf = GGUFEmbedder(path)
        gguf.spec = str(path.resolve())
        return gguf
    if path.suffix.lower() == ".onnx":
        if not path.is_file():
            raise ConfigError(f"embedding model not found: {path}")
        onnx = OnnxMiniLM(model_path=path)
        onnx.spec = str(path.resolve())
        return onnx
    raise ConfigError(
        f"unknown embedder {spec!r}: use 'default', 'minilm', a .gguf file, a MiniLM .onnx file or an ONNX embedder folder"
    )


def embedder_for(settings: Settings) -> Embedder:
    """The embedder every entry point opens a store with (``Settings.embedder``)."""
    return default_embedder(settings.embedder)


def generator_for(settings: Settings, model: str | None = None) -> LlamaGenerator:
    """The generator a command uses: ``model`` (a flag), else ``settings.model``
    (config file / ``LOCALMEM_MODEL``), else the embedded default."""
    from localmem.models.llm import get_generator  # lazy: only a command that generates loads it

    return get_generator(
        model or settings.model,
        n_ctx=settings.n_ctx,
        n_gpu_layers=settings.n_gpu_layers,
        n_threads=settings.n_threads,
    )
