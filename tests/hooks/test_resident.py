"""The hooks through the store's resident process, with real processes and the real
embedder: a session start and a prompt answered over the socket give what the in-process
path gives (the same bar, the same recall-log rows) without loading numpy or the model; a
hook that finds no resident process starts one daemon however many hooks start at once,
which exits when idle; a killed daemon's stale socket, a silent server and a garbling one
never reach the agent (exit 0, a reply from the in-process path or nothing)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from localmem.bench import agent_logs
from localmem.hooks import status
from localmem.models.embedding import OnnxMiniLM
from localmem.resident import client, wire
from localmem.storage.engine import db as engine_db
from localmem.storage.engine import keys
from localmem.storage.layers import recalls
from tests.helpers.hooks import CWD, SESSION, cli, context_of, hook
from tests.helpers.resident import HEAVY, Server, answers, daemons

START = {"session_id": "new-session", "cwd": CWD, "source": "startup"}
ASK = {"session_id": "new-session", "cwd": CWD, "prompt": "what does module 2 return for empty input?"}
# the served round asks in another session: a prompt does not repeat what its session was
# given already (tests/hooks/test_context_given.py)
SERVED = {**ASK, "session_id": "served-session"}


def fresh() -> dict[str, str]:
    """``ASK`` in a session of its own: the same question asked again gets the same answer."""
    return {**ASK, "session_id": f"session-{uuid.uuid4()}"}


OFF = {"session_id": "new-session", "cwd": CWD, "prompt": "recommend a good sourdough bread recipe with rye flour"}


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[Path]:
    """A store the Stop hook made from a four-exchange transcript; any daemon started for
    it is stopped afterwards."""
    log = tmp_path / "projects" / f"{SESSION}.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("\n".join(agent_logs.transcript(SESSION, CWD, 4)) + "\n", "utf-8")
    db = tmp_path / "m.db"
    run = hook(db, "stop", {"session_id": SESSION, "transcript_path": str(log), "cwd": CWD})
    assert run.returncode == 0 and run.stdout == b"" and run.stderr == b""
    yield db
    for pid in daemons(db):
        os.kill(pid, signal.SIGKILL)


def served(db: Path) -> bool:
    path = wire.socket_path(db)
    assert path is not None
    return answers(path)


def wait_for(what: object, seconds: float = 120) -> None:
    assert callable(what)
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.2)


def via(db: Path) -> str:
    last = status.read(db)["last_run"]
    return str(last.get("via", "in-process"))


def hook_calls(db: Path) -> list[recalls.RecallCall]:
    conn = engine_db.connect(db)
    try:
        return [c for c in recalls.calls(conn, 100, 0).items if c.client.startswith("hook:")]
    finally:
        conn.close()


def test_answered_over_the_socket_as_in_process_without_the_model(stored: Path) -> None:
    here_start = context_of(hook(stored, "session-start", START), "SessionStart")
    here_prompt = context_of(hook(stored, "prompt", ASK, "gemini"), "BeforeAgent")
    assert via(stored) == "in-process" and status.read(stored)["last_run"]["resident"] == "no socket"
    assert hook(stored, "prompt", OFF).stdout == b""
    here_bar = status.read(stored)["last_run"]["best_cosine"]
    server = Server(stored)
    try:
        assert context_of(hook(stored, "session-start", START), "SessionStart") == here_start
        assert via(stored) == "resident"
        assert context_of(hook(stored, "prompt", SERVED, "gemini"), "BeforeAgent") == here_prompt
        assert via(stored) == "resident"
        below = hook(stored, "prompt", OFF)  # the same bar on both paths
        assert below.returncode == 0 and below.stdout == b""
        last = status.read(stored)["last_run"]
        assert last["via"] == "resident" and last["outcome"] == "quiet" and last["best_cosine"] == here_bar
        # what a served hook process imports: none of the read path
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "localmem.hooks", "--db", str(stored), *CLAUDE_PROMPT],
            input=json.dumps(SERVED).encode(),
            capture_output=True,
            timeout=120,
        )
        assert proc.returncode == 0 and b"Module 2 returns" in proc.stdout
        names = [ln.rsplit("|", 1)[-1].strip() for ln in proc.stderr.decode().splitlines() if "import time:" in ln]
        assert names and not [n for n in names if n.startswith(HEAVY)], names
        shown = cli(stored, "hooks", "status").stdout
        assert "last run" in shown and "claude-code prompt: replied" in shown and "resident" in shown, shown
    finally:
        server.stop()
    # each reply, on either path, is one row of the recall log under the agent's name
    rows = hook_calls(stored)
    assert [(c.client, c.tool) for c in reversed(rows)] == [
        ("hook:claude-code", "session-start"),
        ("hook:gemini", "prompt"),
        ("hook:claude-code", "session-start"),
        ("hook:gemini", "prompt"),
        ("hook:claude-code", "prompt"),
    ]
    assert {(c.session, c.project) for c in rows} == {("new-session", CWD), ("served-session", CWD)}
    assert rows[-1].query == rows[-3].query == DECIDED_QUERY and rows[0].query == ASK["prompt"]


CLAUDE_PROMPT = ("prompt", "--client", "claude-code")
DECIDED_QUERY = "what we decided, agreed or chose, and what is still open, to do next, unresolved or blocked"


def test_two_hooks_at_once_start_one_daemon_that_exits_when_idle(stored: Path) -> None:
    env = {**os.environ, "LOCALMEM_HOOKS_DAEMON_IDLE": "6"}
    argv = [sys.executable, "-m", "localmem.hooks", "--db", str(stored)]
    procs = [
        subprocess.Popen(
            [*argv, event, "--client", "claude-code"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        for event in ("session-start", "prompt")
    ]
    outs = [
        p.communicate(json.dumps(START if i == 0 else SERVED).encode(), timeout=120)[0] for i, p in enumerate(procs)
    ]
    assert all(p.returncode == 0 for p in procs) and all(b"additionalContext" in o for o in outs)
    wait_for(lambda: served(stored))
    assert len(daemons(stored)) == 1
    later = {**ASK, "session_id": "later-session"}  # a session given nothing yet
    assert b"Module 2 returns" in hook(stored, "prompt", later, LOCALMEM_HOOKS_DAEMON_IDLE="6").stdout
    assert via(stored) == "resident" and len(daemons(stored)) == 1
    path = wire.socket_path(stored)
    assert path is not None
    wait_for(lambda: not daemons(stored), 90)  # 6 idle seconds, then it exits and removes its socket
    assert not path.exists()


def test_a_killed_daemon_is_replaced_and_the_hook_still_answers(stored: Path) -> None:
    env = {"LOCALMEM_HOOKS_DAEMON_IDLE": "120"}
    assert hook(stored, "prompt", fresh(), **env).returncode == 0
    wait_for(lambda: served(stored))
    (pid,) = daemons(stored)
    os.kill(pid, signal.SIGKILL)
    # a killed process's command line goes before its descriptors do: wait for both
    wait_for(lambda: not daemons(stored) and not served(stored), 30)
    path = wire.socket_path(stored)
    assert path is not None and path.exists()  # stale: nobody accepts on it
    run = hook(stored, "prompt", fresh(), **env)
    assert run.returncode == 0 and run.stderr == b"" and b"Module 2 returns" in run.stdout
    assert via(stored) == "in-process"
    wait_for(lambda: served(stored))  # the lock died with the old daemon: a new one took the socket over
    (new,) = daemons(stored)
    assert new != pid
    assert b"Module 2 returns" in hook(stored, "prompt", fresh(), **env).stdout and via(stored) == "resident"


def fake_server(db: Path, reply: bytes | None) -> socket.socket:
    """A socket at ``db``'s path that answers every request with ``reply`` (None: it
    accepts and never answers)."""
    path = wire.socket_path(db)
    assert path is not None and wire.private_folder(path.parent, create=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(8)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            held.append(conn)
            if reply is not None:
                client.read_line(conn, wire.MAX_LINE)  # the request, then the reply (as a server does)
                conn.sendall(reply)
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return sock


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (b"not json\n", "no answer"),
        (b'{"ok": true, "hook": {"text": 3}}\n', "bad reply"),
        (b'{"ok": false, "why": "settings"}\n', "settings"),
    ],
)
def test_a_garbling_server_costs_the_agent_nothing(stored: Path, reply: bytes, why: str) -> None:
    sock = fake_server(stored, reply)
    try:
        assert "Module 2 returns" in context_of(hook(stored, "prompt", fresh()), "UserPromptSubmit")
        assert via(stored) == "in-process" and status.read(stored)["last_run"]["resident"] == why
        assert f"in-process (resident: {why})" in cli(stored, "hooks", "status").stdout
    finally:
        sock.close()


def test_a_silent_server_costs_the_hook_its_deadline_and_nothing_reaches_the_agent(
    stored: Path, tmp_path: Path
) -> None:
    sock = fake_server(stored, None)
    try:
        # a machine's first hook (no saved embedder session): with the saved one, the recall
        # on this small store can finish in the 0.1 s the silent server leaves
        cold = str(tmp_path / "cold-cache")
        run = hook(stored, "prompt", fresh(), LOCALMEM_HOOKS_PROMPT_DEADLINE="1.5", XDG_CACHE_HOME=cold)
        assert run.returncode == 0 and run.stdout == b"" and run.stderr == b""
        assert status.read(stored)["last_error"]["kind"] == "timeout"
        assert status.read(stored)["last_run"]["resident"] == "no answer"
    finally:
        sock.close()


@pytest.mark.skipif(not keys.encryption_available(), reason="needs apsw-sqlite3mc")
def test_an_encrypted_store_gets_a_daemon_only_from_a_hook_with_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon reads the key where the hook did (its inherited $LOCALMEM_KEY_FILE, never
    argv); a hook without the key starts none and fails as `key missing`."""
    key_file = tmp_path / "key"
    key_file.write_text("correct horse battery staple\n", "utf-8")
    key_file.chmod(0o600)
    keyed = {keys.KEY_FILE_ENV: str(key_file), "LOCALMEM_HOOKS_DAEMON_IDLE": "120"}
    db = tmp_path / "enc.db"
    log = tmp_path / f"{SESSION}.jsonl"
    log.write_text("\n".join(agent_logs.transcript(SESSION, CWD, 4)) + "\n", "utf-8")
    assert hook(db, "stop", {"session_id": SESSION, "transcript_path": str(log), "cwd": CWD}, **keyed).returncode == 0
    assert keys.is_encrypted(db)
    try:
        monkeypatch.delenv(keys.KEY_FILE_ENV, raising=False)
        monkeypatch.delenv(keys.KEY_ENV, raising=False)
        bare = hook(db, "prompt", fresh(), LOCALMEM_HOOKS_DAEMON_IDLE="120")
        assert bare.returncode == 0 and bare.stdout == b"" and bare.stderr == b""
        assert status.read(db)["last_error"]["kind"] == "key missing"
        time.sleep(1)
        assert not daemons(db)
        assert b"Module 2 returns" in hook(db, "prompt", fresh(), **keyed).stdout
        wait_for(lambda: served(db))
        (pid,) = daemons(db)
        argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert b"horse" not in argv and str(key_file).encode() not in argv
        assert b"Module 2 returns" in hook(db, "prompt", fresh(), **keyed).stdout and via(db) == "resident"
    finally:
        for pid in daemons(db):
            os.kill(pid, signal.SIGKILL)


