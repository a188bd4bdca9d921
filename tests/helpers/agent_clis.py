"""The agents' real CLIs (Claude Code, Codex, Gemini CLI) run offline, for tests/agents/.

``PINS``: the npm package and version of each, the versions ``.ci/run`` installs into
``.ci/node`` (tests/agents/test_real_clients.py checks that the two agree). A :class:`Rig`
is one client's world: a private ``HOME`` (and ``CODEX_HOME``), a project folder, a store
folder, and a loopback stand-in of the client's model API (``localmem.bench.agent_apis``);
:meth:`Rig.install` puts localmem's hooks into the client's own settings file with the real
command (``localmem --db DB hooks install --client C``), and :meth:`Rig.session` runs one
real session of the real CLI (one prompt, non-interactive) in the project folder.

What a session stored is read only from the outside: ``localmem export`` (:func:`exported`)
and raw file bytes; ingest hooks may finish after the client exits (they are detached from
it), so :func:`wait_for_turns` polls the store. What reached the model is read from the
stand-in's record of each request: :func:`blocks` finds localmem's
``<localmem-context nonce=…>`` blocks in a request body (Gemini CLI escapes ``<`` and ``>`` in
a hook's context: the block the model reads is the unescaped one).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
import pytest

from localmem.bench.agent_apis import StandIn
from localmem.hooks import status
from localmem.storage.bench import reads
from tests.helpers.cli import ROOT

NODE_BIN = ROOT / ".ci" / "node" / "node_modules" / ".bin"
REQUIRE_ENV = "LOCALMEM_REQUIRE_AGENTS"  # CI sets it: a missing CLI fails instead of skipping

# localmem's client name -> (npm package, pinned version, command, the API its stand-in speaks)
PINS: dict[str, tuple[str, str, str, str]] = {
    "claude-code": ("@anthropic-ai/claude-code", "2.1.337", "claude", "anthropic"),
    "codex": ("@openai/codex", "0.171.0", "codex", "openai"),
    "gemini": ("@google/gemini-cli", "0.61.0", "gemini", "gemini"),
}
CLIENTS = tuple(PINS)
# The hooks each client runs in one non-interactive session, as the pinned versions do
# (Gemini CLI also compresses, PreCompress, at the end of a -p run; Codex has no SessionEnd).
SESSION_EVENTS = {
    "claude-code": ("session-start", "prompt", "stop", "session-end"),
    "codex": ("session-start", "prompt", "stop"),
    "gemini": ("session-start", "prompt", "stop", "pre-compact", "session-end"),
}
SESSION_TIMEOUT_S = 180  # one non-interactive turn takes 1-5 s here; a loaded 2-core CI machine gets room
_BLOCK = re.compile(r'<localmem-context nonce="([0-9a-f]{16})">\n(.*?)\n</localmem-context nonce="\1">', re.DOTALL)
# Variables of the person's own setup that would point a client elsewhere or change localmem.
_DROP = ("ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_", "LOCALMEM_", "XDG_")
_KEEP = ("LOCALMEM_OPEN_GUARD",)  # tests/conftest.py's guard: every process of the run has it


def pinned_bin(pin: tuple[str, str, str], env_var: str) -> Path:
    """A pinned npm CLI (package, version, command) in ``.ci/node``, or the path ``$env_var``
    names; skips the test when it is absent, fails under ``$LOCALMEM_REQUIRE_AGENTS``."""
    named = os.environ.get(env_var)
    path = Path(named) if named else NODE_BIN / pin[2]
    if not path.exists():
        why = f"no {pin[2]}: npm install --prefix .ci/node {pin[0]}@{pin[1]} (or set {env_var})"
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{REQUIRE_ENV} is set but {why}")
        pytest.skip(why)
    return path


def cli_path(client: str) -> Path:
    """The pinned CLI in ``.ci/node``; skips the test when it is absent, fails under ``$LOCALMEM_REQUIRE_AGENTS``."""
    package, version, command, _api = PINS[client]
    path = NODE_BIN / command
    if not path.exists():
        why = f"{client}: {path} is absent (npm install --prefix .ci/node {package}@{version}, as .ci/run does)"
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{REQUIRE_ENV} is set but {why}")
        pytest.skip(why)
    if shutil.which("node") is None:
        pytest.fail(f"{path} is there but node is not on PATH")
    return path


@dataclass
class Rig:
    """One client's world (module docstring). ``db``: the store localmem's hooks write."""

    client: str
    root: Path
    stand_in: StandIn
    db: Path
    cache: Path  # XDG_CACHE_HOME: the embedding model's cache, shared by the run
    runs: list[subprocess.CompletedProcess[str]] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def project(self) -> Path:
        return self.root / "project"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in _KEEP or not k.startswith(_DROP)}
        env.update(
            PATH=f"{NODE_BIN}{os.pathsep}{env.get('PATH', '')}",
            HOME=str(self.home),
            XDG_DATA_HOME=str(self.home / ".local" / "share"),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_CACHE_HOME=str(self.cache),
            LOCALMEM_QUERY_DAEMON_IDLE="0",
            LOCALMEM_HOOKS_DAEMON_IDLE="60",  # the daemon a hook starts leaves by itself soon after the test
            NO_COLOR="1",
        )
        if self.client == "claude-code":
            env.update(
                ANTHROPIC_BASE_URL=self.stand_in.url,
                ANTHROPIC_API_KEY="sk-ant-standin",
                CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",  # no telemetry, update or title calls
            )
        elif self.client == "codex":
            env.update(CODEX_HOME=str(self.home / ".codex"), STANDIN_API_KEY="sk-standin")
        else:
            env.update(
                GOOGLE_GEMINI_BASE_URL=self.stand_in.url,
                GEMINI_API_KEY="standin",
                GEMINI_CLI_TRUST_WORKSPACE="true",
            )
        return env

    def prepare(self) -> None:
        """The client's own settings for the stand-in (written before localmem's hooks are merged in)."""
        self.project.mkdir(parents=True, exist_ok=True)
        self.db.parent.mkdir(parents=True, exist_ok=True)
        if self.client == "codex":
            home = self.home / ".codex"
            home.mkdir(parents=True, exist_ok=True)
            (home / "config.toml").write_text(
                'model = "gpt-5"\nmodel_provider = "standin"\n\n[analytics]\nenabled = false\n\n'
                '[model_providers.standin]\nname = "stand-in"\n'
                f'base_url = "{self.stand_in.url}/v1"\nwire_api = "responses"\nenv_key = "STANDIN_API_KEY"\n',
                "utf-8",
            )
        elif self.client == "gemini":
            (self.home / ".gemini").mkdir(parents=True, exist_ok=True)
            settings = {
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": False},  # no usage pings where CI has a network
                "general": {"enableAutoUpdate": False},
            }
            (self.home / ".gemini" / "settings.json").write_text(json.dumps(settings), "utf-8")
        else:
            self.home.mkdir(parents=True, exist_ok=True)

    def localmem(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The real ``localmem`` command of this venv, on this rig's store, as the person would type it."""
        argv = [str(Path(sys.executable).parent / "localmem"), "--db", str(self.db), *args]
        return subprocess.run(argv, env=self.env(), capture_output=True, text=True, timeout=300, cwd=self.project)

    def install(self) -> None:
        done = self.localmem("hooks", "install", "--client", self.client)
        assert done.returncode == 0, done.stderr

    def session(self, prompt: str, reply: str) -> subprocess.CompletedProcess[str]:
        """One real session: the CLI asked ``prompt`` once, the stand-in answering ``reply``."""
        self.stand_in.reply = reply
        command = str(cli_path(self.client))
        argv = {
            "claude-code": [command, "-p", prompt],
            # the flag stands in for a person's trust in the hooks (Codex runs untrusted hooks not at all)
            "codex": [command, "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", prompt],
            "gemini": [command, "-p", prompt],
        }[self.client]
        done = subprocess.run(
            argv,
            cwd=self.project,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SESSION_TIMEOUT_S,
        )
        assert done.returncode == 0, f"{self.client} exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
        self.runs.append(done)
        return done

    def stop_daemon(self) -> None:
        """Stop the resident process a hook started for this store (it would leave by itself later)."""
        stop_daemon(self.env(), self.db)


