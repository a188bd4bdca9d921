"""The scorer weights that belong to an embedder: ``scorer.json`` beside an ONNX embedder
folder's ``embedder.json``, fitted on that embedder's features.

The scorer's weights (``scorer.Weights``) are fitted on one embedder's cosine
distribution (``de_rel``, ``cd_rel`` and ``scent`` are cosines): weights fitted on MiniLM
mis-weigh another model's similarities. So a folder may carry its own::

    {"format": "localmem-scorer/1", "embedder": "<model_id of the folder's weights>",
     "features": ["bm_n", ...], "coef": [2.3, ...], "intercept": -11.5,
     "fitted": {...free-form provenance: the command, data and held-out recall...}}

written by ``localmem --embedder FOLDER bench fit ... --write-scorer`` (docs/models.md).

Invariants:
- an embedder without a scorer file (the packaged MiniLM, a bare .onnx or .gguf file, a
  folder without one) reads with the built-in ``DEFAULT_WEIGHTS``, unchanged;
- a scorer file is used only when it is valid: ``features`` equal ``scorer.FEATURES`` in
  order, ``coef`` one finite number per feature, ``intercept`` finite, ``embedder`` the
  folder's model id (weights fitted for other model weights are refused, never applied);
  anything else is a ``ConfigError`` naming the file and the field;
- a file is parsed once per (path, size, mtime) and the result reused by every read.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from localmem.errors import ConfigError
from localmem.models.embedding import Embedder
from localmem.retrieval.scorer import DEFAULT_WEIGHTS, FEATURES, Weights
from localmem.util import jsonfile, private

FORMAT = "localmem-scorer/1"
SCORER_NAME = "scorer.json"

_cache: dict[tuple[str, int, int], Weights] = {}


def scorer_path(embedder: Embedder) -> Path | None:
    """Where ``embedder``'s own scorer file would lie (``None``: it has no folder)."""
    folder = getattr(embedder, "folder", None)
    return Path(folder) / SCORER_NAME if isinstance(folder, Path | str) else None


def weights_for(embedder: Embedder) -> Weights:
    """The weights a read with ``embedder`` scores with: its folder's ``scorer.json``
    when it has one, else the built-in default."""
    path = scorer_path(embedder)
    if path is None:
        return DEFAULT_WEIGHTS
    try:
        st = path.stat()
    except FileNotFoundError:
        return DEFAULT_WEIGHTS
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _cache:
        _cache[key] = read_weights(path, embedder.model_id)
    return _cache[key]


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def read_weights(path: Path, model_id: str | None = None) -> Weights:
    """The weights in ``path``, checked (see the module docstring); with ``model_id``,
    also that they were fitted for that embedder."""
    doc = jsonfile.read_object(path)
    if doc.get("format") != FORMAT:
        raise ConfigError(f"{path}: key 'format' must be {FORMAT!r}, got {doc.get('format')!r}")
    names = doc.get("features")
    if names != list(FEATURES):
        raise ConfigError(
            f"{path}: key 'features' must list the scorer's features in order ({', '.join(FEATURES)}), "
            f"got {names!r}; refit with `localmem --embedder FOLDER bench fit ... --write-scorer`"
        )
    coef = doc.get("coef")
    if not isinstance(coef, list) or len(coef) != len(FEATURES):
        raise ConfigError(f"{path}: key 'coef' must be a list of {len(FEATURES)} numbers")
    for name, value in zip(FEATURES, coef, strict=True):
        if not _finite(value):
            raise ConfigError(f"{path}: key 'coef', feature {name!r}: must be a finite number, got {value!r}")
    if not _finite(doc.get("intercept")):
        raise ConfigError(f"{path}: key 'intercept' must be a finite number, got {doc.get('intercept')!r}")
    fitted_for = doc.get("embedder")
    if not isinstance(fitted_for, str) or not fitted_for:
        raise ConfigError(f"{path}: key 'embedder' must name the model id the weights were fitted for")
    if model_id is not None and fitted_for != model_id:
        raise ConfigError(
            f"{path}: key 'embedder': the weights were fitted for {fitted_for!r}, but this folder's model is "
            f"{model_id!r}; refit them with `localmem --embedder FOLDER bench fit ... --write-scorer`"
        )
    return Weights(coef=tuple(float(v) for v in coef), intercept=float(doc["intercept"]))


def write_weights(path: Path, weights: Weights, model_id: str, fitted: dict[str, Any]) -> None:
    """Write ``weights`` (fitted for ``model_id``) to ``path`` atomically: a reader sees
    the old file or the new one, never half of it."""
    doc = {
        "format": FORMAT,
        "embedder": model_id,
        "features": list(FEATURES),
        "coef": list(weights.coef),
        "intercept": weights.intercept,
        "fitted": fitted,
    }
    tmp = path.with_name(path.name + ".tmp")
    private.write_file(tmp, json.dumps(doc, indent=1) + "\n")  # 600, as every file localmem makes
    try:
        read_weights(tmp, model_id)  # never install a file that reads would refuse
    except ConfigError:
        tmp.unlink()
        raise
    os.replace(tmp, path)
