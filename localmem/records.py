"""Frozen records passed between stages: parsers -> store -> reconstruct -> callers.

Invariants: records are immutable; timestamps are naive ISO-8601 strings
(``YYYY-MM-DDTHH:MM:SS``) in the source's own clock, so ordering them as strings
orders them in time; a turn's ``text`` is the evidence exactly as the source gave it
(an image caption is appended as ``[image: ...]``) and is never rewritten later.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The longest turn text any path stores (MCP remember, Store.write, file ingest), in
# characters: a longer one is refused with an error naming it, never split or cut.
MAX_TURN_CHARS = 100_000


@dataclass(frozen=True)
class TurnIn:
    """A turn as a parser or a caller hands it to ``Store.write``."""

    text: str
    speaker: str = ""
    role: str = "user"
    timestamp: str | None = None
    source_id: str | None = None


@dataclass(frozen=True)
class Project:
    """Where an agent's session ran, as its log says: working directory, git branch,
    repository (remote URL) and commit; empty where the log does not say."""

    cwd: str = ""
    branch: str = ""
    repository: str = ""
    commit: str = ""


@dataclass(frozen=True)
class ProjectScope:
    """A read limited to one project: sessions that ran in ``root`` (or a folder inside
    it) or in a clone of ``repository``; see ``localmem.retrieval.scope``."""

    root: str
    repository: str = ""


@dataclass(frozen=True)
class SessionIn:
    """A session (one conversation or one chat of a source) and its turns in order.
    ``client`` names the agent that wrote the log (``claude-code``, ``codex``,
    ``gemini-cli``); ``project`` where it ran. Neither is part of any identity."""

    key: str
    turns: tuple[TurnIn, ...]
    started_at: str | None = None
    source: str = "api"
    title: str = ""
    client: str = ""
    project: Project | None = None


@dataclass(frozen=True)
class WriteResult:
    """What ``Store.write`` did: ids of every turn given, in order, and what was new."""

    session_id: int
    turn_ids: tuple[int, ...]
    new_turns: int
    existing_turns: int


@dataclass(frozen=True)
class EvidenceTurn:
    """One turn placed in a reconstructed context and why it is there."""

    turn_id: int
    source_id: str | None
    session: str
    session_id: int
    timestamp: str | None
    speaker: str
    text: str
    reason: str  # anchor / temporal / semantic / extracted / antecedent
    score: float
    tokens: int
    why: str = ""


@dataclass(frozen=True)
class Context:
    """The result of ``reconstruct``: prompt-ready text plus structured evidence."""

    query: str
    text: str
    tokens: int
    budget_tokens: int
    turns: tuple[EvidenceTurn, ...]
    stats: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "text": self.text,
            "tokens": self.tokens,
            "budget_tokens": self.budget_tokens,
            "turns": [t.__dict__ for t in self.turns],
            "stats": self.stats,
        }