@contextmanager
def rig(client: str, root: Path, cache: Path, db: Path | None = None) -> Iterator[Rig]:
    """A :class:`Rig` with its stand-in serving; stops the store's daemon when done."""
    api = PINS[client][3]
    with StandIn(api, reply="") as stand_in:
        r = Rig(client, root, stand_in, db or root / "store" / "memory.db", cache)
        r.prepare()
        try:
            yield r
        finally:
            r.stop_daemon()


def turn_texts(db: Path) -> list[str]:
    """The stored turns' texts, in order (a read-only connection, closed at once)."""
    if not db.is_file():
        return []
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(5000)
    try:
        return [t.text for t in reads.turn_texts(conn)]
    except (apsw.SQLError, apsw.BusyError):  # the first ingest is still making the store (its schema, WAL mode)
        return []
    finally:
        conn.close()


def wait_for_turns(db: Path, n: int, timeout: float = 240.0) -> list[str]:
    """The store's turn texts once it holds at least ``n`` (ingest hooks may run after the
    client exits); fails after ``timeout`` seconds with what it holds."""
    deadline = time.monotonic() + timeout
    got = turn_texts(db)
    while len(got) < n and time.monotonic() < deadline:
        time.sleep(0.25)
        got = turn_texts(db)
    assert len(got) >= n, f"the store holds {len(got)} turns after {timeout:g} s, expected {n}: {got}"
    return got


