"""What a worker run, a topics pass and a theme pass did: counts only, no behaviour.

Shared by the worker and the steps it runs, so a step never imports the worker.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class WorkerStats:
    turns: int = 0
    failed: int = 0
    parked: int = 0
    calls: int = 0
    unparsed_calls: int = 0  # calls whose reply was refused (localmem/models/replies.py)
    prompt_tokens: int = 0
    generated_tokens: int = 0
    cues_kept: int = 0
    cues_rejected: int = 0
    antecedent_turns: int = 0
    antecedent_calls: int = 0
    antecedent_candidates: int = 0
    antecedent_edges: int = 0
    started: float = field(default_factory=time.perf_counter)

    def to_dict(self) -> dict[str, float]:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        return {
            "turns": self.turns,
            "failed": self.failed,
            "parked": self.parked,
            "calls": self.calls,
            "unparsed_calls": self.unparsed_calls,
            "prompt_tokens": self.prompt_tokens,
            "generated_tokens": self.generated_tokens,
            "cues_kept": self.cues_kept,
            "cues_rejected": self.cues_rejected,
            "antecedent_turns": self.antecedent_turns,
            "antecedent_calls": self.antecedent_calls,
            "antecedent_candidates": self.antecedent_candidates,
            "antecedent_edges": self.antecedent_edges,
            "seconds": round(elapsed, 2),
            "turns_per_s": round(self.turns / elapsed, 3),
        }


@dataclass
class ThemeStats:
    topics_placed: int = 0  # changed session topics the pass looked at
    themes_created: int = 0
    topics_joined: int = 0  # topics that joined an existing theme
    themes_relabelled: int = 0  # existing themes labelled again
    themes_dissolved: int = 0
    model_calls: int = 0
    label_failures: int = 0  # model calls whose reply was refused: the theme got a keyword label
    conflicts: int = 0  # passes discarded because the topic tables changed meanwhile


@dataclass
class TopicStats:
    jobs: int = 0
    topics_created: int = 0
    topics_grown: int = 0
    turns: int = 0
    model_calls: int = 0
    label_failures: int = 0  # model calls whose reply was refused: the topic got a keyword label
    failed: int = 0  # job attempts that failed (back-off, then parked)
    themes: ThemeStats | None = None
