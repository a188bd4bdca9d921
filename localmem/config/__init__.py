"""Settings: where the database lives, which models to use, retrieval parameters.

Precedence, lowest first: the defaults below < config file (``config.toml`` in the user config dir, or
``LOCALMEM_CONFIG``) < environment (``LOCALMEM_<KEY>``, ``LOCALMEM_<SECTION>_<KEY>``) < explicit arguments
(CLI flags). ``load_settings`` is the one parse of all of them into the frozen dataclasses below.

Invariants:
- every default is defined once, in the dataclasses; help texts read it with ``default()``;
- every value, wherever it comes from (file, environment, argument, constructor call), is
  checked for type, range and known key; a bad one is a ``ConfigError`` naming the key
  and where it came from (the file, the environment variable, the argument).

Retrieval defaults are chosen by measurement (docs/benchmarks.md); docs/configuration.md lists every key.
"""

from __future__ import annotations

import os
import tomllib
import types
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

import platformdirs

from localmem.errors import ConfigError

APP = "localmem"
ENV_PREFIX = "LOCALMEM_"
MIN_N_CTX = 512  # below this not even one extraction prompt fits


@dataclass(frozen=True)
class RetrievalParams:
    """Knobs of the model-free read path (localmem/retrieval/)."""

    temporal_window: int = 2  # w: temporal edges / neighbours within w turns of a session
    semantic_k: int = 3  # k: each cue's k nearest cues become semantic edges
    semantic_seeds: int = 0  # expand over semantic edges of this many best anchors
    candidates: int = 30  # top-m per ranked list (turn/cue x dense/lexical)
    candidates_ref_turns: int = 0  # >0: m grows as sqrt(visible turns / this), at most 4m (pool.depth)
    assistant_lists: str = "all"  # "asked": assistant turns listed only when asked about (pool.listable)
    rrf_k: float = 60.0
    speaker_query: bool = True  # a query naming speakers is embedded in their words (speaker_query.py)
    second_hop: float = 0.0  # >0: a widened query's pool joins at this discount (second_hop.py; docs/cable.md)
    # Query terms in more than this share of turns (or cues) leave the lexical lists (little
    # bm25 weight, most FTS5 time; 1.0 keeps all). LoCoMo at 0.1: as with all terms or better.
    common_term_share: float = 0.1
    # Bounded lexical work: rarest terms first, at most this many FTS rows (~2 us each) per
    # table, above any LoCoMo conversation's; 0: no bound (docs/benchmarks.md#scale).
    lexical_max_rows: int = 5000
    # Model-extracted cues (triples, keywords, facts) on the read path: "all" = like statement
    # cues (ranked lists and the scorer's cue features, which were fitted without them); "fill" = the
    # turns their best matches point at join the pool and are packed after every model-free candidate,
    # into budget left over, so recall is never below the model-free figure; "off" = not used (docs/models.md).
    extracted_cues: str = "fill"

    # CABLE expansion (localmem/retrieval/cable.py): seeds are packed turns with cosine to
    # the query >= cable_tau; their one-hop antecedent neighbours (in and out), scored by
    # the summed cosine to connected seeds, join greedily while max cosine to the result
    # is below cable_theta, at most cable_budget of them, replacing the lowest-ranked
    # turns (docs/cable.md).
    cable: bool = True
    cable_tau: float = 0.3
    cable_theta: float = 0.9
    cable_budget: int = 5
    cable_share: float = 0.25  # most of the token budget that added turns may take (1.0: as in the paper)
    # Turns the scorer gives at least this probability of being evidence are never
    # replaced (1.0: any may be, as in the paper). With SmolLM2-built links, 0.05 took the
    # loss at 150 tokens from 23 to 4 points; with correct links the probe gain held.
    cable_keep_p: float = 0.05

    # "span": a cue's vector pools the turn's own forward pass over the cue's span (one
    # pass per turn, ~4x faster ingest, same held-out recall); "separate": embed each
    # cue alone. Embedders without span support always embed separately.
    cue_vectors: str = "span"

    def __post_init__(self) -> None:
        _check_instance(self, "retrieval")


