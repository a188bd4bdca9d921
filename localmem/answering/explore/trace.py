"""The trace of one exploration: every round, every call and the evidence each added.

Invariants:
- plain data, filled in by the loop as it runs and never changed after;
- :meth:`Exploration.to_dict` is the ``--json`` output of ``localmem explore``;
- round 0 is the seed (no model call) and is not counted in ``model_rounds`` /
  ``calls``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Call:
    tool: str
    args: dict[str, Any]
    ok: bool
    result: str  # what the model was shown (result or error), cut to RESULT_CHARS
    turn_ids: list[int] = field(default_factory=list)  # turns the result names
    new_turn_ids: list[int] = field(default_factory=list)  # of those, first seen here


@dataclass
class Round:
    index: int  # 0: the seed (no model call)
    thought: str
    done: bool
    calls: list[Call]
    evidence_added: list[int]
    prompt_tokens: int = 0
    generated_tokens: int = 0
    error: str = ""  # the reply could not be used (unparseable, model failure)


@dataclass
class Exploration:
    question: str
    answer: str
    support: list[int]
    confidence: float
    rounds: list[Round]
    evidence: list[int]  # every turn seen, in the order first seen
    stop_reason: str  # done / max_rounds / max_tokens / model_error / stalled
    prompt_tokens: int
    generated_tokens: int
    model: str

    @property
    def calls(self) -> int:
        return sum(len(r.calls) for r in self.rounds if r.index > 0)

    @property
    def model_rounds(self) -> int:
        return sum(1 for r in self.rounds if r.index > 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.answer,
            "support": self.support,
            "confidence": self.confidence,
            "stop_reason": self.stop_reason,
            "rounds": self.model_rounds,
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "generated_tokens": self.generated_tokens,
            "model": self.model,
            "evidence": self.evidence,
            "trace": [asdict(r) for r in self.rounds],
        }
