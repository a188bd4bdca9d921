"""The real OpenCode CLI for tests/agents/: where its pinned binary is (``PIN`` in
``.ci/node``, or ``$LOCALMEM_OPENCODE_BIN``; a test skips without it, fails under
``$LOCALMEM_REQUIRE_AGENTS``) and a private home that runs it offline against the loopback
stand-in of the Anthropic Messages API.

The recipe (checked with ``opencode-ai`` 1.18.33): ``HOME`` and the ``XDG_*`` folders in a
temp folder; ``$XDG_CONFIG_HOME/opencode/opencode.json`` (``bench.agent_cost_opencode.config``, which
``localmem bench agent --client opencode`` writes too) sets the model
``anthropic/claude-standin``, defines that model under the ``anthropic`` provider and points
the provider's ``options.baseURL`` at ``<stand-in>/v1``; ``OPENCODE_DISABLE_MODELS_FETCH``
(no models.dev), ``OPENCODE_DISABLE_AUTOUPDATE``, ``OPENCODE_DISABLE_SHARE``; then
``opencode run "…"`` in the project folder (``--continue`` for the next turn of the last
session). It makes two requests per turn, the turn and a title (both ``POST
/v1/messages``), and writes ``$XDG_DATA_HOME/opencode/opencode.db``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from localmem.bench.agent_apis import StandIn
from localmem.bench.agent_cost_opencode import config as opencode_config
from tests.helpers.agent_clis import NODE_BIN, pinned_bin

PIN = ("opencode-ai", "1.18.33", "opencode")
BIN_ENV = "LOCALMEM_OPENCODE_BIN"
_DROP = ("OPENCODE_", "ANTHROPIC_", "OPENAI_", "LOCALMEM_", "XDG_")
_KEEP = ("LOCALMEM_OPEN_GUARD",)


def opencode_bin() -> Path:
    return pinned_bin(PIN, BIN_ENV)


def data_dir(home: Path) -> Path:
    """Where OpenCode keeps its database in this home."""
    return home / ".local" / "share" / "opencode"


def env_for(home: Path, stand_in: StandIn) -> dict[str, str]:
    """The environment of an offline ``opencode`` in ``home`` (its config written there)."""
    config = home / ".config" / "opencode"
    config.mkdir(parents=True, exist_ok=True)
    (config / "opencode.json").write_text(json.dumps(opencode_config(stand_in.url), indent=2))
    env = {k: v for k, v in os.environ.items() if k in _KEEP or not k.startswith(_DROP)}
    env.update(
        PATH=f"{NODE_BIN}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        OPENCODE_DISABLE_MODELS_FETCH="1",
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_DISABLE_SHARE="1",
        NO_COLOR="1",
    )
    return env
