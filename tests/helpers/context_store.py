"""A store for the session-start and prompt context tests (tests/hooks/test_context_*.py),
made by the real CLI from an export: personal chat from a chat export (decisions and open
questions about nothing of the work, and a stub of stripped context) and a coding agent's
titled session in the project ``SHOP``, where the person also said something about
themselves."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.hooks import cli

SHOP = "/home/sam/shop"
PNPM = "Good. By the way, I prefer pnpm over npm on all my machines."
POSTGRES = "For the shop we decided on Postgres 16, with Prisma for migrations."
CHAT = [  # personal chat from an export: decisions and open questions, about nothing of the work
    ("Maya", "I decided to take the train to Porto; still open whether we stay two nights."),
    ("assistant", "Good choice. You still need to book the hotel, that is unresolved."),
    ("Maya", "We agreed to meet at 7 and I chose the blue dress. Next I need to book the table."),
    ("Maya", "Here is what you told me earlier:"),
]
SHOP_TALK = [
    ("user", "Let's set up the storage for the shop. Which database should we use?"),
    ("assistant", POSTGRES),
    ("user", PNPM),
    ("assistant", "Noted, the shop uses pnpm workspaces now."),
]


def _line(session: str, title: str, i: int, speaker: str, text: str, **ran: str) -> str:
    role = "assistant" if speaker == "assistant" else "user"
    return json.dumps(
        {
            "localmem": 1,
            "source": "chatgpt" if not ran else "claude-code:shop",
            "session": session,
            "title": title,
            "started_at": "2026-02-01T10:00:00",
            "id": f"{session}-{i}",
            "speaker": speaker,
            "role": role,
            "timestamp": f"2026-02-01T10:{i:02d}:00",
            "text": text,
            **ran,
        }
    )


def make_store(tmp_path: Path) -> Path:
    lines = [_line("chat-1", "Weekend in Porto", i, who, text) for i, (who, text) in enumerate(CHAT)]
    shop = {"client": "claude-code", "cwd": SHOP}
    lines += [_line("0b5e-uuid", "Set up the shop's storage", i, w, t, **shop) for i, (w, t) in enumerate(SHOP_TALK)]
    src = tmp_path / "mem.jsonl"
    src.write_text("\n".join(lines) + "\n", "utf-8")
    db = tmp_path / "m.db"
    assert cli(db, "ingest", str(src)).returncode == 0
    return db
