"""A GGUF file's metadata (its header's key/value pairs), read without llama.cpp, and
whether the file is an embedding model.

Used before a GGUF is loaded as an embedder (a chat model would load and give vectors
that mean nothing for retrieval) and by ``localmem models`` to list the embedding
models in Ollama's and LM Studio's folders without loading any.

Invariants: reads only the header (the tensor data is never touched); a file that is
not GGUF v2/v3 or whose header is cut short is a ``ModelError`` naming the file; arrays
are skipped, not kept (a tokenizer's vocabulary is most of a header).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from localmem.errors import ModelError

MAGIC = b"GGUF"
# Value types of the format (gguf.md): fixed-size scalars by type code.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# Architectures llama.cpp runs as encoders only: every model of theirs is an embedder.
ENCODERS = frozenset(
    {"bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3", "neo-bert", "modern-bert"}
    | {"t5encoder", "gemma-embedding", "eurobert"}
)


@dataclass(frozen=True)
class GGUFInfo:
    """What a GGUF header says about the model."""

    path: Path
    architecture: str
    name: str
    dim: int | None  # ``<arch>.embedding_length``
    pooling: int | None  # ``<arch>.pooling_type`` (llama.cpp's enum), when declared

    @property
    def is_embedding(self) -> bool:
        """An encoder architecture, or a model that declares how its vectors are pooled
        (a decoder trained as an embedder, e.g. Qwen3-Embedding, declares it)."""
        return self.architecture in ENCODERS or (self.pooling is not None and self.pooling > 0)


def _read(fh: BinaryIO, n: int, path: Path) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise ModelError(f"{path}: the GGUF header is cut short")
    return data


def _string(fh: BinaryIO, path: Path) -> str:
    (n,) = struct.unpack("<Q", _read(fh, 8, path))
    if n > 1 << 24:
        raise ModelError(f"{path}: a GGUF string of {n} bytes: not a GGUF header")
    return _read(fh, n, path).decode("utf-8", "replace")


def _value(fh: BinaryIO, kind: int, path: Path) -> Any:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, _read(fh, struct.calcsize(fmt), path))[0]
    if kind == _STRING:
        return _string(fh, path)
    if kind == _ARRAY:
        inner, count = struct.unpack("<IQ", _read(fh, 12, path))
        if inner in _SCALARS:
            fh.seek(struct.calcsize(_SCALARS[inner]) * count, 1)
        elif inner == _STRING:
            for _ in range(count):
                (n,) = struct.unpack("<Q", _read(fh, 8, path))
                fh.seek(n, 1)
        else:
            raise ModelError(f"{path}: GGUF array of value type {inner} is not supported")
        return None
    raise ModelError(f"{path}: unknown GGUF value type {kind}")


def is_gguf(path: Path) -> bool:
    """True when ``path`` is a file that starts as a GGUF file does (an Ollama blob has
    no suffix to tell)."""
    try:
        with path.open("rb") as fh:
            return fh.read(4) == MAGIC
    except OSError:
        return False


def read_metadata(path: Path) -> dict[str, Any]:
    """The header's key/value pairs (arrays as None)."""
    try:
        with path.open("rb") as fh:
            if fh.read(4) != MAGIC:
                raise ModelError(f"{path} is not a GGUF file (no GGUF magic)")
            version, _tensors, count = struct.unpack("<IQQ", _read(fh, 20, path))
            if version not in (2, 3):
                raise ModelError(f"{path}: GGUF version {version} is not supported (2 or 3)")
            out: dict[str, Any] = {}
            for _ in range(count):
                key = _string(fh, path)
                (kind,) = struct.unpack("<I", _read(fh, 4, path))
                out[key] = _value(fh, kind, path)
            return out
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc}") from exc


def inspect(path: Path) -> GGUFInfo:
    meta = read_metadata(path)
    arch = str(meta.get("general.architecture") or "")
    dim = meta.get(f"{arch}.embedding_length")
    pooling = meta.get(f"{arch}.pooling_type")
    return GGUFInfo(
        path,
        arch,
        str(meta.get("general.name") or path.stem),
        int(dim) if isinstance(dim, int) else None,
        int(pooling) if isinstance(pooling, int) else None,
    )


def require_embedding(path: Path) -> GGUFInfo:
    """The header of ``path`` when it is an embedding model; else a ``ModelError`` saying
    what it is instead."""
    info = inspect(path)
    if not info.is_embedding:
        raise ModelError(
            f"{path} is not an embedding model: its architecture {info.architecture or '(none)'!r} is a text "
            "generator and it declares no pooling. Use a GGUF embedding model (nomic-embed-text, "
            "EmbeddingGemma, bge, Qwen3-Embedding...); `localmem models` lists the ones found on this machine."
        )
    return info
