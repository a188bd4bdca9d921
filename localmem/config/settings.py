"""The settings as frozen dataclasses: every default defined once, here; each instance's
values checked on construction (``values.check_instance``), so a ``Settings`` built in code
is held to the same rules as one loaded from a file. docs/configuration.md lists every key.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import platformdirs

from localmem.config.values import check_budgets, check_instance, check_value, hints

APP = "localmem"


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
    # Under a project scope, what a person said about themselves in other projects (or outside
    # any) stays at this share of its probability; the agents' turns there do not, nor ("self") a
    # person's questions and work talk there ("all": every person turn). retrieval/scope.py.
    project_elsewhere: float = 0.25
    project_personal: str = "self"
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
        check_instance(self, "retrieval")


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
        check_instance(self, "cable")

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
        check_instance(self, "ingest")


@dataclass(frozen=True)
class HooksParams:
    """What the agents' hooks inject and how long they may take (localmem/hooks/, docs/capture.md)."""

    session_budget: int = 800  # tokens of context a session start gets (where you left off, decided, open)
    prompt_budget: int = 300  # tokens of memory a prompt gets, when it clears the bar
    # A prompt gets memory only when a visible turn or sentence is at least this similar to it
    # (cosine). None: the bar of the embedder that reads the store (its embedder.json's
    # "prompt_bar"; MiniLM 0.5), as `localmem bench hooks --calibrate` measured it per model
    # (docs/capture.md); a number set here wins for every embedder.
    prompt_bar: float | None = None
    session_deadline: float = 8.0  # seconds; the installed entry gives the client 10
    prompt_deadline: float = 4.0  # seconds; the installed entry gives the client 5
    ingest_deadline: float = 50.0  # seconds (stop, compaction, session end) where the agent waits; the client gives 60
    # An ingest hook done after the agent moved on (hooks/background.py: every POSIX system)
    # may take this long, a write lock held elsewhere waited out for half of it.
    background_deadline: float = 600.0
    # A hook that finds no resident process starts one (`serve --transport socket`), which
    # exits after this many idle seconds; 0: hooks start none (localmem/resident/daemon.py).
    daemon_idle: float = 900.0

    def __post_init__(self) -> None:
        check_instance(self, "hooks")


@dataclass(frozen=True)
class QueryParams:
    """What ``localmem query`` and ``localmem recall`` leave behind (docs/cli.md, "The resident fast path")."""

    # A query or recall that found no resident process and read in-process starts one
    # (`serve --transport socket`) once its answer is printed, so the next one is served; it
    # exits after this many idle seconds; 0: they start none (localmem/resident/daemon.py).
    daemon_idle: float = 600.0

    def __post_init__(self) -> None:
        check_instance(self, "query")


@dataclass(frozen=True)
class BackupsParams:
    """Rolling backups taken by a process that holds the store (storage/copies/rolling.py,
    resident/backups.py; docs/security.md, "Rolling backups")."""

    enabled: bool = True  # false: no process takes them (those already taken stay until deleted)
    interval_hours: float = 24.0  # one is taken when the newest is older than this
    keep: int = 7  # the newest N are kept, older ones deleted
    max_total_mb: float = 0.0  # >0: older ones also go while the kept ones take more than this (the newest never)
    min_free_mb: float = 1024.0  # one is skipped (said in the process log) when less would stay free on the disk
    delay_s: float = 60.0  # seconds after a process opens the store before it first looks (its first caller first)

    def __post_init__(self) -> None:
        check_instance(self, "backups")


@dataclass(frozen=True)
class Settings:
    db: Path = field(default_factory=lambda: default_db_path())
    embedder: str = "default"  # "default" (follows the store), "minilm", a GGUF model, a .onnx file or an ONNX folder
    model: str | None = None  # GGUF chat model for enrichment; None: not configured
    n_gpu_layers: int | None = None  # None: all layers when llama.cpp can offload, else 0; -1: all
    n_ctx: int = 4096  # the generation model's context window (capped at its training size)
    n_threads: int | None = None  # None: half the CPU cores (llama.cpp spins; oversubscription is slow)
    extract_batch: int = 6  # turns of one session per extraction call
    job_attempts: int = 3  # a job that failed this often is parked
    budget_tokens: int = 2000  # a reconstruct call's token budget when none is given
    max_budget_tokens: int = 32000  # a larger requested budget is refused (MCP: capped)
    recall_log: int = 2000  # reconstruct calls kept in the recall log (storage/layers/recalls.py); 0: none written
    replica: str | None = None  # localmem replicate's target: file:///…, sftp://…, s3://… (storage/copies/replica.py)
    retrieval: RetrievalParams = field(default_factory=RetrievalParams)
    cable: CableParams = field(default_factory=CableParams)
    ingest: IngestParams = field(default_factory=IngestParams)
    hooks: HooksParams = field(default_factory=HooksParams)
    query: QueryParams = field(default_factory=QueryParams)
    backups: BackupsParams = field(default_factory=BackupsParams)

    def __post_init__(self) -> None:
        check_instance(self, "")
        check_budgets(self.budget_tokens, self.max_budget_tokens, {}, "Settings")

    def with_overrides(self, **kwargs: Any) -> Settings:
        """These settings with explicit values (``None``: not given), checked like any other."""
        clean = {
            k: check_value(k, hints(Settings).get(k), v, f"argument {k}") for k, v in kwargs.items() if v is not None
        }
        return replace(self, **clean)


Section = (
    type[RetrievalParams]
    | type[CableParams]
    | type[IngestParams]
    | type[HooksParams]
    | type[QueryParams]
    | type[BackupsParams]
)
SECTIONS: dict[str, Section] = {
    "retrieval": RetrievalParams,
    "cable": CableParams,
    "ingest": IngestParams,
    "hooks": HooksParams,
    "query": QueryParams,
    "backups": BackupsParams,
}


def default_db_path() -> Path:
    return Path(platformdirs.user_data_dir(APP)) / "memory.db"