@dataclass(frozen=True)
class CableParams:
    """CABLE's write-time knobs (localmem/enrichment/antecedent.py), paper defaults; the
    switches exist for ablation and record themselves in each turn's
    ``antecedent_runs.variant``."""

    # The worker runs antecedent jobs after extraction. Off by default: with the models we
    # measured most verified links were wrong and expansion over them lowered recall
    # (docs/cable.md); jobs stay queued, so turning it on later links the whole history.
    enabled: bool = False
    subtraction: bool = True  # C = H minus B; off: C = H
    verification: bool = True  # off: every candidate becomes an edge
    generic_queries: bool = False  # one topical prompt instead of the memory-type prompts
    kb: int = 15  # |B|: direct neighbours of the new turn
    kh: int = 15  # per antecedent query
    nq: int = 3  # antecedent queries per turn, at most
    verify_batch: int = 3  # candidates judged per verification call

    def __post_init__(self) -> None:
        _check_instance(self, "cable")

    @property
    def variant(self) -> str:
        switches = (("no-subtraction", self.subtraction), ("no-verification", self.verification))
        off = [name for name, on in (*switches, ("generic-queries", not self.generic_queries)) if not on]
        return ",".join(off) or "full"


@dataclass(frozen=True)
class IngestParams:
    """How files are read (localmem/ingest/) and what every write keeps out (storage/write/prepare.py)."""

    tool_lines: str = "compact"  # an agent's tool call as one line (`ran: pytest -q`) in its turn; "none": left out
    redact: bool = True  # secrets -> `[secret: kind]`, <private>…</private> dropped, before a turn is stored

    def __post_init__(self) -> None:
        _check_instance(self, "ingest")


@dataclass(frozen=True)
class Settings:
    db: Path = field(default_factory=lambda: default_db_path())
    embedder: str = "default"  # "default", a GGUF embedding model or a MiniLM .onnx file
    model: str | None = None  # GGUF chat model for enrichment; None: not configured
    n_gpu_layers: int | None = None  # None: all layers when llama.cpp can offload, else 0; -1: all
    n_ctx: int = 4096  # the generation model's context window (capped at its training size)
    n_threads: int | None = None  # None: half the CPU cores (llama.cpp spins; oversubscription is slow)
    extract_batch: int = 6  # turns of one session per extraction call
    job_attempts: int = 3  # a job that failed this often is parked
    budget_tokens: int = 2000  # a reconstruct call's token budget when none is given
    max_budget_tokens: int = 32000  # a larger requested budget is refused (MCP: capped)
    replica: str | None = None  # localmem replicate's target: file:///…, sftp://…, s3://… (storage/copies/replica.py)
    retrieval: RetrievalParams = field(default_factory=RetrievalParams)
    cable: CableParams = field(default_factory=CableParams)
    ingest: IngestParams = field(default_factory=IngestParams)

    def __post_init__(self) -> None:
        _check_instance(self, "")
        _check_budgets(self.budget_tokens, self.max_budget_tokens, {}, "Settings")

    def with_overrides(self, **kwargs: Any) -> Settings:
        """These settings with explicit values (``None``: not given), checked like any other."""
        clean = {k: _check(k, _hints(Settings).get(k), v, f"argument {k}") for k, v in kwargs.items() if v is not None}
        return replace(self, **clean)


