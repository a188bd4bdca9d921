"""The records the traversal tools return: one frozen dataclass per result shape.

Every record names the turn ids, sessions and times it comes from, so a model (or an
MCP client, which sees these as JSON through :meth:`Page.to_dict` / ``asdict``) can
cite and follow them.

Invariants:
- frozen, plain data: no store handles, nothing computed on access;
- field names are the keys MCP clients and the active loop read in results (they are
  serialised with ``asdict``), so renaming one changes what callers see.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of results: ``next_offset`` is None on the last page."""

    items: list[T]
    offset: int
    limit: int
    total: int
    next_offset: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": [asdict(i) if is_dataclass(i) and not isinstance(i, type) else i for i in self.items],
            "offset": self.offset,
            "limit": self.limit,
            "total": self.total,
            "next_offset": self.next_offset,
        }


@dataclass(frozen=True)
class TurnRef:
    turn_id: int
    session: str
    timestamp: str | None
    speaker: str
    text: str
    clipped: bool = False
    source_id: str | None = None


@dataclass(frozen=True)
class CueRef:
    cue_id: int
    kind: str
    text: str
    turn_id: int
    tags: list[str] = field(default_factory=list)
    subject: str | None = None
    relation: str | None = None
    object: str | None = None


@dataclass(frozen=True)
class CueHit:
    cue: CueRef
    match: str  # exact / all_words / similar / some_words
    score: float
    timestamp: str | None
    speaker: str


@dataclass(frozen=True)
class TagCount:
    tag: str
    turns: int
    cue_ids: list[int]


@dataclass(frozen=True)
class TurnCues:
    turn: TurnRef
    cues: list[CueRef]


@dataclass(frozen=True)
class Neighbour:
    offset: int  # places from the turn in its session (-2, -1, 1, 2, ...)
    turn: TurnRef


@dataclass(frozen=True)
class Link:
    kind: str  # temporal / semantic / antecedent
    direction: str  # out (this turn -> other) / in (other -> this turn)
    weight: float
    reason: str
    turn: TurnRef


@dataclass(frozen=True)
class TurnContext:
    turn: TurnRef
    neighbours: list[Neighbour]
    links: list[Link]
    links_total: int


@dataclass(frozen=True)
class TurnTime:
    turn_id: int
    timestamp: str | None
    session: str
    session_started: str | None
    position: int  # 1-based place in its session
    session_turns: int


@dataclass(frozen=True)
class Aspect:
    aspect: str
    facts: int
    latest: str | None


@dataclass(frozen=True)
class Fact:
    cue_id: int
    person: str
    aspect: str
    value: str
    turn_id: int
    timestamp: str | None
    session: str


@dataclass(frozen=True)
class Topic:
    topic_id: int
    kind: str  # session (a stretch of one session) / theme (session topics recurring across sessions)
    label: str
    summary: str
    turns: int
    theme_id: int | None = None  # a session topic's theme, if it is in one
    session_topics: int | None = None  # a theme's number of session topics (theme_topics lists them)
