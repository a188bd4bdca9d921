"""Coding agents' logs (Claude Code, Codex CLI, Gemini CLI): detection, what is kept and
left out, the session's client and project, and identity under re-ingest and growth, on
fixtures written from the formats (tests/ingest/fixtures)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from localmem.config import IngestParams, Settings
from localmem.errors import ConfigError
from localmem.ingest import detect, load, runner
from localmem.ingest._agent import tool_line
from localmem.records import Project, SessionIn
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

FIX = Path(__file__).resolve().parent / "fixtures"
CC_SID = "5f0c2f5e-1d1b-4c8e-9a51-0d6a2f3b7c10"
CLAUDE = FIX / "claude-code" / "-home-dev-shop" / f"{CC_SID}.jsonl"
SUBAGENT = CLAUDE.parent / CC_SID / "subagents" / "agent-a4f9c21.jsonl"
CODEX = FIX / "codex" / "rollout-2025-10-14T16-00-00-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl"
CODEX_OLD = FIX / "codex" / "rollout-2025-05-07T17-24-21-6f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b.jsonl"
GEMINI = FIX / "gemini" / "chats" / "session-2025-09-01T08-00-b2c3d4e5.json"
GEMINI_L = FIX / "gemini" / "chats" / "session-2025-11-20T10-00-c3d4e5f6.jsonl"
ALL = {CLAUDE: "claude-code", SUBAGENT: "claude-code", CODEX: "codex", CODEX_OLD: "codex", GEMINI: "gemini"}
ALL[GEMINI_L] = "gemini"

# (role, speaker, text) of every turn, in order: every sentence a person or an agent said, once.
EXPECTED: dict[Path, list[tuple[str, str, str]]] = {
    CLAUDE: [
        (
            "user",
            "user",
            "The cart total is wrong when a coupon and a gift card are both applied. Can you find out why?",
        ),
        (
            "assistant",
            "assistant",
            "I'll look at how discounts are applied first.\nsearched: apply_discount\nread: /home/dev/shop/src/cart.py",
        ),
        (
            "assistant",
            "assistant",
            "The gift card is subtracted before the coupon percentage, so the coupon applies to a smaller amount.\n"
            "edited: /home/dev/shop/src/cart.py\nran: pytest -q tests/test_cart.py",
        ),
        ("assistant", "assistant", "Fixed: the coupon now applies before the gift card, and the cart tests pass."),
        ("user", "user", "Great. Please also add a test for two coupons."),
        ("user", "user", "And make the error message friendlier."),
        (
            "assistant",
            "assistant",
            "Added test_two_coupons and reworded the error to say which coupon was rejected.\n"
            "delegated: Review coupon edge cases",
        ),
        ("user", "user", "/review the coupon change before I merge"),
        ("user", "user", "[image]\n\nHere is the checkout page after the fix."),
        (
            "assistant",
            "assistant",
            "The page shows the coupon line above the gift card line now, which matches the new order.",
        ),
    ],
    SUBAGENT: [
        ("user", "agent", "Review coupon edge cases in src/cart.py: stacking, expiry and rounding."),
        ("assistant", "subagent", "Checking how expired coupons are rejected.\nsearched: tests/**/test_coupon*.py"),
        ("assistant", "subagent", "Rounding happens once per line item, so two coupons can lose a cent."),
    ],
    CODEX: [
        ("user", "user", "Why does the /health endpoint return 500 after the last deploy?"),
        (
            "assistant",
            "assistant",
            "I'll check the health handler and its database probe.\nran: rg -n 'def health' app",
        ),
        (
            "assistant",
            "assistant",
            "The probe still queries the users table, which the migration renamed to accounts.\n"
            "edited: app/health.py\nran: pytest -q tests/test_health.py",
        ),
        ("assistant", "assistant", "Fixed: the probe now queries accounts, and the health tests pass."),
        ("user", "user", "Also log the probe's latency.\n\n[image]"),
        ("assistant", "assistant", "searched: structlog timing processor"),
        ("assistant", "assistant", "Added a latency_ms field to the health log line."),
    ],
    CODEX_OLD: [
        ("user", "user", "Rename the config loader to settings.py."),
        ("assistant", "assistant", "Renaming it and updating the imports.\nran: git mv config.py settings.py"),
        ("assistant", "assistant", "Done: config.py is now settings.py."),
        ("user", "user", "Thanks."),
        ("user", "user", "Thanks."),
    ],
    GEMINI: [
        ("user", "user", "Summarize @notes/todo.md"),
        (
            "assistant",
            "assistant",
            "Your todo list has three open items: the export bug, the dark theme and the sync retry.",
        ),
        ("assistant", "assistant", "read: /home/dev/notes-app/notes/todo.md"),
        ("user", "user", "Start with the sync retry: it should back off exponentially."),
        ("assistant", "assistant", "I changed retry() to wait 1, 2, 4 and 8 seconds between attempts."),
        ("assistant", "assistant", "edited: /home/dev/notes-app/src/sync.ts"),
        ("assistant", "assistant", "ran: npm test -- sync"),
    ],
    GEMINI_L: [
        ("user", "user", "Which notes mention the Berlin trip?"),
        ("assistant", "assistant", "Two notes mention it: packing.md and budget.md."),
        ("assistant", "assistant", "searched: Berlin"),
        ("user", "user", "Delete budget.md"),
        ("assistant", "assistant", "Deleting budget.md would lose the hotel costs; I left it in place."),
        ("user", "user", "Then just archive budget.md."),
    ],
}
PROJECTS = {
    CLAUDE: Project(cwd="/home/dev/shop", branch="feature/cart"),
    SUBAGENT: Project(cwd="/home/dev/shop", branch="feature/cart"),
    CODEX: Project(
        cwd="/home/dev/api",
        branch="main",
        repository="git@github.com:example/api.git",
        commit="3c9e1f0a7b2d4e6f8a1b3c5d7e9f1a2b3c4d5e6f",
    ),
    CODEX_OLD: None,
    GEMINI: Project(cwd="/home/dev/notes-app"),
    GEMINI_L: Project(cwd="/home/dev/notes-app"),
}
TOOL_PREFIXES = ("ran: ", "edited: ", "read: ", "searched: ", "fetched: ", "delegated: ", "used: ")


def one_session(path: Path, **options: str) -> SessionIn:
    sessions = load(path, **options)
    assert len(sessions) == 1, [s.key for s in sessions]
    return sessions[0]


@pytest.mark.parametrize("path", list(ALL), ids=lambda p: p.name[:24])
def test_detected_by_content(path: Path, tmp_path: Path) -> None:
    assert detect(path) == ALL[path]
    renamed = tmp_path / "export.json"  # the name plays no part
    renamed.write_bytes(path.read_bytes())
    assert detect(renamed) == ALL[path]


@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.name[:24])
def test_every_sentence_once_nothing_else(path: Path) -> None:
    s = one_session(path)
    assert [(t.role, t.speaker, t.text) for t in s.turns] == EXPECTED[path]
    assert all("DROPPED" not in t.text for t in s.turns)  # thinking, meta, injected, tool output
    assert s.client == s.source == {"claude-code": "claude-code", "codex": "codex", "gemini": "gemini-cli"}[ALL[path]]
    assert s.project == PROJECTS[path]
    assert all(t.source_id for t in s.turns)


def test_session_keys_and_times() -> None:
    assert one_session(CLAUDE).key == CC_SID
    assert one_session(SUBAGENT).key == f"{CC_SID}/a4f9c21"  # a subagent is a session of its own
    codex = one_session(CODEX)
    assert codex.key == "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b" and codex.started_at == "2025-10-14T16:00:00"
    assert codex.turns[0].timestamp == "2025-10-14T16:00:18"  # UTC, to the second
    old = one_session(CODEX_OLD)
    assert old.started_at == "2025-05-07T17:24:21" and old.turns[0].timestamp is None
    # The two identical "Thanks." lines stay two turns: their native ids are their line numbers.
    assert [t.source_id for t in old.turns][-2:] == ["12", "13"]


@pytest.mark.parametrize("path", [CLAUDE, CODEX, GEMINI, GEMINI_L], ids=lambda p: p.name[:24])
def test_tool_lines_none(path: Path) -> None:
    s = one_session(path, tool_lines="none")
    lines = [line for t in s.turns for line in t.text.splitlines()]
    assert not [line for line in lines if line.startswith(TOOL_PREFIXES)]
    kept = [t for t in EXPECTED[path] if not t[2].startswith(TOOL_PREFIXES)]
    assert [t.text for t in s.turns] == [
        "\n".join(x for x in text.splitlines() if not x.startswith(TOOL_PREFIXES)) for _, _, text in kept
    ]


def test_tool_line_shapes() -> None:
    assert tool_line("Bash", {"command": "pytest -q\n  --lf"}) == "ran: pytest -q --lf"
    assert tool_line("shell", json.dumps({"command": ["bash", "-lc", "make test"]})) == "ran: make test"
    assert tool_line("shell", {"command": ["git", "commit", "-m", "two words"]}) == "ran: git commit -m 'two words'"
    patch = "*** Begin Patch\n*** Update File: a.py\n*** Add File: b.py\n*** End Patch"
    assert tool_line("apply_patch", patch) == "edited: a.py, b.py"
    assert tool_line("Write", {"file_path": "src/x.py", "content": "secret body"}) == "edited: src/x.py"
    assert tool_line("read_many_files", {"paths": ["a.md", "b.md"]}) == "read: a.md, b.md"
    assert tool_line("WebFetch", {"url": "https://example.org", "prompt": "p"}) == "fetched: https://example.org"
    assert tool_line("TodoWrite", {"todos": []}) is None
    assert tool_line("mcp__localmem__reconstruct", {"query": "q"}) == "used: mcp__localmem__reconstruct"
    assert len(tool_line("Bash", {"command": "x" * 1000}) or "") < 180


def test_tool_lines_setting_is_checked() -> None:
    assert Settings().ingest.tool_lines == "compact"
    with pytest.raises(ConfigError, match=r"ingest\.tool_lines must be compact or none"):
        IngestParams(tool_lines="full")


def stored(store: Store) -> list[tuple[str, str, str]]:
    rows = store.conn.execute(
        "SELECT s.source, s.key, t.text FROM turns t JOIN sessions s ON s.id = t.session_id ORDER BY t.id"
    ).fetchall()
    return [(str(a), str(b), str(c)) for a, b, c in rows]


def new_store(tmp_path: Path, name: str, **ingest: object) -> Store:
    db = tmp_path / f"{name}.db"
    return Store(db, embedder=HashEmbedder(), settings=Settings(db=db, ingest=IngestParams(**ingest)))  # type: ignore[arg-type]


@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.name[:24])
def test_reingest_writes_nothing(path: Path, tmp_path: Path) -> None:
    copy = tmp_path / "log" / path.name
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    with new_store(tmp_path, "m") as store:
        first = runner.ingest_file(store, copy)
        assert first.new == len(EXPECTED[path]) and first.format == ALL[path]
        again = runner.ingest_file(store, copy)
        assert again.new == 0
        renamed = copy.rename(copy.with_name("renamed.jsonl"))  # a moved transcript is the same content
        assert runner.ingest_file(store, renamed).new == 0
        assert [t for _, _, t in stored(store)] == [text for _, _, text in EXPECTED[path]]


def lines_of(texts: list[str]) -> Counter[str]:
    return Counter(line for text in texts for line in text.splitlines())


@pytest.mark.parametrize("path", [CLAUDE, CODEX, GEMINI_L], ids=lambda p: p.name[:24])
def test_growing_transcript_every_line_once(path: Path, tmp_path: Path) -> None:
    """Cut the log at every line (and inside a line, as a writer mid-line leaves it),
    ingest, let it grow to the whole, ingest again: every line a person or the agent said
    is stored exactly once, and what the first read stored is never stored again."""
    data = path.read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    whole = lines_of([text for _, _, text in EXPECTED[path]])
    cuts = [*ends[:-1], ends[len(ends) // 2] - 17, ends[3] + 5]
    for n, cut in enumerate(cuts):
        log = tmp_path / f"cut{n}" / path.name
        log.parent.mkdir()
        log.write_bytes(data[:cut])
        with new_store(tmp_path, f"cut{n}") as store:
            early = runner.ingest_file(store, log) if _has_turns(log) else None
            with log.open("ab") as fh:
                fh.write(data[cut:])
            runner.ingest_file(store, log)
            texts = [t for _, _, t in stored(store)]
            assert lines_of(texts) == whole, f"cut at byte {cut}"
            assert early is None or early.new <= len(texts)
            assert runner.ingest_file(store, log).new == 0


def _has_turns(path: Path) -> bool:
    try:
        return any(s.turns for s in load(path))
    except Exception:  # a prefix that is only a header line: nothing to ingest yet
        return False


def test_subagent_and_main_session_apart(tmp_path: Path) -> None:
    with new_store(tmp_path, "m") as store:
        runner.ingest_file(store, CLAUDE)
        runner.ingest_file(store, SUBAGENT)
        keys = Counter(k for _, k, _ in stored(store))
    assert keys == {CC_SID: len(EXPECTED[CLAUDE]), f"{CC_SID}/a4f9c21": len(EXPECTED[SUBAGENT])}


def test_tool_lines_from_the_store_settings(tmp_path: Path) -> None:
    with new_store(tmp_path, "none", tool_lines="none") as store:
        report = runner.ingest_file(store, CODEX)
        texts = [t for _, _, t in stored(store)]
    assert report.skipped["tool call"] >= 4
    assert not [x for x in lines_of(texts) if x.startswith(TOOL_PREFIXES)]


def test_a_log_that_is_not_an_agent_log_is_unchanged(tmp_path: Path) -> None:
    """An OpenAI-style messages file with a `sessionId` is still `messages`; a Claude.ai
    export still `claude`: only the agents' own shapes are claimed."""
    msgs = tmp_path / "m.json"
    msgs.write_text(json.dumps({"sessionId": "x", "messages": [{"role": "user", "content": "hi"}]}))
    assert detect(msgs) == "messages"
    lines = tmp_path / "l.jsonl"
    lines.write_text(json.dumps({"type": "user", "text": "hi", "session": "s"}) + "\n")
    assert detect(lines) == "jsonl"


def test_a_turn_that_is_all_private_is_left_out(tmp_path: Path) -> None:
    log = tmp_path / "notes.jsonl"
    rows = [
        {"session": "s", "speaker": "me", "text": "<private>my PIN is 4821</private>"},
        {"session": "s", "speaker": "me", "text": "Lunch at noon <private>with Dana</private> on Friday."},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with new_store(tmp_path, "m") as store:
        report = runner.ingest_file(store, log)
        texts = [t for _, _, t in stored(store)]
    assert report.skipped["private message"] == 1 and report.new == 1
    assert texts == ["Lunch at noon on Friday."]
