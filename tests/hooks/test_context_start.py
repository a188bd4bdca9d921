"""What a session start injects, through the real hook process on a store made by the real
CLI: a new project gets nothing it cannot justify (no personal chat, no other project's
talk, no stub of stripped context), only the person's own statement from their work
elsewhere that bears on what the folder says about itself; a project with memory gets its
own, its sessions named by their titles. (A prompt's part: test_context_given.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.context_store import CHAT, PNPM, POSTGRES, SHOP, make_store
from tests.helpers.hooks import context_of, hook


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return make_store(tmp_path)


def _start(db: Path, cwd: Path | str, session: str = "new") -> bytes:
    run = hook(db, "session-start", {"session_id": session, "cwd": str(cwd), "source": "startup"})
    assert run.returncode == 0 and run.stderr == b"", run.stderr
    return run.stdout


def test_a_new_project_gets_only_what_it_can_justify(store: Path, tmp_path: Path) -> None:
    empty = tmp_path / "scratch"
    empty.mkdir()
    assert _start(store, empty) == b""  # a folder that says nothing but its name: nothing at all
    web = tmp_path / "invoice-ui"
    web.mkdir()
    (web / "package.json").write_text(json.dumps({"name": "invoice-ui", "description": "A React dashboard"}))
    (web / "README.md").write_text("# Invoice UI\n\nA web dashboard for our invoices, built with Vite.\n")
    text = context_of(hook(store, "session-start", {"session_id": "new", "cwd": str(web)}), "SessionStart")
    assert PNPM in text and "elsewhere that may bear on this project" in text
    for unrelated in (*(t for _, t in CHAT), POSTGRES, "Noted, the shop"):
        assert unrelated not in text
    assert "left off" not in text and "decided and still open" not in text


def test_a_project_with_memory_gets_its_own_under_its_sessions_titles(store: Path) -> None:
    text = context_of(hook(store, "session-start", {"session_id": "next", "cwd": SHOP}), "SessionStart")
    assert POSTGRES in text and "left off" in text
    assert '(session "Set up the shop\'s storage")' in text and "0b5e-uuid" not in text
    assert not any(t in text for _, t in CHAT)
