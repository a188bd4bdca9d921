"""Stand-ins for the model boundaries, for tests about something else: a deterministic
embedder (``HashEmbedder``), a scripted chat model (``ScriptedGenerator``, ``failing_script``),
and ``session``, a one-line way to write a test session."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from localmem.errors import ModelError
from localmem.models.llm import Generation
from localmem.records import SessionIn, TurnIn


class HashEmbedder:
    """Bag of words hashed into ``dim`` buckets: texts sharing words are similar.
    Deterministic and fast; stands in for the model where a test is about storage,
    packing or the CLI rather than about embedding quality."""

    def __init__(self, dim: int = 64, model_id: str = "test-hash-64") -> None:
        self.dim = dim
        self.model_id = model_id
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for w in re.findall(r"[a-z0-9]+", text.lower()):
                h = int(hashlib.md5(w.encode()).hexdigest()[:8], 16)
                out[i, h % self.dim] += 1.0 if (h >> 20) & 1 else -1.0
            out[i, -1] += 0.01  # no all-zero rows
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


class ScriptedGenerator:
    """A fake chat model for tests about the pipeline rather than the model: ``script``
    maps the messages of each call (numbered lines ``mN. Speaker: text``) to the reply
    text, or raises. Records every call; counts tokens as words."""

    model_id = "test-scripted"

    def __init__(self, script: Callable[[list[tuple[int, str, str]]], str | dict[str, Any]] | None = None) -> None:
        self.script = script or self.keywords_from_capitals
        self.calls: list[list[tuple[int, str, str]]] = []

    @staticmethod
    def turns_of(messages: Sequence[dict[str, str]]) -> list[tuple[int, str, str]]:
        found = re.findall(r"^m(\d+)\. ([^:]*): (.*)$", messages[-1]["content"], flags=re.MULTILINE)
        return [(int(i), who, text) for i, who, text in found]

    @staticmethod
    def keywords_from_capitals(turns: list[tuple[int, str, str]]) -> dict[str, Any]:
        """Every capitalised word after the first as a keyword; one invented keyword."""
        out: dict[str, Any] = {}
        for i, _who, text in turns:
            caps = [w.strip(".,!?") for w in text.split()[1:] if w[:1].isupper() and w != "I"]
            out[f"m{i}"] = {
                "type": "event",
                "keywords": [{"k": c, "tag": "thing"} for c in caps] + [{"k": "Atlantis", "tag": "place"}],
                "triples": [],
                "facts": [],
            }
        return out

    def generate_json(
        self, messages: Sequence[dict[str, str]], schema: dict[str, Any], *, max_tokens: int, temperature: float
    ) -> Generation:
        turns = self.turns_of(messages)
        self.calls.append(turns)
        reply = self.script(turns)
        text = reply if isinstance(reply, str) else json.dumps(reply)
        prompt = sum(len(m["content"].split()) for m in messages)
        return Generation(text, prompt, len(text.split()))


def failing_script(turns: list[tuple[int, str, str]]) -> str:
    raise ModelError("scripted failure")


def session(key: str, start: str, *lines: tuple[str, str], source: str = "test") -> SessionIn:
    turns = tuple(TurnIn(text=text, speaker=who, source_id=f"{key}:{i}") for i, (who, text) in enumerate(lines))
    return SessionIn(key=key, turns=turns, started_at=start, source=source)


def garden_script(turns: list[tuple[int, str, str]]) -> dict[str, Any]:
    """Capitalised words as keywords; a hobby fact for gardening turns, a work fact for
    the bike turn, and one triple."""
    out = ScriptedGenerator.keywords_from_capitals(turns)
    for i, who, text in turns:
        entry = out[f"m{i}"]
        entry["keywords"] = [k for k in entry["keywords"] if k["k"] != "Atlantis"]
        low = text.lower()
        if "tomatoes" in low:
            entry["keywords"].append({"k": "tomatoes", "tag": "food"})
            entry["facts"] = [{"person": who, "aspect": "hobby", "value": "tomatoes"}]
        if "bike" in low:
            entry["keywords"].append({"k": "bike", "tag": "thing"})
            entry["facts"] = [{"person": who, "aspect": "work", "value": "bike"}]
        if "basil" in low:
            entry["triples"] = [{"s": who, "r": "plant", "o": "basil"}]
    return out
