"""The real Aider, offline, and what `localmem capture` and `localmem watch` read of its chat history.

Aider (``tests.helpers.aider_cli``: PyPI ``aider-chat``, pinned, in ``.ci/aider-venv``) runs
one ``--message`` session at a time in a git repository, against the loopback stand-in of
the OpenAI Chat Completions API (``localmem.bench.agent_apis``), streamed and not; each
session appends to the repository's ``.aider.chat.history.md``. Two sessions, then
`localmem capture --dir aider=FOLDER` (the folder above the repository): each prompt and
reply stored once and in order, a reply's SEARCH/REPLACE edit as ``edited: FILE``, and
none of the lines Aider writes around them (the command line it was started with, its
version and model, ``Added … to the chat``, token counts, ``Applied edit``); the last
reply held back while the file is fresh, and nothing stored twice by later captures. Then
a running `localmem watch` stores a third session, a ``/ask`` (which Aider logs twice: the
command, then the question as the person's input), with the question once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from localmem.bench.agent_apis import StandIn
from tests.helpers.aider_cli import Aider, aider_bin, settled, texts_in

CART = "def total(amount, coupon, gift_card):\n    amount -= gift_card\n    amount *= 1 - coupon\n    return amount\n"
EDIT = (
    "I'll apply the coupon before the gift card.\n\ncart.py\n```python\n<<<<<<< SEARCH\n"
    "    amount -= gift_card\n    amount *= 1 - coupon\n=======\n    amount *= 1 - coupon\n"
    "    amount -= gift_card\n>>>>>>> REPLACE\n```\n\nThe coupon now applies first."
)
# (what the person typed, what the stand-in answers, what localmem stores of the two)
SAID = [
    (
        "We decided to keep the invoice cache in SQLite, not Redis.\nRedis stays for the sessions only.",
        "Noted: the invoice cache stays in SQLite, and Redis keeps only the sessions.",
        (
            "We decided to keep the invoice cache in SQLite, not Redis.\nRedis stays for the sessions only.",
            "Noted: the invoice cache stays in SQLite, and Redis keeps only the sessions.",
        ),
    ),
    (
        "The cart applies the gift card before the coupon. Apply the coupon first.",
        EDIT,
        (
            "The cart applies the gift card before the coupon. Apply the coupon first.",
            "I'll apply the coupon before the gift card.\n\nedited: cart.py\n\nThe coupon now applies first.",
        ),
    ),
    (
        "/ask Which database did we pick for the invoice cache?",
        "SQLite, for the invoice cache.",
        ("Which database did we pick for the invoice cache?", "SQLite, for the invoice cache."),
    ),
]
# What the real history holds around the prompts and replies (checked there, then never stored).
META = ("--message", "Aider v0.86", "Model: openai/localmem-standin", "Added cart.py to the chat", "Tokens: ")
META += ("Applied edit to cart.py", "Repo-map", "SEARCH", "/ask")


def localmem(db: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "localmem", "--db", str(db), *args]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


def test_capture_and_watch_read_real_aider_sessions(tmp_path: Path) -> None:
    command = aider_bin()
    code, db = tmp_path / "code", tmp_path / "store" / "memory.db"
    db.parent.mkdir()
    stored = [text for *_, pair in SAID for text in pair]
    with StandIn("openai", reply="") as stand_in:
        aider = Aider(command, tmp_path / "home", code / "shop", stand_in)
        aider.prepare({"cart.py": CART})
        env = aider.env()

        def capture() -> dict[str, Any]:
            return dict(json.loads(localmem(db, env, "capture", "--dir", f"aider={code}", "--json").stdout))

        aider.turn(SAID[0][0], SAID[0][1], stream=True)
        aider.turn(SAID[1][0], SAID[1][1], "cart.py", stream=False)
        assert (aider.repo / "cart.py").read_text() == CART.replace(
            "    amount -= gift_card\n    amount *= 1 - coupon\n", "    amount *= 1 - coupon\n    amount -= gift_card\n"
        )  # Aider applied the reply's edit: the real client ran
        got = capture()  # written just now: the last reply is held back until the history settles
        assert got["by_client"]["aider"]["files"] == 1 and not got["errors"], got
        assert got["new"] == 3 and [h["file"] for h in got["held"]] == [str(aider.history)], got
        settled(aider.history)
        got = capture()
        assert got["new"] == 1 and got["already_present"] == 0 and not got["errors"], got
        assert capture()["new"] == 0
        assert texts_in(db) == stored[:4]

        watch = [sys.executable, "-m", "localmem", "--db", str(db), "watch", "--json", "--final-after", "1"]
        proc = subprocess.Popen(
            [*watch, "--only", "aider", "--dir", f"aider={code}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        events: list[dict[str, Any]] = []

        def read_events() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                events.append(json.loads(line))

        threading.Thread(target=read_events, daemon=True).start()

        def wait(pred: Callable[[], bool], timeout: float = 240) -> None:
            deadline = time.monotonic() + timeout
            while not pred():
                assert proc.poll() is None, (events, proc.stderr.read() if proc.stderr else "")
                assert time.monotonic() < deadline, (events, texts_in(db))
                time.sleep(0.2)

        try:
            wait(lambda: any(e["event"] == "started" for e in events))
            aider.turn(SAID[2][0], SAID[2][1], stream=True)
            wait(lambda: len(texts_in(db)) >= len(stored))
            time.sleep(1.5)  # past --final-after: nothing more comes
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        assert proc.returncode == 0
        assert not [e for e in events if e["event"] == "error"], events
        conversations = stand_in.conversations()
        assert len(conversations) == 3, [r.path for r in stand_in.requests]
        assert [bool(r.json().get("stream")) for r in conversations] == [True, False, True]
        # offline: Aider never went for litellm's price list (it writes its cache even when the fetch fails)
        assert not (aider.home / ".aider" / "caches" / "model_prices_and_context_window.json").exists()

    history = aider.history.read_text("utf-8")
    assert history.count("# aider chat started at ") == 3
    assert [m for m in META if m not in history] == [], history  # what must be left out is there
    assert texts_in(db) == stored
    assert capture()["new"] == 0
    rows = [json.loads(line) for line in localmem(db, env, "export").stdout.splitlines() if line.strip()]
    assert [(r["speaker"], r["text"]) for r in rows] == [
        (speaker, text) for *_, pair in SAID for speaker, text in zip(("user", "assistant"), pair, strict=True)
    ]
    assert all(r.get("client") == "aider" and r.get("cwd") == str(aider.repo) for r in rows), rows[0]
    assert len({r["session"] for r in rows}) == 3, rows  # one session per launch of Aider
    raw = db.read_bytes() + b"".join(p.read_bytes() for p in db.parent.glob("memory.db-*"))
    assert [m for m in META if m.encode() in raw] == []