# Allowed values beyond the type, by dotted key: inclusive (low, high), None for no bound.
RANGES: dict[str, tuple[float | None, float | None]] = {
    "n_gpu_layers": (-1, None),
    "n_ctx": (MIN_N_CTX, None),
    "n_threads": (1, None),
    "extract_batch": (1, None),
    "job_attempts": (1, None),
    "budget_tokens": (1, None),
    "max_budget_tokens": (1, None),
    "retrieval.temporal_window": (0, None),
    "retrieval.semantic_k": (0, None),
    "retrieval.semantic_seeds": (0, None),
    "retrieval.candidates": (1, None),
    "retrieval.candidates_ref_turns": (0, None),
    "retrieval.rrf_k": (0, None),
    "retrieval.common_term_share": (0, 1),
    "retrieval.lexical_max_rows": (0, None),
    "retrieval.second_hop": (0, 1),
    "retrieval.cable_tau": (0, 1),
    "retrieval.cable_theta": (0, None),  # above 1: no novelty filter (cosines reach 1 + rounding)
    "retrieval.cable_budget": (0, None),
    "retrieval.cable_share": (0, 1),
    "retrieval.cable_keep_p": (0, 1),
    "cable.kb": (1, None),
    "cable.kh": (1, None),
    "cable.nq": (1, None),
    "cable.verify_batch": (1, None),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "retrieval.extracted_cues": ("all", "fill", "off"),
    "retrieval.assistant_lists": ("all", "asked"),
    "retrieval.cue_vectors": ("span", "separate"),
    "ingest.tool_lines": ("compact", "none"),
}
Section = type[RetrievalParams] | type[CableParams] | type[IngestParams]
SECTIONS: dict[str, Section] = {"retrieval": RetrievalParams, "cable": CableParams, "ingest": IngestParams}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def default_db_path() -> Path:
    return Path(platformdirs.user_data_dir(APP)) / "memory.db"


def config_file() -> Path:
    env = os.environ.get("LOCALMEM_CONFIG")
    return Path(env) if env else Path(platformdirs.user_config_dir(APP)) / "config.toml"


def default(key: str) -> Any:
    """The built-in default of a setting by dotted key (``"budget_tokens"``,
    ``"retrieval.cable_tau"``, ``"cable.kb"``), for help texts and tool descriptions."""
    section, _, name = key.rpartition(".")
    cls = SECTIONS.get(section) if section else Settings
    for f in fields(cls) if cls is not None else ():
        if f.name == name:
            if f.default is not MISSING:
                return f.default
            if f.default_factory is not MISSING:
                return f.default_factory()
    raise ConfigError(f"unknown setting {key!r}")


def check(key: str, value: Any, where: str) -> Any:
    """``value`` for the dotted ``key``, checked and converted as the loader does;
    ``where`` (a flag, an argument) is named in the error."""
    section, _, name = key.rpartition(".")
    cls = SECTIONS.get(section) if section else Settings
    return _check(key, _hints(cls).get(name) if cls is not None else None, value, where)


def env_name(key: str) -> str:
    """The environment variable of a dotted key: ``retrieval.cable_tau`` -> ``LOCALMEM_RETRIEVAL_CABLE_TAU``."""
    return ENV_PREFIX + key.replace(".", "_").upper()


def load_settings(**overrides: Any) -> Settings:
    """Defaults < config file < environment < ``overrides`` (``None``: not given; a
    section may be given as its dataclass or a mapping of its keys), checked once."""
    values: dict[str, dict[str, Any]] = {"": {}, **{s: {} for s in SECTIONS}}
    sources: dict[str, str] = {}
    path = config_file()
    if path.is_file():
        _layer(values, sources, _read_file(path), str(path), text=False)
    _layer(values, sources, _from_env(), "", text=True)
    given: dict[str, Any] = {}
    for key, value in overrides.items():
        if value is None:
            continue
        if key in SECTIONS and is_dataclass(value) and not isinstance(value, type):
            value = asdict(value)
        given[key] = value
    _layer(values, sources, given, "argument", text=False)
    top = values[""]
    budget, cap = (top.get(k, default(k)) for k in ("budget_tokens", "max_budget_tokens"))
    _check_budgets(budget, cap, sources, "")
    parts = {s: cls(**values[s]) for s, cls in SECTIONS.items()}
    return Settings(**top, **parts)  # type: ignore[arg-type]


