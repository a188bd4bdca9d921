"""VS Code chat sessions: detection, what is kept and left out, the workspace as project,
and every turn stored once while a session is saved again and again.

The fixtures (tests/ingest/fixtures/vscode) are written field by field from VS Code's
source, microsoft/vscode:
- ``src/vs/workbench/contrib/chat/common/model/chatModel.ts`` at 8c0354598aa91fc764e1b00707fcc376250e1cc6
  (``ISerializableChatData1..3``, ``ISerializableChatRequestData``, ``ISerializableChatResponseData``,
  ``SerializedChatResponsePart``);
- ``src/vs/workbench/contrib/chat/common/model/chatSessionOperationLog.ts`` at
  03d43368c3ce601d54d8eceb01b11cf9758b9e4a (the log's ``storageSchema``: which fields a request
  and response carry, and how they change) and ``objectMutationLog.ts`` at
  047238f9fe1b7661362b3f27cfbddd503339cb1b (entries ``kind`` 0 initial, 1 set, 2 push with an
  optional cut ``i``, 3 delete; a markdown part that grows is written as a push cut at its index);
- ``src/vs/workbench/contrib/chat/common/model/chatSessionStore.ts`` at
  047238f9fe1b7661362b3f27cfbddd503339cb1b (``workspaceStorage/<id>/chatSessions/<id>.json`` or
  ``.jsonl``, ``globalStorage/emptyWindowChatSessions``);
- microsoft/vscode-copilot-chat ``src/extension/tools/common/toolNames.ts`` at
  00a45c7cd39b2a6b28dfd1e20b1e0a20f1814783 (Copilot's tool ids) and its tools' inputs
  (``filePath``);
- ``chatService.ts`` (``ResponseModelState``: 0 pending, 1 complete, 2 cancelled, 3 failed, 4
  needs input; ``IChatToolInvocationSerialized``, ``IChatTerminalToolInvocationData``
  ``commandLine.original``, ``IChatToolInputInvocationData`` ``rawInput``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from localmem.bench import agent_logs
from localmem.config import IngestParams, Settings
from localmem.errors import InputError
from localmem.ingest import _vscode, detect, load, runner, units
from localmem.records import Project
from localmem.storage.bench import reads
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

USER = Path(__file__).resolve().parent / "fixtures" / "vscode" / "User"
WS = USER / "workspaceStorage" / "8b1a9953c4611296a827abf8c47804d7" / "chatSessions"
FLAT = WS / "2f7d5c1b-6a3e-4b8f-9d0c-1e2f3a4b5c6d.json"
LOG = WS / "7e3a1c9d-2b4f-4e6a-8c1d-3f5a7b9c1d2e.jsonl"
OLD = USER / "globalStorage" / "emptyWindowChatSessions" / "0c9b8a7d-6e5f-4a3b-2c1d-0e9f8a7b6c5d.json"

EXPECTED = {
    FLAT: [
        ("user", "Why does applying two coupons fail at checkout?"),
        (
            "assistant",
            "read: /home/dev/shop/src/coupons.py\n"
            "The check in coupons.py rejects a second coupon before it looks at its kind.\n"
            "ran: pytest -q tests/test_coupons.py\nedited: /home/dev/shop/src/coupons.py\n"
            "Fixed: a second coupon is now accepted when it is of another kind.",
        ),
        ("user", "Please add a test for #file:test_coupons.py with two coupons of one kind."),
        (
            "assistant",
            "searched: def apply_coupon\nAdded `test_two_coupons_of_one_kind`; it expects the second coupon to be "
            "refused with a message.\nedited: /home/dev/shop/tests/test_coupons.py",
        ),
        ("user", "And the coupon codes, are they case sensitive?"),  # its response failed: left out
    ],
    LOG: [
        ("user", "How do I run only the slow tests?"),
        (
            "assistant",
            "Mark them with `@pytest.mark.slow` and run `pytest -m slow`.\nran: pytest -m slow -q\nThe two slow tests pass.",
        ),
        ("user", "Can you make them skip on CI?"),
        ("assistant", "I'll skip them when `CI` is set in `conftest.py`.\nedited: /home/dev/shop/tests/conftest.py"),
    ],
    OLD: [
        ("user", "Give me a regex for ISO dates"),
        ("assistant", "Use `^\\d{4}-\\d{2}-\\d{2}$` for dates like 2025-01-01."),
    ],
}


def turns(path: Path, **options: str) -> list[tuple[str, str]]:
    return [(t.role, t.text) for s in load(path, "vscode", **options) for t in s.turns]


def new_store(tmp_path: Path, name: str = "m.db") -> Store:
    db = tmp_path / name
    return Store(db, embedder=HashEmbedder(), settings=Settings(db=db))


@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.suffix + p.parent.name[:8])
def test_every_sentence_once_nothing_else(path: Path) -> None:
    assert detect(path) == "vscode"
    assert turns(path) == EXPECTED[path]
    text = "\n".join(t for _, t in turns(path))
    for left_out in ("look at src/coupons.py first", "CI sets the CI variable", "Searching the workspace", "to-do"):
        assert left_out not in text  # thinking, progress, the agent's to-do list
    assert "Sorry, your request failed" not in text


def test_sessions_project_title_and_times() -> None:
    (flat,) = load(FLAT)
    assert (flat.key, flat.source, flat.client, flat.title) == (
        FLAT.stem,
        "vscode",
        "vscode",
        "Two coupons at checkout",
    )
    repo = {"repository": "https://github.com/dev/shop.git", "branch": "fix-coupons"}
    commit = "4b2e9d1c7a3f5e8b0d6c2a4f1e9b7d5c3a1f0e2d"
    assert flat.project == Project(cwd="/home/dev/shop", commit=commit, **repo)
    assert flat.started_at == "2026-01-06T11:46:40"
    assert [t.source_id for t in flat.turns][:2] == [
        "request_2a6f0c1e-7d1b-4c8e-9a51-0d6a2f3b7c11",
        "response_9c41d7aa-0b4e-4f43-a1f2-3e5d7c9b1a20",
    ]
    assert flat.turns[1].timestamp == flat.turns[0].timestamp == "2026-01-06T11:46:50"
    (log,) = load(LOG)
    assert log.title == "Slow tests" and log.project == Project(cwd="/home/dev/shop")
    (old,) = load(OLD)
    assert old.project is None and old.title == "Regex for dates"  # an empty window: no folder
    skipped = sum((u.skipped for u in units(FLAT, "vscode")), start=__import__("collections").Counter())
    assert skipped == {"thinking": 1, "failed response": 1}


def test_tool_lines_none() -> None:
    got = turns(FLAT, tool_lines="none")
    assert got[1] == (
        "assistant",
        "The check in coupons.py rejects a second coupon before it looks at its kind.\n"
        "Fixed: a second coupon is now accepted when it is of another kind.",
    )
    assert not any(t.startswith(("ran:", "edited:", "searched:")) for _, text in got for t in text.splitlines())


@pytest.mark.parametrize(
    ("tool_id", "data", "shown", "line"),
    [
        ("copilot_findTextInFiles", {"kind": "input", "rawInput": '{"query": "apply_coupon"}'}, "", "searched: apply_coupon"),
        ("copilot_findFiles", None, "Searched for files matching `**/test_*.py`, 3 matches", "searched: **/test_*.py"),
        ("copilot_createFile", {"kind": "input", "rawInput": {"filePath": "/w/a.py", "content": "x"}}, "", "edited: /w/a.py"),
        ("copilot_fetchWebPage", {"kind": "input", "rawInput": {"urls": ["https://example.org/doc"]}}, "", "fetched: https://example.org/doc"),
        ("runSubagent", {"kind": "input", "rawInput": {"description": "Review the coupons"}}, "", "delegated: Review the coupons"),
        ("copilot_getErrors", None, "Checked [](file:///w/a.py), no problems found", "used: copilot_getErrors"),
        ("run_in_terminal", {"kind": "terminal", "command": "make test", "language": "sh"}, "", "ran: make test"),
        ("copilot_memory", {"kind": "input", "rawInput": {"command": "view"}}, "", None),
    ],
)  # fmt: skip
def test_tool_lines_of_copilots_tools(tool_id: str, data: object, shown: str, line: str | None) -> None:
    part = {"kind": "toolInvocationSerialized", "toolId": tool_id, "pastTenseMessage": {"value": shown}}
    assert _vscode.tool({**part, "toolSpecificData": data} if data else part) == line


def test_not_a_session_is_not_vscode(tmp_path: Path) -> None:
    other = tmp_path / "x.json"
    other.write_text(json.dumps({"sessionId": "s", "messages": []}), "utf-8")
    assert detect(other) == "messages"
    bad = tmp_path / "log.jsonl"
    bad.write_text(LOG.read_text("utf-8").splitlines()[0] + '\n{"kind": 1, "k": ["requests", 7, "x"], "v": 1}\n')
    with pytest.raises(InputError, match=r"line 2.*requests', 7"):
        load(bad)


def stored(store: Store) -> list[str]:
    return [t.text for t in reads.turn_texts(store.conn)]


def test_a_log_read_after_every_line_stores_each_turn_once_and_only_finished(tmp_path: Path) -> None:
    """The log as VS Code appends it, read (with hold, as watch does) after every entry."""
    lines = LOG.read_text("utf-8").splitlines(keepends=True)
    log = tmp_path / "User" / "workspaceStorage" / "h" / "chatSessions" / LOG.name
    log.parent.mkdir(parents=True)
    expected = [t for _, t in EXPECTED[LOG]]
    with new_store(tmp_path) as store:
        for n, line in enumerate(lines):
            with log.open("a", encoding="utf-8") as fh:
                fh.write(line[: len(line) // 2])  # half an entry: nothing of it is read
            runner.ingest_file(store, log, "vscode", hold=True)
            with log.open("a", encoding="utf-8") as fh:
                fh.write(line[len(line) // 2 :])
            runner.ingest_file(store, log, "vscode", hold=True)
            if n == 3:  # the first response is streaming: only the question is stored
                assert stored(store) == expected[:1]
        assert stored(store) == expected
        assert runner.ingest_file(store, log, "vscode").new == 0
        # VS Code compacts a long log: the file is replaced by one first entry of the whole state
        state = load(log)  # (parsed back to check the count only)
        assert len(state[0].turns) == 4
        whole = json.loads(lines[0])
        whole["v"]["requests"] = [json.loads(x)["v"][0] for x in lines if '"k": ["requests"]' in x]
        log.write_text(json.dumps(whole) + "\n", "utf-8")
        again = runner.ingest_file(store, log, "vscode")
        assert again.new == 0 and stored(store) == expected


def test_a_json_saved_again_and_again_stores_each_turn_once(tmp_path: Path) -> None:
    """A ``.json`` session rewritten whole, its last response first written mid-stream (as VS
    Code's toJSON writes one: cancelled, no result)."""
    full = json.loads(FLAT.read_text("utf-8"))
    path = tmp_path / "User" / "workspaceStorage" / "h" / "chatSessions" / FLAT.name
    path.parent.mkdir(parents=True)
    streaming = json.loads(json.dumps(full))
    streaming["requests"] = streaming["requests"][:2]
    last = streaming["requests"][1]
    last["response"] = last["response"][:2]
    last.pop("result")
    last["modelState"] = {"value": 2, "completedAt": 1767700063000}
    expected = [t for _, t in EXPECTED[FLAT]]
    with new_store(tmp_path) as store:
        path.write_text(json.dumps(streaming, indent=2), "utf-8")
        first = runner.ingest_file(store, path, "vscode", hold=True)
        assert first.new == 3 and stored(store) == expected[:3]  # the streaming response is held back
        assert runner.ingest_file(store, path, "vscode", hold=True).new == 0  # unchanged: read again, nothing new
        path.write_text(json.dumps(full, indent=2), "utf-8")
        second = runner.ingest_file(store, path, "vscode", hold=True)
        assert second.new == 2 and second.already_present == 3
        assert runner.ingest_file(store, path, "vscode").new == 0
        assert stored(store) == expected


def test_an_empty_session_is_no_error(tmp_path: Path) -> None:
    path = tmp_path / "e.json"
    path.write_text(json.dumps({"version": 3, "sessionId": "e", "creationDate": 1, "requests": []}), "utf-8")
    with new_store(tmp_path) as store:
        got = runner.ingest_file(store, path)
    assert got.format == "vscode" and got.turns == 0 and got.skipped == {"empty session": 1}


def test_tool_lines_from_the_store_settings(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    settings = Settings(db=db, ingest=IngestParams(tool_lines="none"))
    with Store(db, embedder=HashEmbedder(), settings=settings) as store:
        runner.ingest_file(store, LOG)
        texts = stored(store)
    assert "ran: pytest -m slow -q" not in "\n".join(texts) and len(texts) == 4


def test_windows_workspace_folder(tmp_path: Path) -> None:
    folder = tmp_path / "h"
    (folder / "chatSessions").mkdir(parents=True)
    (folder / "workspace.json").write_text(json.dumps({"folder": "file:///c%3A/Users/dev/shop"}), "utf-8")
    path = folder / "chatSessions" / "s.json"
    path.write_bytes(OLD.read_bytes())
    os.utime(path)
    (s,) = load(path)
    assert s.project == Project(cwd="c:/Users/dev/shop")
    (folder / "workspace.json").write_text(json.dumps({"workspace": "file:///home/dev/all.code-workspace"}))
    assert load(path)[0].project is None  # a multi-root workspace: no one folder


def test_the_bench_log_reads_as_the_bench_expects(tmp_path: Path) -> None:
    """``localmem bench watch --client vscode`` compares the store with ``vscode_expected_turns``."""
    log = tmp_path / "s.jsonl"
    log.write_text("\n".join(agent_logs.vscode_log("s", 4)) + "\n", "utf-8")
    assert detect(log) == "vscode"
    assert [t.text for s in load(log) for t in s.turns] == agent_logs.vscode_expected_turns(4)
