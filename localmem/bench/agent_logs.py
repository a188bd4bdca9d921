"""Synthetic coding-agent transcripts for the capture benches and tests: Claude Code
JSON Lines written as the agent writes them, one record a line (the shape
``localmem.ingest.claude_code`` documents, field by field), and a VS Code chat session's
mutation log written entry by entry (``localmem.ingest.vscode``: ``vscode_log``).

Each exchange ``i`` is five records: the person's prompt, the agent's text and its tool
call (two lines of one reply, sharing ``message.id``), the tool's result, and the agent's
closing text. Parsed, that is three turns: the prompt, a step (``I'll run …`` +
``ran: …``), and the closing text. Every sentence carries ``i``, so each turn's text is
unique and its place in the session is known. ``extra`` text can be put in a prompt (a
planted secret, a hook's injected context) by the caller.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

START = datetime(2026, 3, 2, 9, 0, 0)


def _record(kind: str, session: str, cwd: str, n: int, message: dict[str, Any], **extra: Any) -> str:
    ts = (START + timedelta(seconds=7 * n)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    rec = {
        "parentUuid": None if n == 0 else f"{session[:8]}-{n - 1:012d}",
        "isSidechain": False,
        "userType": "external",
        "cwd": cwd,
        "sessionId": session,
        "version": "2.1.47",
        "gitBranch": "main",
        "type": kind,
        "uuid": f"{session[:8]}-{n:012d}",
        "timestamp": ts,
        "message": message,
        **extra,
    }
    return json.dumps(rec, ensure_ascii=False)


def exchange(session: str, cwd: str, i: int, prompt_extra: str = "") -> list[str]:
    """The five records of exchange ``i`` (module docstring)."""
    n = 5 * i
    prompt = f"Step {i}: please check that module {i} handles empty input." + (
        f" {prompt_extra}" if prompt_extra else ""
    )
    reply = {"id": f"msg_{session[:6]}_{i}", "model": "claude-sonnet-4-6", "role": "assistant"}
    call = f"toolu_{session[:6]}_{i}"
    return [
        _record("user", session, cwd, n, {"role": "user", "content": prompt}),
        _record(
            "assistant",
            session,
            cwd,
            n + 1,
            {**reply, "content": [{"type": "text", "text": f"I will run the tests of module {i} first."}]},
        ),
        _record(
            "assistant",
            session,
            cwd,
            n + 2,
            {
                **reply,
                "content": [
                    {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": f"pytest tests/test_m{i}.py"}}
                ],
            },
        ),
        _record(
            "user",
            session,
            cwd,
            n + 3,
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": f"{i} passed"}]},
        ),
        _record(
            "assistant",
            session,
            cwd,
            n + 4,
            {
                "id": f"msg_{session[:6]}_{i}b",
                "model": "claude-sonnet-4-6",
                "role": "assistant",
                "content": [{"type": "text", "text": f"Module {i} returns an empty list for empty input; done."}],
            },
        ),
    ]


def transcript(
    session: str, cwd: str, exchanges: int, prompt_extra: Callable[[int], str] | None = None
) -> Iterator[str]:
    """Every line of a session of ``exchanges`` exchanges, in order."""
    for i in range(exchanges):
        yield from exchange(session, cwd, i, prompt_extra(i) if prompt_extra else "")


def expected_turns(exchanges: int, prompt_extra: Callable[[int], str] | None = None) -> list[str]:
    """The turn texts a complete read of ``transcript`` stores, in order."""
    out = []
    for i in range(exchanges):
        extra = prompt_extra(i) if prompt_extra else ""
        out.append(f"Step {i}: please check that module {i} handles empty input." + (f" {extra}" if extra else ""))
        out.append(f"I will run the tests of module {i} first.\nran: pytest tests/test_m{i}.py")
        out.append(f"Module {i} returns an empty list for empty input; done.")
    return out


VSCODE_T0 = 1767790000000  # ms


def vscode_log(session: str, exchanges: int) -> Iterator[str]:
    """The lines of a VS Code chat-session log (``<session>.jsonl``) as VS Code appends them:
    its first entry, then per exchange the request pushed, the answer streamed (a markdown
    part that grows is written again from its index), a terminal call, the finish."""
    head = {
        "version": 3,
        "sessionId": session,
        "creationDate": VSCODE_T0,
        "requests": [],
        "responderUsername": "Copilot",
    }
    yield json.dumps({"kind": 0, "v": head})
    for i in range(exchanges):
        req = {
            "requestId": f"request_{i}",
            "timestamp": VSCODE_T0 + 7000 * i,
            "message": {"text": f"Step {i}: please check that module {i} handles empty input.", "parts": []},
            "response": [],
            "responseId": f"response_{i}",
            "modelState": {"value": 0},
        }
        tool = {"kind": "terminal", "commandLine": {"original": f"pytest tests/test_m{i}.py"}, "language": "sh"}
        call = {"kind": "toolInvocationSerialized", "toolId": "run_in_terminal", "toolCallId": f"call_{i}"}
        where = ["requests", i, "response"]
        for entry in (
            {"kind": 2, "k": ["requests"], "v": [req]},
            {"kind": 2, "k": where, "v": [{"value": f"I will run the tests of module {i}"}]},
            {"kind": 2, "k": where, "i": 0, "v": [{"value": f"I will run the tests of module {i} first."}]},
            {"kind": 2, "k": where, "v": [{**call, "toolSpecificData": tool, "isComplete": True}]},
            {
                "kind": 1,
                "k": ["requests", i, "modelState"],
                "v": {"value": 1, "completedAt": VSCODE_T0 + 7000 * i + 5000},
            },
        ):
            yield json.dumps(entry)


def vscode_expected_turns(exchanges: int) -> list[str]:
    """The turn texts a complete read of ``vscode_log`` stores, in order."""
    out = []
    for i in range(exchanges):
        out.append(f"Step {i}: please check that module {i} handles empty input.")
        out.append(f"I will run the tests of module {i} first.\nran: pytest tests/test_m{i}.py")
    return out
