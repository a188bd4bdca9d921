"""The real GitHub Copilot CLI for tests/agents/: where its pinned binary is (``PIN`` in
``.ci/node``, or ``$LOCALMEM_COPILOT_BIN``; a test skips without it, fails under
``$LOCALMEM_REQUIRE_AGENTS``) and the environment that runs it offline against a loopback
stand-in of the OpenAI Responses API (``COPILOT_OFFLINE``, its own-provider settings)."""

from __future__ import annotations

import os
from pathlib import Path

from localmem.bench.agent_apis import StandIn
from tests.helpers.agent_clis import NODE_BIN, pinned_bin

PIN = ("@github/copilot", "1.0.102", "copilot")
BIN_ENV = "LOCALMEM_COPILOT_BIN"
_DROP = ("COPILOT_", "GH_", "GITHUB_", "OPENAI_", "LOCALMEM_", "XDG_")
_KEEP = ("LOCALMEM_OPEN_GUARD",)


def copilot_bin() -> Path:
    return pinned_bin(PIN, BIN_ENV)


def env_for(home: Path, stand_in: StandIn) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _KEEP or not k.startswith(_DROP)}
    env.update(
        PATH=f"{NODE_BIN}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        COPILOT_OFFLINE="true",
        COPILOT_PROVIDER_BASE_URL=f"{stand_in.url}/v1",
        COPILOT_PROVIDER_API_KEY="sk-standin",
        COPILOT_PROVIDER_WIRE_API="responses",
        COPILOT_MODEL="gpt-5",
        COPILOT_AUTO_UPDATE="false",
        NO_COLOR="1",
    )
    return env
