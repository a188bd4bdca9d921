"""An ONNX sentence-embedder folder: any BERT-style encoder exported to ONNX, run the
way the packaged MiniLM is (same batching, mean pooling, statement-cue spans).

A folder holds ``model.onnx`` (inputs ``input_ids``, ``attention_mask`` and optionally
``token_type_ids``; first output the token vectors, shape (rows, tokens, dim)),
``tokenizer.json`` (a ``tokenizers`` file) and ``embedder.json``::

    {"format": "localmem-onnx-embedder/1", "name": "localmem-chat-minilm", "dim": 384,
     "max_tokens": 256, "pooling": "mean", "prompt_bar": 0.5}

(``prompt_bar``, optional, default 0.5: the hooks' relevance bar calibrated on this
model's cosines, ``localmem bench hooks --calibrate``; the setting ``hooks.prompt_bar`` wins.)

Invariants: ``model_id`` is ``<name>@<first 12 hex of the sha256 of model.onnx>``, so two
folders with different weights never share an id (a store refuses the other's vectors)
and the same weights always get the same one; a folder that lacks a file, or whose
config names an unknown format or pooling, is a ``ConfigError`` naming the file and key.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Any

from localmem.errors import ConfigError, ModelError
from localmem.models import onnx_cache
from localmem.models.embedding import MAX_TOKENS, PROMPT_BAR, OnnxMiniLM
from localmem.util import jsonfile

FORMAT = "localmem-onnx-embedder/1"
CONFIG_NAME = "embedder.json"
MODEL_NAME = "model.onnx"
TOKENIZER_NAME = "tokenizer.json"


def is_folder(path: Path) -> bool:
    """True when ``path`` is a folder with an ``embedder.json`` (what the registry asks)."""
    return path.is_dir() and (path / CONFIG_NAME).is_file()


def read_config(folder: Path) -> dict[str, Any]:
    """The folder's ``embedder.json``, checked; a ``ConfigError`` names what is wrong."""
    for name in (CONFIG_NAME, MODEL_NAME, TOKENIZER_NAME):
        if not (folder / name).is_file():
            raise ConfigError(f"embedding model folder {folder} has no {name}")
    where = folder / CONFIG_NAME
    cfg = jsonfile.read_object(where)
    checks = (
        ("format", lambda v: v == FORMAT, f"must be {FORMAT!r}"),
        ("name", lambda v: isinstance(v, str) and v.strip() != "" and "@" not in v, "must be a name without '@'"),
        ("dim", lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "must be a positive integer"),
        ("max_tokens", lambda v: isinstance(v, int) and not isinstance(v, bool) and 8 <= v <= 8192, "must be 8..8192"),
        ("pooling", lambda v: v == "mean", "must be 'mean'"),
        ("prompt_bar", _cosine, "must be a number between -1 and 1"),
    )
    defaults: dict[str, Any] = {"max_tokens": MAX_TOKENS, "pooling": "mean", "prompt_bar": PROMPT_BAR}
    for key, ok, rule in checks:
        value = cfg.get(key, defaults.get(key))
        if value is None:
            raise ConfigError(f"{where}: missing key {key!r}")
        if not ok(value):
            raise ConfigError(f"{where}: key {key!r} {rule}, got {value!r}")
        cfg[key] = value
    return cfg


def _cosine(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and -1.0 <= v <= 1.0


def weights_digest(path: Path, cache: Path | None = None) -> str:
    """The sha256 of ``path`` (hex), remembered in ``cache`` (default: ``digests`` in the
    session cache's folder, ``onnx_cache.cache_dir``) under a name made of the file's real
    path, size, modification time and inode: a process start reads 64 bytes instead of
    hashing 23 MB (~20-30 ms on 2 cores), and a file changed in place gets a new name (the
    session cache trusts the same stat). Never an error of its own: a cache that cannot be
    read or written means the file is hashed."""
    st = path.stat()
    stamp = "\0".join((os.path.realpath(path), str(st.st_size), str(st.st_mtime_ns), str(st.st_ino)))
    key = hashlib.sha256(stamp.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    folder = (onnx_cache.cache_dir() if cache is None else cache) / "digests"
    entry = folder / key
    try:
        known = entry.read_text("ascii").strip()
        if len(known) == 64 and all(c in "0123456789abcdef" for c in known):
            return known
    except (OSError, UnicodeDecodeError):
        pass  # not remembered yet (or damaged): hashed below
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    digest = h.hexdigest()
    tmp = folder / f".{key}.{os.getpid()}.tmp"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp.write_text(digest, "ascii")
        os.chmod(tmp, 0o600)
        os.replace(tmp, entry)  # whole or not at all
    except OSError:  # read-only cache or full disk: hashed again next time
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return digest


def model_id(folder: Path, config: dict[str, Any]) -> str:
    """The id of the embedder in ``folder`` (``config``: its checked ``embedder.json``):
    ``<name>@<first 12 hex of the sha256 of model.onnx>`` (module docstring)."""
    return f"{config['name']}@{weights_digest(folder / MODEL_NAME)[:12]}"


class OnnxFolderEmbedder(OnnxMiniLM):
    """The embedder of an ONNX sentence-embedder folder (see the module docstring)."""

    def __init__(self, folder: Path, threads: int | None = None) -> None:
        self.folder = Path(folder)
        self.config = read_config(self.folder)
        super().__init__(model_path=self.folder / MODEL_NAME, threads=threads)
        self.model_id = model_id(self.folder, self.config)
        self.dim = int(self.config["dim"])
        self.prompt_bar = float(self.config["prompt_bar"])

    def _make_tokenizer(self) -> Any:
        try:
            # lazy: tokenizers takes long to import; loaded on the first embed
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - install problem
            raise ModelError(f"embedding runtime missing: {exc}; reinstall localmem") from exc
        path = self.folder / TOKENIZER_NAME
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises its own exception types
            raise ModelError(f"cannot load tokenizer {path}: {exc}") from exc
        tok.enable_truncation(int(self.config["max_tokens"]))
        return tok
