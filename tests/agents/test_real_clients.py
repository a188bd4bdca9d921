"""Claude Code, Codex and Gemini CLI, the real clients, with localmem's hooks installed by
``localmem hooks install``: four sessions in one project, each a real run of the CLI
against a loopback stand-in of its model API.

1. a decision is said (the person's prompt and the model's reply);
2. a new session asks about it: the model request carries the decision inside localmem's
   ``<localmem-context nonce=…>`` block;
3. the person pastes two secrets (a GitHub token, an Anthropic key, made up at run time);
4. a new session asks about them: recall brings that session back, without the secrets.

Then: the store holds each sentence said exactly once and nothing localmem injected; no
byte of the store's files and no request after session 3 holds a secret; every hook ran
and none failed. And a store that cannot be opened (its path is a folder) leaves the
client's answer as it is without localmem, every hook counting the failure in ``localmem
hooks status``.
"""

from __future__ import annotations

import json
import secrets
import string
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from localmem.bench.agent_apis import Request, is_conversation
from tests.helpers.agent_clis import (
    CLIENTS,
    PINS,
    SESSION_EVENTS,
    Rig,
    blocks,
    cli_path,
    exported,
    rig,
    wait_for_hooks,
    wait_for_turns,
)
from tests.helpers.cli import ROOT

pytestmark = pytest.mark.slow


def said(client: str) -> list[tuple[str, str]]:
    """(prompt, the stand-in's reply) of sessions 1 and 2: sentences no other test says."""
    return [
        (
            f"For the {client} run we decided that the pallet ledger stays in Postgres 16, not MySQL.",
            "Noted: the pallet ledger stays in Postgres 16.",
        ),
        ("Where does the pallet ledger live?", "It lives in Postgres 16, as decided."),
    ]


def made_up_secrets() -> list[str]:
    """A GitHub token and an Anthropic key in their real shapes, random for this run."""
    alnum = string.ascii_letters + string.digits
    ghp = "ghp_" + "".join(secrets.choice(alnum) for _ in range(36))
    ant = "sk-ant-api03-" + "".join(secrets.choice(alnum + "-_") for _ in range(93)) + "AA"
    return [ghp, ant]


@dataclass
class Run:
    """One client's four sessions (module docstring) and what they left."""

    rig: Rig
    said: list[tuple[str, str]]
    secrets: list[str]
    marks: list[int]  # the stand-in's request count before each session, and after the last

    def requests(self, session: int) -> list[Request]:
        """The requests of session ``session`` (1-based), in order."""
        return self.rig.stand_in.requests[self.marks[session - 1] : self.marks[session]]

    def model_turn(self, session: int) -> Request:
        """The session's (last) model request that carries the conversation."""
        turns = [r for r in self.requests(session) if is_conversation(self.rig.stand_in.api, r)]
        assert turns, f"session {session} made no model request: {[r.path for r in self.requests(session)]}"
        return turns[-1]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / "cache"  # the embedding model's, as tests/conftest.py keeps it


@pytest.fixture(scope="module", params=CLIENTS)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, cache: Path) -> Iterator[Run]:
    client: str = request.param
    cli_path(client)
    keys = made_up_secrets()
    sessions = [
        *said(client),
        (f"The nightly deploy token is {keys[0]} and the Claude key is {keys[1]}.", "Understood, for the nightly job."),
        ("Which token does the nightly deploy use?", "The one you gave for the nightly job."),
    ]
    with rig(client, tmp_path_factory.mktemp(f"agent-{client}"), cache) as r:
        r.install()
        marks = []
        for n, (prompt, reply) in enumerate(sessions, 1):
            marks.append(len(r.stand_in.requests))
            r.session(prompt, reply)
            wait_for_turns(r.db, 2 * n)  # the ingest hooks may finish after the client exits
            wait_for_hooks(r, n)  # and every hook of the session done and counted before the next starts
        marks.append(len(r.stand_in.requests))
        yield Run(r, sessions, keys, marks)