def wait_for_hooks(r: Rig, sessions: int, outcome: str = "runs", timeout: float = 240.0) -> dict[str, Any]:
    """The store's hook status once each hook of a session (``SESSION_EVENTS``) has counted
    ``outcome`` (``runs``, ``failed``…) ``sessions`` times: every ingest, detached or not, is done."""
    return wait_for_events(r.db, SESSION_EVENTS[r.client], sessions, outcome, timeout)


def wait_for_events(
    db: Path, events: Iterable[str], sessions: int, outcome: str = "runs", timeout: float = 240.0
) -> dict[str, Any]:
    """The hook status of ``db`` once each of ``events`` has counted ``outcome`` ``sessions`` times."""
    deadline = time.monotonic() + timeout
    while True:
        got = status.read(db)
        counts = {e: (got.get("events") or {}).get(e, {}).get(outcome, 0) for e in events}
        if all(n >= sessions for n in counts.values()):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"after {timeout:g} s the hooks counted {outcome}: {counts}, expected {sessions} each")
        time.sleep(0.25)


def stop_daemon(env: dict[str, str], db: Path) -> None:
    """Stop the resident process a hook run in ``env`` started for ``db`` (it would leave by itself later)."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        mp.delenv("XDG_RUNTIME_DIR", raising=False)
        from localmem.resident import daemon

        daemon.stop_for(db)


def exported(r: Rig) -> list[tuple[str, str]]:
    """(speaker, text) of every stored turn, as ``localmem export`` writes them."""
    done = r.localmem("export")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return [(row["speaker"], row["text"]) for row in rows]


def strings(obj: Any) -> Iterator[str]:
    """Every string in a decoded JSON value."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)


def blocks(body: bytes) -> list[str]:
    """The insides of the ``<localmem-context nonce=N>`` blocks in a request body, each
    closed by its own nonce (Gemini's ``&lt;`` / ``&gt;`` read as the model reads them)."""
    found = []
    for text in strings(json.loads(body)):
        if "localmem-context" in text:
            text = text.replace("&lt;", "<").replace("&gt;", ">")
            found += [m.group(2) for m in _BLOCK.finditer(text)]
    return found
