"""`localmem aider`'s pieces, as a person runs the command (a real process, a real store).

The child it runs here is an executable that records how it was started (its arguments,
the ``--read`` file's text and mode) and, when asked, appends a session to the
repository's chat history in aider's format: it tests the launcher's side (the arguments,
the file's life, the exit code, the signals), not aider's, which
tests/agents/test_aider_launch.py runs for real.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localmem.hooks import aider_launch, status

HISTORY = aider_launch.HISTORY
DECISION = "We decided to keep the invoice numbers gapless, one sequence per year."
CHILD = f"""#!{sys.executable}
import json, os, signal, sys, time
args = sys.argv[1:]
got = {{"argv": args}}
if args[:1] == ["--read"]:
    st = os.stat(args[1])
    got.update(mode=st.st_mode & 0o777, folder_mode=os.stat(os.path.dirname(args[1])).st_mode & 0o777)
    got["text"] = open(args[1], encoding="utf-8").read()
if os.environ.get("APPEND"):
    with open(os.environ.get("HISTORY_AT", {HISTORY!r}), "a", encoding="utf-8") as fh:
        fh.write(os.environ["APPEND"])
record = os.environ["RECORD"]
def note(what):
    with open(record, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(what) + "\\n")
note(got)
if os.environ.get("WAIT"):
    signal.signal(signal.SIGINT, lambda *_: note("INT"))
    def term(*_):
        note("TERM")
        sys.exit(5)
    signal.signal(signal.SIGTERM, term)
    note("ready")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.05)
