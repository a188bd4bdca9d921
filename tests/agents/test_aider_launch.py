"""`localmem aider` with the real Aider, offline: the session-start context given as a
read-only file, and each session stored when aider exits.

Aider (``tests.helpers.aider_cli``: PyPI ``aider-chat`` 0.86.2 in ``.ci/aider-venv``) runs
one ``--message`` session at a time in a git repository against the loopback stand-in of
the OpenAI Chat Completions API, started by ``localmem aider --aider AIDER -- ARGS``.
Session 1 (no store yet: aider runs without memory, and a line says so) says a decision;
its prompt and reply are stored when aider exits, no capture needed. Session 2 asks about
it: its request carries the decision inside exactly one ``<localmem-context nonce=…>``
block (session 1's carried none). Session 3 is answered by the resident process session 2
started. Then: the store holds each prompt and reply exactly once and nothing localmem
injected; aider's history names the file but holds none of its text; the context files are
gone; a ``localmem capture`` afterwards finds nothing new.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from localmem.bench.agent_apis import StandIn
from localmem.hooks import status
from tests.helpers.agent_clis import blocks, stop_daemon
from tests.helpers.aider_cli import TURN_TIMEOUT_S, Aider, aider_bin, settled, texts_in

SAID = [
    (
        "We decided that the invoice PDFs are rendered with WeasyPrint, not wkhtmltopdf.",
        "Noted: invoice PDFs are rendered with WeasyPrint from now on.",
    ),
    ("Which tool renders the invoice PDFs?", "WeasyPrint renders them, as decided."),
    ("And what did we rule out for the PDFs?", "wkhtmltopdf was ruled out."),
]


def test_localmem_aider_gives_the_last_decision_and_stores_each_session_once(tmp_path: Path) -> None:
    command = aider_bin()
    code, db = tmp_path / "code", tmp_path / "store" / "memory.db"
    db.parent.mkdir()
    with StandIn("openai", reply="") as stand_in:
        aider = Aider(command, tmp_path / "home", code / "billing", stand_in)
        aider.prepare({"invoice.py": "def render(invoice):\n    return b''\n"})
        env = aider.env() | {"LOCALMEM_HOOKS_DAEMON_IDLE": "60"}  # session 3 is served by it
        runtime = aider.home / ".local" / "share" / "localmem" / "run"  # no XDG_RUNTIME_DIR in aider.env()

        def launch(message: str, reply: str) -> subprocess.CompletedProcess[str]:
            stand_in.reply = reply
            argv = [sys.executable, "-m", "localmem", "--db", str(db), "aider", "--aider", str(command), "--"]
            done = subprocess.run(
                [*argv, *aider.args(message)],
                cwd=aider.repo,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=TURN_TIMEOUT_S,
            )
            assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
            assert reply in done.stdout  # aider ran and printed the model's reply
            return done

        try:
            marks = [len(stand_in.requests)]
            first = launch(*SAID[0])
            assert "localmem: aider starts without memory: no store yet at" in first.stderr, first.stderr
            assert texts_in(db) == list(SAID[0])  # stored when aider exited: no capture
            for said in SAID[1:]:
                marks.append(len(stand_in.requests))
                done = launch(*said)
                assert "localmem:" not in done.stderr, done.stderr
            marks.append(len(stand_in.requests))
            hooks = status.read(db)
        finally:
            stop_daemon(env, db)

        def bodies(session: int) -> list[bytes]:
            made = stand_in.requests[marks[session - 1] : marks[session]]
            got = [r.body for r in stand_in.conversations() if r in made]
            assert got, f"session {session} made no model request"
            return got

        decision = SAID[0][0]
        assert not [b for body in bodies(1) for b in blocks(body)]
        nonces = set()
        for session in (2, 3):
            for body in bodies(session):
                carrying = [b for b in blocks(body) if decision in b]
                assert len(carrying) == 1 and body.count(b"<localmem-context nonce=") == 1, body[:2000]
                nonces.add(body.split(b'<localmem-context nonce=\\"', 1)[1][:16])
        assert hooks["events"]["session-start"]["replied"] == 2, hooks
        assert hooks["last_run"]["client"] == "aider" and hooks["last_run"]["via"] == "resident", hooks

    stored = [text for pair in SAID for text in pair]
    assert texts_in(db) == stored  # each prompt and reply once, in order, nothing injected
    raw = db.read_bytes() + b"".join(p.read_bytes() for p in db.parent.glob("memory.db-*"))
    assert b"localmem-context" not in raw and not [n for n in nonces if n in raw]
    history = aider.history.read_text("utf-8")
    sessions = history.split("# aider chat started at ")[1:]
    assert len(sessions) == 3 and [s.count("(read-only)") for s in sessions] == [0, 1, 1], history
    # aider names the file it was given, never its text: the decision only where it was said
    assert "localmem-context" not in history and [decision in s for s in sessions] == [True, False, False]
    assert [m for m in ("--message", "Aider v0.86", "Tokens: ") if m not in history] == []  # left out of the store
    assert not list(runtime.glob("aider-*")), list(runtime.iterdir())  # each context file removed
    settled(aider.history)
    again = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), "capture", "--dir", f"aider={code}", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    got = json.loads(again.stdout)
    assert got["new"] == 0 and got["already_present"] == 0 and not got["errors"], got  # the launcher's progress
    assert os.path.isdir(runtime)