# -- checking ------------------------------------------------------------------------------


def _read_file(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc


def _from_env() -> dict[str, Any]:
    """The ``LOCALMEM_*`` variables that are settings, as a nested mapping of
    ``(variable, raw string)`` pairs, so errors name the variable. Other ``LOCALMEM_*`` variables
    (``LOCALMEM_CONFIG``, the MCP token, ...) are not settings and are left alone, but a
    ``LOCALMEM_RETRIEVAL_*`` / ``LOCALMEM_CABLE_*`` one must name a key of its section."""
    out: dict[str, Any] = {}
    for name, raw in sorted(os.environ.items()):
        if not name.startswith(ENV_PREFIX) or raw == "":
            continue
        for f in fields(Settings):
            if f.name not in SECTIONS and name == env_name(f.name):
                out[f.name] = (name, raw)
        for section, cls in SECTIONS.items():
            prefix = env_name(section)
            if name == prefix:
                raise ConfigError(f"environment variable {name}: {section} is a section; set {prefix}_<KEY>")
            if name.startswith(prefix + "_"):
                key = name[len(prefix) + 1 :].lower()
                if key not in {f.name for f in fields(cls)}:
                    raise ConfigError(f"environment variable {name}: unknown setting {section}.{key}")
                out.setdefault(section, {})[key] = (name, raw)
    return out


def _layer(
    values: dict[str, dict[str, Any]], sources: dict[str, str], data: Mapping[str, Any], where: str, *, text: bool
) -> None:
    """Check ``data`` (one source's top-level keys and sections) into ``values``."""
    hints = _hints(Settings)
    for key, value in data.items():
        if key in SECTIONS:
            if not isinstance(value, Mapping):
                shown = value[1] if text else value
                raise ConfigError(f"{_where(where, key, value, text)}: {key} must be a [{key}] table, got {shown!r}")
            section_hints = _hints(SECTIONS[key])
            for sub, sub_value in value.items():
                dotted = f"{key}.{sub}"
                if sub not in section_hints:
                    raise ConfigError(f"{_where(where, dotted, sub_value, text)}: unknown setting {dotted}")
                values[key][sub] = _one(dotted, section_hints[sub], sub_value, where, sources, text)
        elif key in hints:
            values[""][key] = _one(key, hints[key], value, where, sources, text)
        else:
            raise ConfigError(f"{_where(where, key, value, text)}: unknown setting {key}")


def _one(key: str, hint: Any, value: Any, where: str, sources: dict[str, str], text: bool) -> Any:
    label = _where(where, key, value, text)
    sources[key] = label
    return _check(key, hint, value[1] if text else value, label, text=text)


def _where(where: str, key: str, value: Any, text: bool) -> str:
    if text:
        return f"environment variable {value[0]}"
    return f"argument {key}" if where == "argument" else where


def _check(key: str, hint: Any, value: Any, where: str, *, text: bool = False) -> Any:
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


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _check_instance(obj: Any, section: str) -> None:
    """A constructor call's values, checked like the loader's (and widened in place: an
    int where a number is asked, a string where a path is)."""
    for f in fields(obj):
        key = f"{section}.{f.name}" if section else f.name
        value = getattr(obj, f.name)
        got = _check(key, _hints(type(obj))[f.name], value, type(obj).__name__)
        if got is not value:
            object.__setattr__(obj, f.name, got)


def _check_budgets(budget: int, cap: int, sources: dict[str, str], where: str) -> None:
    if budget <= cap:
        return
    b, c = sources.get("budget_tokens", where or "default"), sources.get("max_budget_tokens", where or "default")
    from_c = f", from {c}" if c != b else ""
    raise ConfigError(f"{b}: budget_tokens ({budget}) must not exceed max_budget_tokens ({cap}{from_c})")
