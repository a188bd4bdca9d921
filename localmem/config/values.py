"""One setting's value checked and converted: its type (from the dataclass field's
annotation), its range (``RANGES``) and its allowed words (``CHOICES``), from a Python value
or, for the environment, from text.

Invariant: a bad value is a ``ConfigError`` that names the key and where the value came from
(``where``: the file, the environment variable, the argument or the constructor).
"""

from __future__ import annotations

import os
import types
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from localmem.errors import ConfigError

MIN_N_CTX = 512  # below this not even one extraction prompt fits

# Allowed values beyond the type, by dotted key: inclusive (low, high), None for no bound.
RANGES: dict[str, tuple[float | None, float | None]] = {
    "n_gpu_layers": (-1, None),
    "n_ctx": (MIN_N_CTX, None),
    "n_threads": (1, None),
    "extract_batch": (1, None),
    "job_attempts": (1, None),
    "budget_tokens": (1, None),
    "max_budget_tokens": (1, None),
    "recall_log": (0, None),
    "retrieval.temporal_window": (0, None),
    "retrieval.semantic_k": (0, None),
    "retrieval.semantic_seeds": (0, None),
    "retrieval.candidates": (1, None),
    "retrieval.candidates_ref_turns": (0, None),
    "retrieval.rrf_k": (0, None),
    "retrieval.common_term_share": (0, 1),
    "retrieval.lexical_max_rows": (0, None),
    "retrieval.second_hop": (0, 1),
    "retrieval.project_elsewhere": (0, 1),
    "retrieval.cable_tau": (0, 1),
    "retrieval.cable_theta": (0, None),  # above 1: no novelty filter (cosines reach 1 + rounding)
    "retrieval.cable_budget": (0, None),
    "retrieval.cable_share": (0, 1),
    "retrieval.cable_keep_p": (0, 1),
    "hooks.session_budget": (1, None),
    "hooks.prompt_budget": (1, None),
    "hooks.prompt_bar": (-1, 1),
    "hooks.session_deadline": (0.1, None),
    "hooks.prompt_deadline": (0.1, None),
    "hooks.ingest_deadline": (0.1, None),
    "hooks.background_deadline": (0.1, None),
    "hooks.daemon_idle": (0, None),
    "query.daemon_idle": (0, None),
    "backups.interval_hours": (0.01, None),
    "backups.keep": (1, None),
    "backups.max_total_mb": (0, None),
    "backups.min_free_mb": (0, None),
    "backups.delay_s": (0, None),
    "cable.kb": (1, None),
    "cable.kh": (1, None),
    "cable.nq": (1, None),
    "cable.verify_batch": (1, None),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "retrieval.extracted_cues": ("all", "fill", "off"),
    "retrieval.assistant_lists": ("all", "asked"),
    "retrieval.cue_vectors": ("span", "separate"),
    "retrieval.project_personal": ("self", "all"),
    "ingest.tool_lines": ("compact", "none"),
}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def check_value(key: str, hint: Any, value: Any, where: str, *, text: bool = False) -> Any:
    """``value`` as the type ``hint`` names, in range; ``text``: parse it from a string."""
    if hint is None:
        raise ConfigError(f"{where}: unknown setting {key}")
    if isinstance(hint, type) and is_dataclass(hint) and isinstance(value, hint):
        return value
    options = [a for a in get_args(hint) if a is not type(None)] if _is_union(hint) else [hint]
    optional = len(options) < len(get_args(hint)) if _is_union(hint) else False
    kind = options[0]
    if value is None and optional:
        return None
    got = _convert(kind, value, text)
    if got is _BAD:
        names = {bool: "true or false", int: "an integer", float: "a number", str: "a string", Path: "a path"}
        what = names.get(kind, getattr(kind, "__name__", str(kind)))
        raise ConfigError(f"{where}: {key} must be {what}, got {value!r}")
    lo, hi = RANGES.get(key, (None, None))
    number = isinstance(got, int | float) and not isinstance(got, bool)
    if number and ((lo is not None and not got >= lo) or (hi is not None and not got <= hi) or got != got):
        bounds = f"between {lo:g} and {hi:g}" if lo is not None and hi is not None else f"{lo:g} or more"
        raise ConfigError(f"{where}: {key} must be {bounds}, got {value!r}")
    if key in CHOICES and got not in CHOICES[key]:
        raise ConfigError(f"{where}: {key} must be {', '.join(CHOICES[key][:-1])} or {CHOICES[key][-1]}, got {value!r}")
    return got


_BAD = object()


def _convert(kind: Any, value: Any, text: bool) -> Any:
    if text:
        assert isinstance(value, str)
        low = value.strip().lower()
        if kind is bool:
            return True if low in _TRUE else False if low in _FALSE else _BAD
        if kind in (int, float):
            try:
                return kind(value.strip())
            except ValueError:
                return _BAD
        return Path(value).expanduser() if kind is Path else value
    if kind is bool:
        return value if isinstance(value, bool) else _BAD
    if kind is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _BAD
    if kind is float:
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else _BAD
    if kind is str:
        return value if isinstance(value, str) else _BAD
    if kind is Path:
        return Path(value).expanduser() if isinstance(value, str | os.PathLike) else _BAD
    return _BAD


def _is_union(hint: Any) -> bool:
    return get_origin(hint) in (Union, types.UnionType)


_HINTS: dict[type, dict[str, Any]] = {}


def hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def check_instance(obj: Any, section: str) -> None:
    """A constructor call's values, checked like the loader's (and widened in place: an
    int where a number is asked, a string where a path is)."""
    for f in fields(obj):
        key = f"{section}.{f.name}" if section else f.name
        value = getattr(obj, f.name)
        got = check_value(key, hints(type(obj))[f.name], value, type(obj).__name__)
        if got is not value:
            object.__setattr__(obj, f.name, got)


def check_budgets(budget: int, cap: int, sources: dict[str, str], where: str) -> None:
    if budget <= cap:
        return
    b, c = sources.get("budget_tokens", where or "default"), sources.get("max_budget_tokens", where or "default")
    from_c = f", from {c}" if c != b else ""
    raise ConfigError(f"{b}: budget_tokens ({budget}) must not exceed max_budget_tokens ({cap}{from_c})")