def test_each_sentence_is_stored_once_and_nothing_injected(run: Run) -> None:
    turns = exported(run.rig)
    expected = [
        (speaker, text) for prompt, reply in run.said for speaker, text in (("user", prompt), ("assistant", reply))
    ]
    assert len(turns) == len(expected) == len(set(turns)), turns  # no duplicates
    pasted = 4
    assert turns[:pasted] + turns[pasted + 1 :] == expected[:pasted] + expected[pasted + 1 :]
    speaker, text = turns[pasted]  # the pasted secrets: the sentence stored, the values not
    assert speaker == "user" and text.startswith("The nightly deploy token is ") and text.endswith(".")
    assert not any(key in text for key in run.secrets)
    for _speaker, text in turns:
        for injected in ("localmem-context", "Recalled memory:", "localmem: ", "hook_context", "system-reminder"):
            assert injected not in text, text


def test_the_next_sessions_model_request_carries_the_decision(run: Run) -> None:
    decision = run.said[0][0]
    assert not [b for b in blocks(run.model_turn(1).body) if decision in b]  # not before it was said
    recalled = blocks(run.model_turn(2).body)
    assert any(decision in b for b in recalled), recalled


def test_a_pasted_secret_is_in_no_store_file_and_no_later_request(run: Run) -> None:
    assert any(run.secrets[0].encode() in r.body for r in run.requests(3))  # the client did send what was typed
    store_files = [p for p in run.rig.db.parent.iterdir() if p.is_file()]
    assert {run.rig.db.name, run.rig.db.name + "-hooks.json"} <= {p.name for p in store_files}
    for path in store_files:  # the database, its -wal and -shm, the hook status: raw bytes
        raw = path.read_bytes()
        for key in run.secrets:
            assert key.encode() not in raw, f"a pasted secret is in {path.name}"
    later = run.requests(4)
    for req in later:
        for key in run.secrets:
            assert key.encode() not in req.body, f"a pasted secret was sent again: {req.path}"
    # not vacuous: session 4 was given session 3 back, the secrets taken out
    assert any("nightly deploy token" in b for b in blocks(run.model_turn(4).body))


def test_every_hook_ran_and_none_failed(run: Run) -> None:
    got = wait_for_hooks(run.rig, len(run.said))
    assert got["failures"] == {} and got["last_error"] is None, got
    replied = {e: got["events"][e].get("replied", 0) for e in ("session-start", "prompt")}
    assert replied["session-start"] >= len(run.said) - 1, got  # every session after the first got its project back


@pytest.mark.parametrize("client", CLIENTS)
def test_a_failing_store_leaves_the_answer_unchanged(client: str, tmp_path: Path, cache: Path) -> None:
    prompt, reply = said(client)[0]
    with rig(client, tmp_path / "plain", cache) as plain:  # no localmem at all
        without = plain.session(prompt, reply)
    with rig(client, tmp_path / "broken", cache) as broken:
        broken.install()
        broken.db.mkdir()  # the store's path is a folder: every hook fails to open it
        got = broken.session(prompt, reply)
        assert got.stdout == without.stdout and reply in got.stdout
        for req in broken.stand_in.requests:  # nothing of the failure (its message names the store) reached the model
            assert str(broken.db).encode() not in req.body and b"localmem-context" not in req.body, req.path
        wait_for_hooks(broken, 1, outcome="failed")
        shown = broken.localmem("hooks", "status", "--json")
        assert shown.returncode == 0, shown.stderr
        counted = json.loads(shown.stdout)["status"]
        assert sum(counted["failures"].values()) >= len(SESSION_EVENTS[client]), counted
        assert str(broken.db) in counted["last_error"]["message"], counted["last_error"]  # named, with the store's path


def test_ci_installs_the_pinned_versions_and_the_docs_name_them() -> None:
    ci = (ROOT / ".ci" / "run").read_text("utf-8")
    assert "export LOCALMEM_REQUIRE_AGENTS=1" in ci
    section = (ROOT / "docs" / "capture.md").read_text("utf-8").partition("## Tested with the real clients")[2]
    for package, version, _command, _api in PINS.values():
        assert f"{package}@{version}" in ci
        assert f"`{package}` {version}" in section.partition("\n## ")[0]
