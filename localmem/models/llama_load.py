"""Loading a GGUF model into llama.cpp, for the chat generator and the GGUF embedder alike.

One rule for every load: on a CPU with AMX (Intel Sapphire Rapids and later), llama.cpp's
weight repacking is off, because llama-cpp-python 0.3.36's AMX matrix multiply crashes the
process (SIGSEGV in ``ggml_backend_amx_mul_mat``) on the embedded Q4_1 model, seen on a
fresh build on such a machine. Elsewhere repacking stays on (it is what makes the AVX2 /
AVX-512 kernels fast). ``$LOCALMEM_LLM_REPACK`` = 1 or 0 decides instead.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_PARAMS_LOCK = threading.Lock()


def load_llama(llama_cpp: Any, **kwargs: Any) -> Any:
    """``llama_cpp.Llama(**kwargs)``, with weight repacking as ``repacking_allowed`` says."""
    with _weight_repacking(llama_cpp, repacking_allowed()):
        return llama_cpp.Llama(**kwargs)


def repacking_allowed(cpu_flags: set[str] | None = None, env: Mapping[str, str] | None = None) -> bool:
    """Whether llama.cpp may repack weights into its extra CPU buffer types at load."""
    forced = (os.environ if env is None else env).get("LOCALMEM_LLM_REPACK", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    flags = _cpu_flags() if cpu_flags is None else cpu_flags
    return not flags & {"amx_tile", "amx_int8", "amx_bf16"}


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text("utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


@contextmanager
def _weight_repacking(llama_cpp: Any, allowed: bool) -> Iterator[None]:
    """Load with ``use_extra_bufts`` off when not ``allowed``. ``Llama()`` takes no such
    argument and reads its defaults from ``llama_model_default_params`` while it loads, so
    that function is wrapped for the length of one load (under a lock: other threads'
    loads must not see it half-swapped)."""
    if allowed:
        yield
        return
    module = llama_cpp.llama_cpp
    with _PARAMS_LOCK:
        original = module.llama_model_default_params

        def without_repacking() -> Any:
            params = original()
            params.use_extra_bufts = False
            return params

        module.llama_model_default_params = without_repacking
        try:
            yield
        finally:
            module.llama_model_default_params = original
