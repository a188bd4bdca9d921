"""Gemini CLI chats with localmem's hooks installed, in the shape Gemini CLI 0.61.0 writes
them (seen in tests/agents/ with the real client): a session start's context is put before
the person's first prompt in the same text (``<hook_context>…</hook_context>\\n\\n`` and
then the prompt, in ``content`` and ``displayContent``), a prompt hook's is a part of its
own, and the CLI escapes ``<`` and ``>`` inside. The prompt is kept; no context is."""

from __future__ import annotations

import json
from pathlib import Path

from localmem.ingest import load

SID = "cb4e17ac-eb62-4bd3-af82-a79cac5881f9"


def block(nonce: str, label: str) -> str:
    inner = f'<localmem-context nonce="{nonce}">\nlocalmem: {label}\n[1] user: We chose Postgres.\n</localmem-context nonce="{nonce}">'
    return "<hook_context>" + inner.replace("<", "&lt;").replace(">", "&gt;") + "</hook_context>"


def chat(tmp_path: Path) -> Path:
    start, prompt = (
        block("f3b533be01bd4a4e", "memory of this project"),
        block("0cf99e4e270f344e", "memory that may bear"),
    )
    typed = "Which database do pallets live in?"
    lines = [
        {"sessionId": SID, "projectHash": "0" * 64, "startTime": "2026-12-07T21:15:54.423Z", "kind": "main"},
        {
            "$set": {
                "messages": [
                    {
                        "id": "d0",
                        "timestamp": "2026-12-07T21:15:54.423Z",
                        "type": "user",
                        "content": [{"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"}],
                    }
                ]
            }
        },
        {
            "id": "u1",
            "timestamp": "2026-12-07T21:15:55.603Z",
            "type": "user",
            "content": [{"text": f"{start}\n\n{typed}"}, {"text": prompt}],
            "displayContent": [{"text": f"{start}\n\n{typed}"}],
        },
        {
            "id": "g1",
            "timestamp": "2026-12-07T21:15:55.641Z",
            "type": "gemini",
            "content": "In Postgres.",
            "thoughts": [],
        },
        {"id": "u2", "timestamp": "2026-12-07T21:16:00.000Z", "type": "user", "content": [{"text": prompt}]},
    ]
    path = tmp_path / "chats" / f"session-2026-12-07T21-15-{SID[:8]}.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", "utf-8")
    return path


def test_the_prompt_after_a_session_starts_context_is_kept_and_no_context_is(tmp_path: Path) -> None:
    (session,) = load(chat(tmp_path), "gemini")
    assert [(t.speaker, t.text) for t in session.turns] == [
        ("user", "Which database do pallets live in?"),
        ("assistant", "In Postgres."),
    ]
