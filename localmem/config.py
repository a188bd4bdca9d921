"""Settings: where the database lives, which models to use, retrieval parameters.

Precedence, lowest first: built-in defaults < config file (``config.toml`` in the user
config dir, or ``LOCALMEM_CONFIG``) < environment (``LOCALMEM_*``) < explicit
arguments (CLI flags). Retrieval parameters carry the values chosen by measurement on
the LoCoMo dev data (see README, "Benchmarks").
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import platformdirs

from localmem.errors import ConfigError

APP = "localmem"


@dataclass(frozen=True)
class RetrievalParams:
    """Knobs of the model-free read path (see localmem/reconstruct.py)."""

    temporal_window: int = 2  # w: temporal edges / neighbours within w turns of a session
    semantic_k: int = 3  # k: each cue's k nearest cues become semantic edges
    semantic_seeds: int = 0  # expand over semantic edges of this many best anchors
    candidates: int = 30  # top-m per ranked list (turn/cue x dense/lexical)
    rrf_k: float = 60.0
    # Query terms found in more than this share of turns (or cues) are left out of the
    # lexical lists: little bm25 weight, most of the FTS5 time. 1.0 keeps every term.
    # LoCoMo recall at 0.1: 78.7/85.3/90.7/94.1 vs 78.3/85.2/90.5/94.5 with every term.
    common_term_share: float = 0.1
    # Model-extracted cues (triples, keywords, facts) on the read path: "all" = like
    # statement cues (ranked lists and the scorer's cue features, which were fitted
    # without them); "fill" = the turns their best matches point at join the pool and
    # are packed after every model-free candidate, into budget left over, so recall is
    # never below the model-free figure; "off" = not used (README, Models).
    extracted_cues: str = "fill"

    def __post_init__(self) -> None:
        if self.extracted_cues not in ("all", "fill", "off"):
            raise ConfigError(f"retrieval.extracted_cues must be all, fill or off; got {self.extracted_cues!r}")
        if not 0.0 <= self.cable_keep_p <= 1.0:
            raise ConfigError(f"retrieval.cable_keep_p must be between 0 and 1, got {self.cable_keep_p!r}")
        if not 0.0 <= self.cable_share <= 1.0:
            raise ConfigError(f"retrieval.cable_share must be between 0 and 1, got {self.cable_share!r}")
        if self.cable_budget < 0:
            raise ConfigError(f"retrieval.cable_budget must be 0 or more, got {self.cable_budget!r}")

    # CABLE expansion (localmem/expansion.py): seeds are packed turns with cosine to the
    # query >= cable_tau; their one-hop antecedent neighbours (in and out), scored by the
    # summed cosine to connected seeds, join greedily while max cosine to the result is
    # below cable_theta, at most cable_budget of them, replacing the lowest-ranked turns.
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


@dataclass(frozen=True)
class CableParams:
    """CABLE's write-time knobs (localmem/antecedent.py), paper defaults; the switches
    exist for ablation and record themselves in each turn's ``antecedent_runs.variant``."""

    # The worker runs antecedent jobs after extraction. Off by default: with the models we
    # could measure (SmolLM2-135M, Qwen2.5-Coder-1.5B) most verified links were wrong and
    # expansion over them lowered recall (README, "Antecedent links"); jobs stay queued,
    # so turning it on later links the whole history.
    enabled: bool = False
    subtraction: bool = True  # C = H minus B; off: C = H
    verification: bool = True  # off: every candidate becomes an edge
    generic_queries: bool = False  # one topical prompt instead of the memory-type prompts
    kb: int = 15  # |B|: direct neighbours of the new turn
    kh: int = 15  # per antecedent query
    nq: int = 3  # antecedent queries per turn, at most
    verify_batch: int = 3  # candidates judged per verification call

    def __post_init__(self) -> None:
        for name in ("kb", "kh", "nq", "verify_batch"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"cable.{name} must be a positive integer, got {getattr(self, name)!r}")

    @property
    def variant(self) -> str:
        off = [
            name
            for name, on in (
                ("no-subtraction", self.subtraction),
                ("no-verification", self.verification),
                ("generic-queries", not self.generic_queries),
            )
            if not on
        ]
        return ",".join(off) or "full"


@dataclass(frozen=True)
class Settings:
    db: Path = field(default_factory=lambda: default_db_path())
    embedder: str = "default"  # "default" or a path to a GGUF embedding model
    model: str | None = None  # GGUF chat model for enrichment; None: not configured
    n_gpu_layers: int | None = None  # None: all layers when llama.cpp can offload, else 0
    n_ctx: int = 4096  # the generation model's context window (capped at its training size)
    n_threads: int | None = None  # None: half the CPU cores (llama.cpp spins; oversubscription is slow)
    extract_batch: int = 6  # turns of one session per extraction call
    job_attempts: int = 3  # a job that failed this often is parked
    budget_tokens: int = 2000
    max_budget_tokens: int = 32000
    retrieval: RetrievalParams = field(default_factory=RetrievalParams)
    cable: CableParams = field(default_factory=CableParams)

    def with_overrides(self, **kwargs: Any) -> Settings:
        clean = {k: v for k, v in kwargs.items() if v is not None}
        if "db" in clean:
            clean["db"] = Path(clean["db"]).expanduser()
        return replace(self, **clean)


def default_db_path() -> Path:
    return Path(platformdirs.user_data_dir(APP)) / "memory.db"


def config_file() -> Path:
    env = os.environ.get("LOCALMEM_CONFIG")
    return Path(env) if env else Path(platformdirs.user_config_dir(APP)) / "config.toml"


def load_settings(**overrides: Any) -> Settings:
    settings = Settings()
    path = config_file()
    if path.is_file():
        settings = _apply_file(settings, path)
    env: dict[str, Any] = {}
    if os.environ.get("LOCALMEM_DB"):
        env["db"] = os.environ["LOCALMEM_DB"]
    if os.environ.get("LOCALMEM_EMBEDDER"):
        env["embedder"] = os.environ["LOCALMEM_EMBEDDER"]
    if os.environ.get("LOCALMEM_MODEL"):
        env["model"] = os.environ["LOCALMEM_MODEL"]
    if os.environ.get("LOCALMEM_N_GPU_LAYERS"):
        try:
            env["n_gpu_layers"] = int(os.environ["LOCALMEM_N_GPU_LAYERS"])
        except ValueError:
            raise ConfigError("LOCALMEM_N_GPU_LAYERS must be an integer") from None
    settings = settings.with_overrides(**env)
    return settings.with_overrides(**overrides)


def _apply_file(settings: Settings, path: Path) -> Settings:
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}") from exc
    sections = {"retrieval": RetrievalParams, "cable": CableParams}
    top = {f.name for f in fields(Settings)} - set(sections)
    unknown = set(data) - top - set(sections)
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s): {', '.join(sorted(unknown))}")
    values = {k: v for k, v in data.items() if k in top}
    parts: dict[str, Any] = {}
    for name, cls in sections.items():
        current = getattr(settings, name)
        if name in data:
            bad = set(data[name]) - {f.name for f in fields(cls)}
            if bad:
                raise ConfigError(f"{path}: unknown [{name}] setting(s): {', '.join(sorted(bad))}")
            current = replace(current, **data[name])
        parts[name] = current
    return replace(settings.with_overrides(**values), **parts)
