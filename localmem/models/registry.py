"""Resolve a model setting ("default" or a file path) to a backend instance.

The only place that maps user-facing model names to classes, so the CLI, the MCP
server and benchmarks agree on what "default" means.
"""

from __future__ import annotations

from pathlib import Path

from localmem.embedding import Embedder, OnnxMiniLM
from localmem.errors import ConfigError


def default_embedder(spec: str = "default") -> Embedder:
    if spec in ("", "default", OnnxMiniLM.model_id):
        return OnnxMiniLM()
    path = Path(spec).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise ConfigError(f"embedding model not found: {path}")
        from localmem.gguf_embedding import GGUFEmbedder

        return GGUFEmbedder(path)
    if path.suffix.lower() == ".onnx":
        if not path.is_file():
            raise ConfigError(f"embedding model not found: {path}")
        return OnnxMiniLM(model_path=path)
    raise ConfigError(f"unknown embedder {spec!r}: use 'default', a .gguf file or a MiniLM .onnx file")
