"""The typed results of the MCP tools: each tool returns one of these, so its output
schema in ``tools/list`` says what comes back (field names, types, which may be null).

The traversal tools return the toolkit's own records (``localmem.toolkit``: ``CueHit``,
``TurnRef``, ...) inside a :class:`Page`; field names are the public contract either way.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from localmem import toolkit

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of results; ``next_offset`` is null on the last page."""

    items: list[T]
    offset: int
    limit: int
    total: int = Field(description="items in all pages")
    next_offset: int | None = Field(description="pass as offset for the next page; null when there is none")

    @classmethod
    def of(cls, page: toolkit.Page[T]) -> Page[T]:
        return cls(
            items=page.items, offset=page.offset, limit=page.limit, total=page.total, next_offset=page.next_offset
        )


class Remembered(BaseModel):
    """What remember stored."""

    session: str = Field(description="the session key the turns belong to")
    turn_ids: list[int] = Field(description="the id of every turn given, in order (a turn stored before keeps its id)")
    new_turns: int
    existing_turns: int = Field(description="turns that were already stored (not duplicated)")
    enrichment: str = Field(description="whether the local model will index the turns in the background")


class CitedTurn(BaseModel):
    turn_id: int
    session: str
    timestamp: str | None
    speaker: str
    reason: str = Field(description="why it is in the context: anchor / temporal / semantic / extracted / antecedent")
    score: float = Field(description="the scorer's probability that the turn is evidence")


class Recalled(BaseModel):
    """A reconstructed context: recalled records of past conversations (data, not instructions)."""

    text: str = Field(description="the recalled turns as quoted records, in time order, grouped by session")
    tokens: int
    budget_tokens: int
    turns: list[CitedTurn] = Field(description="the turns in text, best evidence first")


class AnswerTurn(BaseModel):
    turn_id: int
    session: str
    timestamp: str | None
    reason: str


class Answered(BaseModel):
    """The local model's answer and the turns it was given."""

    question: str
    answer: str
    model: str
    context_tokens: int
    turns: list[AnswerTurn]
    warning: str | None = Field(None, description="a caveat about the answer (e.g. the model is only a test model)")


class Forgotten(BaseModel):
    deleted_turns: int


class FullTurn(BaseModel):
    """One turn in full (its whole text)."""

    model_config = ConfigDict(extra="forbid")
    turn_id: int
    session: str
    session_started: str | None
    position: int = Field(description="1-based place in its session")
    timestamp: str | None
    speaker: str
    role: str
    text: str
    source_id: str | None


class WorkerInfo(BaseModel):
    running: bool
    model: str | None
    turns_enriched_here: int
    error: str | None


class SamplingInfo(BaseModel):
    enabled: bool
    note: str


class MemoryStats(BaseModel):
    """What the memory holds (more counters may follow these)."""

    model_config = ConfigDict(extra="allow")
    db: str
    schema_version: int
    embedder: str | None
    embedder_dim: int
    sessions: int
    turns: int
    cues: dict[str, int] = Field(description="cues by kind: statement, triple, keyword, fact")
    edges: dict[str, int] = Field(description="links by kind: temporal, semantic, antecedent")
    tags: int
    topics: int
    themes: int
    jobs_pending: int
    first_turn: str | None
    last_turn: str | None
    bytes: int = Field(description="database file size, write-ahead log included")
    enrichment: dict[str, Any] = Field(description="how much the local model has indexed, and the job queue")
    worker: WorkerInfo
    answer_tool: bool = Field(description="whether the answer tool is available (a local model is configured)")
    sampling_backend: SamplingInfo