def test_bench_hooks_times_both_paths(tmp_path: Path) -> None:
    """`bench hooks` on a small store: the resident rows were answered over the socket
    (every run), the in-process rows were not (none), and the server is gone after."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "localmem",
            "bench",
            "hooks",
            "--turns",
            "400",
            "--prompts",
            "2",
            "--starts",
            "1",
            "--stops",
            "1",
            "--workdir",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| UserPromptSubmit (prompt) | resident server | 2 |" in proc.stdout
    got = json.loads(proc.stdout.splitlines()[-1])
    for event, runs in (("prompt", 2), ("session_start", 1)):
        assert got["in_process"][event]["via_resident"] == 0 and got["in_process"][event]["replied"] == runs
        assert got["resident"][event]["via_resident"] == runs and got["resident"][event]["replied"] == runs
    assert not daemons(tmp_path / "hooks-400.db") and not served(tmp_path / "hooks-400.db")


def test_bench_hooks_builds_its_store_with_the_configured_embedder(tmp_path: Path) -> None:
    """`localmem --embedder minilm bench hooks` builds (and, kept, reuses) a MiniLM store,
    not one of the default embedder."""
    argv = [sys.executable, "-m", "localmem", "--embedder", "minilm", "bench", "hooks", "--turns", "200"]
    argv += ["--prompts", "1", "--starts", "1", "--stops", "1", "--workdir", str(tmp_path)]
    for _ in range(2):  # the second run reuses the store the first built
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
    db = tmp_path / "hooks-200.db"
    stats = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), "stats", "--json"], capture_output=True, text=True
    )
    assert json.loads(stats.stdout)["embedder"] == OnnxMiniLM.model_id
