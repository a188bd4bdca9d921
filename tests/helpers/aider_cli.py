"""The real Aider for tests/agents/: where its pinned command is (``PIN``, installed in its
own venv ``.ci/aider-venv`` because its pins clash with ours, or ``$LOCALMEM_AIDER``; a
test skips without it, fails under ``$LOCALMEM_REQUIRE_AGENTS``) and :class:`Aider`, a
git repository in a private ``HOME`` where one ``aider --message`` run is one session,
offline against the loopback stand-in of the OpenAI Chat Completions API
(``localmem.bench.agent_apis``; Aider reaches it through litellm).

Offline means no request leaves the machine: the model is one litellm does not know
(``MODEL``), described in a model metadata file, so neither litellm
(``LITELLM_LOCAL_MODEL_COST_MAP``) nor Aider (``aider/models.py``, ``ModelInfoManager``,
which else fetches litellm's price list once a day) looks for it on the network; and the
update check, analytics and release notes are off. ``--yes-always`` answers Aider's
questions as a person who says yes to everything; nothing is committed.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import apsw
import pytest

from localmem.bench.agent_apis import StandIn
from localmem.storage.bench import reads
from tests.helpers.agent_clis import REQUIRE_ENV
from tests.helpers.cli import ROOT

PIN = ("aider-chat", "0.86.2")
BIN_ENV = "LOCALMEM_AIDER"
VENV = ROOT / ".ci" / "aider-venv"
MODEL = "openai/localmem-standin"
TURN_TIMEOUT_S = 180  # a turn takes 3-4 s here (most of it Aider's imports); a loaded CI machine gets room
_DROP = ("AIDER_", "OPENAI_", "LITELLM_", "LOCALMEM_", "XDG_", "GIT_", "ANTHROPIC_", "GEMINI_", "OPENROUTER_")
# tests/conftest.py's guard, which every process of the run has, and its cache (the embedding
# model's, made once a run: localmem's commands here use it)
_KEEP = ("LOCALMEM_OPEN_GUARD", "XDG_CACHE_HOME")
# Aider's switches for a run with nobody at the terminal and nothing but the stand-in to talk to.
_FLAGS = (
    "--yes-always",
    "--no-auto-commits",
    "--no-check-update",
    "--no-analytics",
    "--no-show-release-notes",
    "--no-show-model-warnings",
    "--no-gitignore",
    "--no-fancy-input",
    "--no-pretty",
    "--edit-format",
    "diff",  # SEARCH/REPLACE blocks, as Aider uses with the strong models (an unknown model gets "whole")
)


def aider_bin() -> Path:
    named = os.environ.get(BIN_ENV)
    path = Path(named) if named else VENV / "bin" / "aider"
    if not path.exists():
        why = (
            f"no Aider: python3 -m venv {VENV.relative_to(ROOT)} && "
            f"{VENV.relative_to(ROOT)}/bin/pip install {PIN[0]}=={PIN[1]} (or set {BIN_ENV})"
        )
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{REQUIRE_ENV} is set but {why}")
        pytest.skip(why)
    return path


@dataclass
class Aider:
    """A person's repository ``repo`` and their ``home``, where ``command`` runs against ``stand_in``."""

    command: Path
    home: Path
    repo: Path
    stand_in: StandIn

    @property
    def history(self) -> Path:
        return self.repo / ".aider.chat.history.md"

    def prepare(self, files: dict[str, str]) -> None:
        """A git repository holding ``files`` (committed), and the stand-in model's metadata."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.repo.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (self.repo / name).write_text(text, "utf-8")
        for argv in (
            ["init", "-q"],
            ["config", "user.name", "Dev"],  # else Aider asks for a name in every session's opening
            ["config", "user.email", "dev@example.com"],
            ["add", "."],
            ["commit", "-q", "-m", "start"],
        ):
            subprocess.run(["git", *argv], cwd=self.repo, env=self.env(), check=True, capture_output=True)
        info = {"max_input_tokens": 128000, "max_output_tokens": 4096, "litellm_provider": "openai", "mode": "chat"}
        info |= {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0}
        (self.home / "model.metadata.json").write_text(json.dumps({MODEL: info}), "utf-8")

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in _KEEP or not k.startswith(_DROP)}
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            LITELLM_LOCAL_MODEL_COST_MAP="True",  # litellm's own price list, not the one on GitHub
            NO_COLOR="1",
        )
        return env

    def args(self, message: str | None, *files: str, stream: bool = True) -> list[str]:
        """Aider's arguments for one offline ``--message`` session with ``files`` in the chat
        (``message`` None: a session a person types into)."""
        argv = [*files, *(["--message", message] if message is not None else []), "--model", MODEL]
        argv += ["--openai-api-base", f"{self.stand_in.url}/v1", "--openai-api-key", "sk-standin"]
        argv += ["--model-metadata-file", str(self.home / "model.metadata.json"), *_FLAGS]
        argv.append("--stream" if stream else "--no-stream")
        return argv

    def turn(self, message: str, reply: str, *files: str, stream: bool = True) -> subprocess.CompletedProcess[str]:
        """One session: ``aider [FILES] --message MESSAGE``, the model answering ``reply``."""
        self.stand_in.reply = reply
        done = subprocess.run(
            [str(self.command), *self.args(message, *files, stream=stream)],
            cwd=self.repo,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TURN_TIMEOUT_S,
        )
        assert done.returncode == 0, f"aider exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        return done


def settled(log: Path) -> None:
    """The history as capture finds it once the session is over (written more than 2 minutes ago)."""
    old = log.stat().st_mtime - 3600
    os.utime(log, (old, old))


def texts_in(db: Path) -> list[str]:
    try:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return []
    try:
        return [t.text for t in reads.turn_texts(conn)]
    except apsw.Error:  # the store is not made yet
        return []
    finally:
        conn.close()
