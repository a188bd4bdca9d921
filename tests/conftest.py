"""Shared fixtures: a deterministic fake embedder (for tests about other things), real
stores in temp dirs, and an autouse fixture that keeps every test away from the user's
real data and config directories."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from localmem.config import Settings
from localmem.errors import ModelError
from localmem.models.llm import Generation
from localmem.records import SessionIn, TurnIn
from localmem.storage.engine import keys
from localmem.storage.write.store import Store


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


@pytest.fixture
def scripted() -> ScriptedGenerator:
    return ScriptedGenerator()


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.delenv("LOCALMEM_DB", raising=False)
    monkeypatch.delenv("LOCALMEM_CONFIG", raising=False)
    monkeypatch.delenv("LOCALMEM_EMBEDDER", raising=False)
    monkeypatch.delenv("LOCALMEM_MODEL", raising=False)


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def store(tmp_path: Path, embedder: HashEmbedder) -> Iterator[Store]:
    s = Store(tmp_path / "mem.db", embedder=embedder, settings=Settings(db=tmp_path / "mem.db"))
    yield s
    s.close()


def session(key: str, start: str, *lines: tuple[str, str], source: str = "test") -> SessionIn:
    turns = tuple(TurnIn(text=text, speaker=who, source_id=f"{key}:{i}") for i, (who, text) in enumerate(lines))
    return SessionIn(key=key, turns=turns, started_at=start, source=source)


@pytest.fixture
def garden_sessions() -> list[SessionIn]:
    return [
        session(
            "s1",
            "2024-01-05T10:00:00",
            ("Ana", "I planted tomatoes in the garden today. They need sun."),
            ("Ben", "Nice! Did you also plant basil next to them?"),
            ("Ana", "Yes, basil and some mint. The mint spreads a lot."),
        ),
        session(
            "s2",
            "2024-02-10T09:00:00",
            ("Ben", "My bike chain broke on the way to work."),
            ("Ana", "Did you fix the bike chain yourself?"),
            ("Ben", "I took the bike to the shop on Main Street."),
        ),
        session(
            "s3",
            "2024-03-15T18:30:00",
            ("Ana", "The tomatoes are growing fast, the first flowers appeared."),
            ("Ben", "Great, tomatoes love the warm weather."),
        ),
    ]


def pytest_sessionstart(session: pytest.Session) -> None:
    """CI's cipher venv (.ci/run) sets LOCALMEM_REQUIRE_CIPHER: there the encryption tests
    must run, so a plain apsw (they would skip) is an error, not a quiet skip."""
    if os.environ.get("LOCALMEM_REQUIRE_CIPHER") == "1" and not keys.encryption_available():
        raise pytest.UsageError("LOCALMEM_REQUIRE_CIPHER=1 but apsw is not the apsw-sqlite3mc build")