sys.exit(int(os.environ.get("EXIT", "0")))
"""


def session(said: str, reply: str, at: str = "2026-03-02 10:00:00") -> str:
    """A session as aider appends it to its history (``localmem.ingest.aider``)."""
    return f"\n# aider chat started at {at}\n\n> aider --message  \n\n#### {said}  \n\n{reply}\n\n> Tokens: 1k sent  \n"


@pytest.fixture(autouse=True)
def _record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECORD", str(tmp_path / "record.jsonl"))  # what the child notes
    monkeypatch.setenv("LOCALMEM_HOOKS_DAEMON_IDLE", "0")  # no resident process left behind


@pytest.fixture()
def child(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "aider"
    path.parent.mkdir()
    path.write_text(CHILD, "utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "shop"
    (repo / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def launch(db: Path, folder: Path, child: Path, *aider_args: str, **env: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "localmem", "--db", str(db), "aider", "--aider", str(child), "--", *aider_args]
    return subprocess.run(argv, cwd=folder, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)


def records() -> list[object]:
    path = Path(os.environ["RECORD"])
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()] if path.exists() else []


def texts(db: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), "export"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line)["text"] for line in done.stdout.splitlines() if line.strip()]


def runtime_folders() -> list[Path]:
    base = Path(os.environ["XDG_DATA_HOME"]) / "localmem" / "run"  # conftest: no XDG_RUNTIME_DIR
    return sorted(base.glob("aider-*")) if base.exists() else []


def test_without_aider_it_names_what_to_install(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "localmem", "--db", str(tmp_path / "m.db"), "aider", "--", "--message", "hi"]
    done = subprocess.run(argv, env={**os.environ, "PATH": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and done.stderr.count("\n") == 1, done.stderr
    assert "aider is not on PATH: install it with `pipx install aider-chat`" in done.stderr
    done = subprocess.run([*argv[:6], "--aider", str(tmp_path / "nope")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and f"--aider {tmp_path / 'nope'}: not an executable file" in done.stderr


def test_no_store_yet_runs_aider_without_context_and_passes_its_exit_code_on(
    tmp_path: Path, repo: Path, child: Path
) -> None:
    db = tmp_path / "store" / "memory.db"
    done = launch(db, repo, child, "--message", "hello there", "--yes-always", EXIT="7")
    assert done.returncode == 7, done.stderr
    assert done.stderr == f"localmem: aider starts without memory: no store yet at {db}\n"
    assert records() == [{"argv": ["--message", "hello there", "--yes-always"]}]
    assert not db.exists()  # aider wrote no history: nothing to store, no store made for nothing


def test_a_session_is_stored_when_aider_exits_and_the_next_one_gets_it_in_a_private_file(
    tmp_path: Path, repo: Path, child: Path
) -> None:
    db = tmp_path / "store" / "memory.db"
    reply = "Agreed: one gapless sequence per year for invoice numbers."
    first = launch(db, repo, child, "--message", DECISION, APPEND=session(DECISION, reply))
    assert first.returncode == 0 and "no store yet" in first.stderr, first.stderr
    assert texts(db) == [DECISION, reply]  # stored at exit, from the repository's history

    second = launch(db, repo / "src", child, "--message", "How are invoices numbered?", "src/a.py")
    assert second.returncode == 0 and second.stderr == "", second.stderr
    got = records()[-1]
    assert isinstance(got, dict)
    argv = got["argv"]
    assert argv[0] == "--read" and argv[2:] == ["--message", "How are invoices numbered?", "src/a.py"], got
    file = Path(argv[1])
    assert file.name == aider_launch.FILE_NAME and not file.is_relative_to(repo)
    assert (got["mode"], got["folder_mode"]) == (0o600, 0o700), got
    assert got["text"].count("<localmem-context nonce=") == 1 and DECISION in got["text"], got["text"]
    assert not file.exists() and runtime_folders() == []  # removed once aider exited
    ran = status.read(db)["last_run"]
    assert (ran["client"], ran["event"], ran["outcome"]) == ("aider", "session-start", "replied"), ran

    # a third session writes more; a capture afterwards finds it stored once, nothing twice
    third = launch(
        db, repo, child, APPEND=session("Which year starts a new sequence?", "January 1st.", "2026-03-03 09:00:00")
    )
    assert third.returncode == 0, third.stderr
    assert texts(db) == [DECISION, reply, "Which year starts a new sequence?", "January 1st."]
    old = time.time() - 3600  # settled: capture reads it whole
    os.utime(repo / HISTORY, (old, old))
    argv = [sys.executable, "-m", "localmem", "--db", str(db), "capture", "--dir", f"aider={tmp_path}", "--json"]
    again = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=300, check=True).stdout)
    assert again["new"] == 0 and again["already_present"] == 0 and not again["errors"], again


def test_a_bad_config_file_still_runs_aider(tmp_path: Path, repo: Path, child: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[hooks\n", "utf-8")
    done = launch(tmp_path / "m.db", repo, child, "--version", LOCALMEM_CONFIG=str(config))
    assert done.returncode == 0 and records() == [{"argv": ["--version"]}]
    assert done.stderr.startswith("localmem: aider starts without memory: ") and done.stderr.count("\n") == 1


def test_sigint_is_left_to_aider_and_sigterm_passed_on(tmp_path: Path, repo: Path, child: Path) -> None:
    argv = [sys.executable, "-m", "localmem", "--db", str(tmp_path / "m.db"), "aider", "--aider", str(child)]
    env = {**os.environ, "WAIT": "1"}
    proc = subprocess.Popen(argv, cwd=repo, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while "ready" not in records():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGINT)  # to the launcher alone: a terminal's Ctrl-C reaches aider itself
        time.sleep(0.5)
        assert proc.poll() is None and "INT" not in records()
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(60) == 5  # aider's own exit, after its SIGTERM handler ran
    finally:
        if proc.poll() is None:
            proc.kill()
    assert records()[1:] == ["ready", "TERM"]


def test_history_file_is_where_aider_writes_it(tmp_path: Path, repo: Path) -> None:
    sub = repo / "src"
    assert aider_launch.history_file([], sub, {}) == repo / HISTORY  # the git root
    assert aider_launch.history_file(["--no-git"], sub, {}) == sub / HISTORY
    assert aider_launch.history_file(["--chat-history-file", "h.md"], sub, {}) == sub / "h.md"
    assert aider_launch.history_file(["--chat-history-file=/x/h.md"], sub, {}) == Path("/x/h.md")
    assert aider_launch.history_file([], sub, {"AIDER_CHAT_HISTORY_FILE": "e.md"}) == sub / "e.md"
    assert aider_launch.history_file(["--", "--chat-history-file", "f"], sub, {}) == repo / HISTORY  # file names
    assert aider_launch.history_file([], tmp_path, {}) == tmp_path / HISTORY  # not a repository


def test_context_file_is_private_and_a_dead_launchers_file_goes(tmp_path: Path) -> None:
    base = tmp_path / "run"
    path = aider_launch.write_context("<memory>", base)
    assert path.read_text("utf-8") == "<memory>"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(base.stat().st_mode) == 0o700
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = base / f"aider-{gone.stdout.strip()}-abc"
    stale.mkdir()
    other = aider_launch.write_context("<more>", base)  # made by this (live) process: kept
    assert not stale.exists() and path.exists() and other.exists()
    aider_launch.remove(path)
    assert not path.parent.exists() and other.exists()
    base.chmod(0o755)
    with pytest.raises(ValueError, match="open to group or others"):
        aider_launch.write_context("<memory>", base)
