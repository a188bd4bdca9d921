"""A prompt hook does not repeat what its session was given already (by its session start
or an earlier prompt), through the real hook processes; a new session start in the same
session (after a compaction, the agent's context lost what it held) begins again."""

from __future__ import annotations

from pathlib import Path

import pytest

from localmem.config import Settings
from localmem.memory import open_store
from localmem.storage.layers import recalls
from tests.helpers.context_store import POSTGRES, SHOP, make_store
from tests.helpers.hooks import context_of, hook


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return make_store(tmp_path)


def test_a_prompt_does_not_repeat_what_its_session_was_given(store: Path) -> None:
    ask = {"session_id": "next", "cwd": SHOP, "prompt": "which database does the shop use?"}
    other = context_of(hook(store, "prompt", {**ask, "session_id": "other"}), "UserPromptSubmit")
    assert POSTGRES in other  # what the prompt gets in a session given nothing yet
    assert POSTGRES in context_of(hook(store, "session-start", {"session_id": "next", "cwd": SHOP}), "SessionStart")
    again = hook(store, "prompt", ask)
    assert again.returncode == 0 and POSTGRES.encode() not in again.stdout
    # the other session's own prompt gave it once: not twice
    twice = hook(store, "prompt", {**ask, "session_id": "other"})
    assert twice.returncode == 0 and POSTGRES.encode() not in twice.stdout


def test_a_new_session_start_begins_again(store: Path) -> None:
    ask = {"session_id": "s", "cwd": SHOP, "prompt": "which database does the shop use?"}
    assert POSTGRES in context_of(hook(store, "prompt", ask), "UserPromptSubmit")
    with open_store(Settings(db=store)) as st:
        given = recalls.handed_in_session(st.conn, "hook:claude-code", "s", "session-start")
        assert given and recalls.handed_in_session(st.conn, "hook:codex", "s", "session-start") == frozenset()
        # a session start (a compaction) that handed nothing: what came before it counts no more
        rec = recalls.RecallWrite("hook:claude-code", "session-start", "q", 100, 0, (), session="s")
        recalls.log(st.conn, rec, 100, best_effort=False)
        assert recalls.handed_in_session(st.conn, "hook:claude-code", "s", "session-start") == frozenset()
    assert POSTGRES in context_of(hook(store, "prompt", ask), "UserPromptSubmit")
