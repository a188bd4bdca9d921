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

And a session a person types into, on a terminal (a pty): Ctrl-C twice is aider's ("^C
again to exit"), the launcher stays, stores the session when aider has exited and returns
aider's exit code.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import subprocess
import sys
import time
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


def test_ctrl_c_on_the_terminal_is_aiders_and_the_session_is_still_stored(tmp_path: Path) -> None:
    command = aider_bin()
    db = tmp_path / "store" / "memory.db"
    db.parent.mkdir()
    said, reply = "We decided the nightly export runs at 02:00 UTC.", "Noted: the nightly export runs at 02:00 UTC."
    with StandIn("openai", reply=reply) as stand_in:
        aider = Aider(command, tmp_path / "home", tmp_path / "code" / "ops", stand_in)
        aider.prepare({"export.py": "def run():\n    pass\n"})
        env = aider.env() | {"LOCALMEM_HOOKS_DAEMON_IDLE": "0", "TERM": "dumb"}
        argv = [sys.executable, "-m", "localmem", "--db", str(db), "aider", "--aider", str(command), "--"]
        argv += aider.args(None)
        pid, fd = pty.fork()  # the launcher on a terminal of its own: Ctrl-C reaches its foreground group
        if pid == 0:  # pragma: no cover (the child process)
            os.chdir(aider.repo)
            os.execve(argv[0], argv, env)
        seen = bytearray()

        def until(text: bytes, timeout: float = TURN_TIMEOUT_S) -> None:
            """Read the terminal until ``text`` appears after what was read before."""
            start, deadline = len(seen), time.monotonic() + timeout
            while text not in seen[start:]:
                assert time.monotonic() < deadline, bytes(seen[-3000:])
                if select.select([fd], [], [], 0.2)[0]:
                    seen.extend(os.read(fd, 4096))

        def drain(seconds: float) -> None:
            """Read what the terminal shows for ``seconds`` (less when it closes)."""
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                if select.select([fd], [], [], 0.1)[0]:
                    try:
                        chunk = os.read(fd, 4096)
                    except OSError:
                        return
                    if not chunk:
                        return
                    seen.extend(chunk)

        codes: list[int] = []

        def exited() -> list[int]:
            """The launcher's exit code once it has exited (empty before)."""
            if not codes:
                done, how = os.waitpid(pid, os.WNOHANG)
                if done:
                    codes.append(os.waitstatus_to_exitcode(how))
            return codes

        try:
            until(b"> ")
            os.write(fd, said.encode() + b"\r")
            until(reply.encode())
            until(b"> ")  # the next prompt
            os.write(fd, b"\x03")  # Ctrl-C: SIGINT to the terminal's foreground group, launcher and aider
            # then Ctrl-D (end of input) until aider leaves. A SIGINT that lands on another of
            # aider's threads is taken only when input wakes its readline (CPython): aider then
            # says "^C again to exit" and leaves at the next ^D, or takes the KeyboardInterrupt
            # on its way out (exit 130); either is aider's own doing
            deadline = time.monotonic() + 60
            while not exited():
                assert time.monotonic() < deadline, bytes(seen[-3000:])
                with contextlib.suppress(OSError):  # the terminal closed: everyone has exited
                    os.write(fd, b"\x04")
                drain(1.0)
            code = exited()[0]
        finally:
            os.close(fd)
    assert b"again to exit" in seen or b"KeyboardInterrupt" in seen, bytes(seen[-3000:])  # aider took the Ctrl-C
    assert code in (0, 130) and b"localmem: interrupted" not in seen, (code, bytes(seen[-3000:]))
    assert texts_in(db) == [said, reply]  # the launcher lived through the Ctrl-C and stored the session
