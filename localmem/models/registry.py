"""Resolve a model setting ("default" or a file path) to a backend instance.

The only place that maps user-facing model names to classes, so the CLI, the MCP
server and benchmarks agree on what "default" means.
"""

from __future__ import annotations

from pathlib import Path

from localmem.config import Settings
from localmem.errors import ConfigError
from localmem.models import gguf_meta, onnx_folder
from localmem.models.embedding import Embedder, OnnxMiniLM
from localmem.models.gguf_embedding import GGUFEmbedder
from localmem.models.llm import LlamaGenerator, get_generator


def default_embedder(spec: str = "default") -> Embedder:
    """The embedder a setting names: "default" (the packaged MiniLM), a .gguf or a .onnx
    file, or an ONNX sentence-embedder folder (``models/onnx_folder.py``). Its ``spec``
    (how to load it again: "default" or the absolute path) is what a store records."""
    if spec in ("", "default", OnnxMiniLM.model_id):
        emb = OnnxMiniLM()
        emb.spec = "default"
        return emb
    path = Path(spec).expanduser()
    if onnx_folder.is_folder(path):
        folder = onnx_folder.OnnxFolderEmbedder(path)
        folder.spec = str(path.resolve())
        return folder
    if path.is_dir():
        raise ConfigError(f"embedding model folder {path} has no {onnx_folder.CONFIG_NAME}")
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
        f"unknown embedder {spec!r}: use 'default', a .gguf file, a MiniLM .onnx file or an ONNX embedder folder"
    )


def embedder_for(settings: Settings) -> Embedder:
    """The embedder every entry point opens a store with (``Settings.embedder``)."""
    return default_embedder(settings.embedder)


def generator_for(settings: Settings, model: str | None = None) -> LlamaGenerator:
    """The generator a command uses: ``model`` (a flag), else ``settings.model``
    (config file / ``LOCALMEM_MODEL``), else the embedded default."""
    return get_generator(
        model or settings.model,
        n_ctx=settings.n_ctx,
        n_gpu_layers=settings.n_gpu_layers,
        n_threads=settings.n_threads,
    )
