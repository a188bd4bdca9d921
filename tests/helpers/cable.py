"""CABLE's test doubles: a fake model for its two calls (``CableFake``), a whole
worker's model (``Enriching``), a three-session ``story`` and a store holding it
(``make_store``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from localmem.config import CableParams, RetrievalParams, Settings
from localmem.models.llm import Generation
from localmem.records import SessionIn
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder, ScriptedGenerator, session


class CableFake:
    """Fake chat model for CABLE's two calls. ``queries(turn_text)`` gives the antecedent
    queries; ``accept(current, earlier)`` decides a verdict. Records every call."""

    model_id = "test-cable"

    def __init__(
        self,
        queries: Callable[[str], list[str]] | None = None,
        accept: Callable[[str, str], bool] | None = None,
    ) -> None:
        self.queries = queries or (lambda text: [text])
        self.accept = accept or (lambda cur, old: True)
        self.calls: list[tuple[str, list[dict[str, str]]]] = []

    def generate_json(
        self, messages: Sequence[dict[str, str]], schema: dict[str, Any], *, max_tokens: int, temperature: float
    ) -> Generation:
        user = messages[-1]["content"]
        if "CURRENT turn:" in user:
            self.calls.append(("verify", list(messages)))
            assert temperature == 0.0
            current = user.split("CURRENT turn:\n", 1)[1].split("\n", 1)[0]
            earlier = re.findall(r"^h(\d+)\. (.*)$", user, flags=re.MULTILINE)
            reply: dict[str, Any] = {
                f"h{i}": {
                    "valid": self.accept(spoken_text(current), spoken_text(t)),
                    "confidence": 0.8,
                    "reason": f"because {i}",
                }
                for i, t in earlier
            }
        else:
            self.calls.append(("queries", list(messages)))
            memory = user.split("Memory: ", 1)[1].split("\n", 1)[0]
            reply = {"queries": self.queries(spoken_text(memory))}
        text = json.dumps(reply)
        return Generation(text, len(user.split()), len(text.split()))

    def kinds(self) -> list[str]:
        return [k for k, _m in self.calls]


class Enriching:
    """A whole worker's model: extraction goes to ``ScriptedGenerator``, topic labels get
    a fixed reply, CABLE's calls go to ``cable``."""

    model_id = "test-enriching"

    def __init__(self, cable: CableFake) -> None:
        self.extract = ScriptedGenerator()
        self.cable = cable

    def generate_json(self, messages: Sequence[dict[str, str]], schema: dict[str, Any], **kw: Any) -> Generation:
        props = schema.get("properties", {})
        if "m1" in props:
            return self.extract.generate_json(messages, schema, **kw)
        if "label" in props:  # the topic layer, when the queue is empty
            return Generation(json.dumps({"label": "talk", "summary": "talk"}), 1, 1)
        return self.cable.generate_json(messages, schema, **kw)


def spoken_text(rendered: str) -> str:
    """'(2024-01-05 10:00) Ana: I planted ...' or 'Ana: I planted ...' -> 'I planted ...'."""
    rendered = re.sub(r"^\([^)]*\) ", "", rendered)
    return rendered.split(": ", 1)[1] if ": " in rendered else rendered


def story() -> list[SessionIn]:
    return [
        session(
            "s1",
            "2024-01-10T09:00:00",
            ("Ana", "I got an offer for a software job in Seattle starting in March."),
            ("Ben", "Congratulations, that is a big step for you."),
            ("Ana", "I accepted the Seattle offer this morning."),
        ),
        session(
            "s2",
            "2024-02-20T18:00:00",
            ("Ana", "I spent the whole weekend packing boxes and labelling them."),
            ("Ben", "Do you need help carrying the sofa downstairs?"),
            ("Ana", "Yes please, the movers come on Friday."),
        ),
        session(
            "s3",
            "2024-03-05T08:00:00",
            ("Ana", "First day at the new office, the team seems friendly."),
            ("Ben", "Thanks!"),
            ("Ana", "The commute by ferry takes forty minutes."),
        ),
    ]


def make_store(tmp_path: Path, cable: CableParams | None = None, **retrieval: Any) -> Store:
    settings = Settings(db=tmp_path / "m.db", retrieval=RetrievalParams(**retrieval), cable=cable or CableParams())
    s = Store(tmp_path / "m.db", embedder=HashEmbedder(), settings=settings)
    s.write_sessions(story())
    return s
