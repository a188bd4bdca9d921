"""The hook's fast path (`localmem.hooks.quick`, op `hook-cli`) with real processes, the real
embedder and a real `localmem serve --transport socket`: a session start or a prompt
answered from the raw command line prints byte for byte what the hook prints with its
settings loaded (through the same server, op `hook`) and in-process, and counts the same
outcome; everything unusual (an ingest event, a bad command line or payload, other
settings, no time left, a stale, foreign or garbling socket, an encrypted store) takes the
path of before, which answers and counts as it did, and the hook still exits 0.

Whether the fast path answered is read from `-X importtime`: a hook it answered never
imports `localmem.config` (nor `localmem.hooks.entry`)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from localmem.bench import agent_logs
from localmem.hooks import events, quick, status
from localmem.resident import wire
from localmem.storage.engine import keys
from tests.helpers.fastentry import imported_by
from tests.helpers.hooks import CWD, SESSION, hook
from tests.helpers.resident import Server

ROOT = Path(__file__).resolve().parents[2]
START = {"session_id": "new-session", "cwd": CWD, "source": "startup"}
# no session: the same prompt asked again on another path gets the same reply (within a
# session a prompt leaves out what the session was given already: test_context_given.py)
ASK = {"cwd": CWD, "prompt": "what does module 2 return for empty input?"}
OFF = {"session_id": "new-session", "cwd": CWD, "prompt": "recommend a good sourdough bread recipe with rye flour"}
_IMPORT_LINE = re.compile(rb"^import time:[^\n]*\n", re.MULTILINE)
# the hook with its settings loaded: the path of before the fast path (op `hook`, else in-process)
ENTRY = (
    "import time; t0 = time.perf_counter(); import sys; from localmem.hooks import entry; "
    "sys.exit(entry.main(sys.argv[1:], sys.stdin.buffer.read(), t0))"
)


@dataclass(frozen=True)
class Hooked:
    stdout: bytes
    stderr: bytes  # without -X importtime's lines
    code: int
    fast: bool  # the raw line was answered: no settings were loaded
    last: dict[str, Any]  # the status's last run, without its time


def run(db: Path, argv: list[str], payload: bytes, *, entry: bool = False, **env: str) -> Hooked:
    """`python -m localmem.hooks --db DB ARGV` with ``payload`` on stdin (``entry``: the hook
    with its settings loaded, skipping the fast path)."""
    how = ["-c", ENTRY] if entry else ["-m", "localmem.hooks"]
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *how, "--db", str(db), *argv],
        input=payload,
        capture_output=True,
        timeout=300,
        env={**os.environ, **env},
        cwd=ROOT,
    )
    names = {line.rsplit(b"|", 1)[-1].strip() for line in _IMPORT_LINE.findall(proc.stderr)}
    last = {k: v for k, v in (status.read(db)["last_run"] or {}).items() if k not in ("at", "ms")}
    return Hooked(
        proc.stdout, _IMPORT_LINE.sub(b"", proc.stderr), proc.returncode, b"localmem.config" not in names, last
    )


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[Path]:
    """A store the Stop hook made from a four-exchange transcript."""
    log = tmp_path / f"{SESSION}.jsonl"
    log.write_text("\n".join(agent_logs.transcript(SESSION, CWD, 4)) + "\n", "utf-8")
    db = tmp_path / "m.db"
    made = hook(db, "stop", {"session_id": SESSION, "transcript_path": str(log), "cwd": CWD})
    assert made.returncode == 0 and made.stdout == b"" and made.stderr == b""
    yield db


def _json(obj: dict[str, str]) -> bytes:
    return json.dumps(obj).encode()


# (argv after --db, payload, extra environment, whether the fast path answers it)
CASES: list[tuple[list[str], bytes, dict[str, str], bool]] = [
    (["session-start", "--client", "claude-code"], _json(START), {}, True),
    (["prompt", "--client", "gemini"], _json(ASK), {}, True),
    (["prompt", "--client=codex"], _json(ASK), {}, True),
    (["--client", "claude-code", "prompt"], _json(OFF), {}, True),  # below the bar: quiet, the same best cosine
    (["prompt", "--client", "claude-code"], _json({**ASK, "prompt": "  "}), {}, True),  # nothing to recall for
    (["prompt", "--client", "claude-code"], _json({**ASK, "prompt": "/compact"}), {}, True),
    (["prompt", "--client", "claude-code"], _json({**ASK, "cwd": ""}), {}, True),  # the hook's own folder
    (["prompt", "--client", "claude-code"], _json(ASK), {"LOCALMEM_HOOKS_PROMPT_BUDGET": "60"}, True),
    (["prompt", "--client", "claude-code"], _json(ASK), {"LOCALMEM_HOOKS_PROMPT_BAR": "0.99"}, True),
    # ingests: in-process (in the foreground here, so that its count is there when the process
    # exits; tests/hooks/test_background.py covers the detached worker)
    (
        ["stop", "--client", "claude-code"],
        _json({"session_id": "x", "cwd": CWD}),
        {"LOCALMEM_HOOK_FOREGROUND": "1"},
        False,
    ),
    (["prompt"], _json(ASK), {}, False),  # no --client: counted as a bad command line
    (["prompt", "--client", "claude-code", "--bogus"], _json(ASK), {}, False),
    (["prompt", "--cl", "claude-code"], _json(ASK), {}, False),  # an abbreviation: the parser's to read
    (["prompt", "--client", "vim"], _json(ASK), {}, False),
    (["prompt", "--client", "claude-code"], b"\xff\xfe", {}, False),  # not UTF-8: a bad payload
    (["prompt", "--client", "claude-code"], b"[1, 2]", {}, False),
    (["prompt", "--client", "claude-code"], _json(ASK), {"LOCALMEM_BUDGET_TOKENS": "900"}, False),  # other settings
    (["prompt", "--client", "claude-code"], _json(ASK), {"LOCALMEM_HOOKS_PROMPT_BAR": "x"}, False),  # bad setting
]


def test_a_served_raw_hook_prints_and_counts_what_the_hook_does_with_its_settings(stored: Path) -> None:
    alone = [run(stored, argv, payload, **env) for argv, payload, env, _ in CASES]
    assert not any(r.fast for r in alone)
    server = Server(stored)
    try:
        served = [run(stored, argv, payload, **env) for argv, payload, env, _ in CASES]
        before = [run(stored, argv, payload, entry=True, **env) for argv, payload, env, _ in CASES]
    finally:
        server.stop()
    for (argv, _payload, env, fast), here, now, then in zip(CASES, alone, served, before, strict=True):
        case = (argv, env)
        assert now.code == then.code == here.code == 0 and now.stderr == then.stderr == b"", case
        assert now.fast is fast and not then.fast, case
        assert now.stdout == then.stdout, case  # byte for byte, whichever path the server took
        assert now.stdout == here.stdout, case  # and what the hook computes in-process
        if fast:
            assert now.last == then.last, case  # the same outcome counted, `via: resident` included
        if now.last.get("via") == "resident" or "why" in now.last:
            assert now.last == then.last, case
    replied = [now for now, (_a, _p, _e, fast) in zip(served, CASES, strict=True) if fast and now.stdout]
    # the session start and the prompts in the project's folder (the hook's own folder is another project)
    assert len(replied) == 4 and all(r.last["via"] == "resident" and r.last["outcome"] == "replied" for r in replied)
    assert b"Module 2 returns" in served[1].stdout


def test_no_time_left_is_the_hook_of_before(stored: Path) -> None:
    """A deadline the server cannot meet (0.1 s, less its 0.1 s margin): refused, and the
    hook with its settings counts why; whether the in-process recall then makes it in the
    0.1 s depends on the machine, so only that is compared."""
    server = Server(stored)
    try:
        got = run(stored, ["prompt", "--client", "claude-code"], _json(ASK), LOCALMEM_HOOKS_PROMPT_DEADLINE="0.1")
    finally:
        server.stop()
    assert got.code == 0 and got.stderr == b"" and not got.fast
    assert got.last["resident"] == "no time left" and "via" not in got.last


def test_a_server_of_other_settings_or_a_foreign_socket_costs_nothing(stored: Path) -> None:
    here = run(stored, ["prompt", "--client", "claude-code"], _json(ASK))
    server = Server(stored, env={**os.environ, "LOCALMEM_BUDGET_TOKENS": "900"})  # a daemon of another fingerprint
    try:
        other = run(stored, ["prompt", "--client", "claude-code"], _json(ASK))
        assert not other.fast and other.stdout == here.stdout and other.last["resident"] == "settings"
        server.path.parent.chmod(0o755)  # a folder others may enter: not asked at all
        try:
            opened = run(stored, ["prompt", "--client", "claude-code"], _json(ASK), LOCALMEM_BUDGET_TOKENS="900")
        finally:
            server.path.parent.chmod(0o700)
        assert not opened.fast and opened.last["resident"] == "no socket"
        if os.getuid() == 0:  # root may give the socket file to another user: not asked either
            os.chown(server.path, 12345, -1)
            try:
                foreign = run(stored, ["prompt", "--client", "claude-code"], _json(ASK), LOCALMEM_BUDGET_TOKENS="900")
            finally:
                os.chown(server.path, 0, -1)
            assert not foreign.fast and foreign.last["resident"] == "no socket" and foreign.code == 0
    finally:
        server.stop()


@pytest.mark.parametrize(
    "reply",
    [b"not json\n", b'{"ok": true, "left": 5}\n{"ok": true, "stdout": 3}\n', b'{"ok": true, "left": 5}\n', None],
)
def test_a_garbling_or_stale_socket_falls_back(stored: Path, reply: bytes | None) -> None:
    here = run(stored, ["prompt", "--client", "claude-code"], _json(ASK))
    path = wire.socket_path(stored)
    assert path is not None and wire.private_folder(path.parent, create=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    if reply is None:  # a socket file nobody accepts on: a server killed with SIGKILL
        sock.close()
    else:
        sock.listen(4)

    def answer() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(1 << 20)
                conn.sendall(reply or b"")

    import threading

    if reply is not None:
        threading.Thread(target=answer, daemon=True).start()
    try:
        got = run(stored, ["prompt", "--client", "claude-code"], _json(ASK))
    finally:
        sock.close()
        path.unlink(missing_ok=True)
    assert got.code == 0 and not got.fast and got.stdout == here.stdout and got.stderr == b""
    assert got.last["outcome"] == "replied" and "via" not in got.last


@pytest.mark.skipif(not keys.encryption_available(), reason="needs apsw-sqlite3mc")
def test_an_encrypted_store_is_never_asked_raw(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("correct horse battery staple\n", "utf-8")
    key_file.chmod(0o600)
    keyed = {keys.KEY_FILE_ENV: str(key_file)}
    db = tmp_path / "enc.db"
    log = tmp_path / f"{SESSION}.jsonl"
    log.write_text("\n".join(agent_logs.transcript(SESSION, CWD, 4)) + "\n", "utf-8")
    assert hook(db, "stop", {"session_id": SESSION, "transcript_path": str(log), "cwd": CWD}, **keyed).returncode == 0
    assert keys.is_encrypted(db)
    server = Server(db, env={**os.environ, **keyed})
    try:
        with_key = run(db, ["prompt", "--client", "claude-code"], _json(ASK), **keyed)
        bare_env = {k: v for k, v in os.environ.items() if k not in (keys.KEY_FILE_ENV, keys.KEY_ENV)}
        proc = subprocess.run(
            [sys.executable, "-m", "localmem.hooks", "--db", str(db), "prompt", "--client", "claude-code"],
            input=_json(ASK),
            capture_output=True,
            env=bare_env,
            timeout=300,
        )
    finally:
        server.stop()
    # with the key: the settings are loaded, then the server answers op `hook` (the key rules are the caller's)
    assert not with_key.fast and b"Module 2 returns" in with_key.stdout and with_key.last["via"] == "resident"
    assert proc.returncode == 0 and proc.stdout == b"" and status.read(db)["last_error"]["kind"] == "key missing"


def test_the_fast_path_imports_the_standard_library_only() -> None:
    names = imported_by("localmem.hooks.__main__, localmem.hooks.quick")  # __main__ imports quick once stdin is read
    ours = {"localmem.hooks.quick", "localmem.hooks.status", "localmem.resident.quick", "localmem.resident.unix"}
    ours.add("localmem.hooks.detach")  # an ingest event's fork, before the fast path: `os` only
    assert ours <= names
    mine = {n for n in names if n.startswith("localmem")}
    assert mine <= ours | {"localmem", "localmem.hooks", "localmem.hooks.__main__", "localmem.resident"}, mine
    others = {n for n in names - mine if n.split(".")[0] not in sys.stdlib_module_names}
    assert not others, others
    costly = {"typing", "hashlib", "tomllib", "argparse", "pathlib", "dataclasses", "socket", "selectors"}
    assert not costly & names


def test_what_the_fast_path_spells_agrees_with_its_sources() -> None:
    assert quick.MAX_PAYLOAD == events.MAX_PAYLOAD and quick.EVENTS == wire.HOOK_EVENTS


@pytest.mark.parametrize(
    ("argv", "split"),
    [
        (["prompt", "--client", "codex"], (None, "prompt")),
        (["--db", "a.db", "session-start", "--client=gemini"], ("a.db", "session-start")),
        (["--db=a.db", "--client", "x", "--db", "b.db", "stop"], ("b.db", "stop")),
        (["prompt"], None),
        (["--client", "codex"], None),
        (["prompt", "--client"], None),
        (["prompt", "--client", "-x"], None),
        (["prompt", "extra", "--client", "codex"], None),
        (["prompt", "--cl", "codex"], None),
        (["prompt", "--client", "codex", "--"], None),
        (["--db", "a.db", "--key-file", "/k", "stop", "--client", "codex"], ("a.db", "stop")),  # hooks install's
        (["--key-file=/k", "prompt", "--client", "codex"], (None, "prompt")),
        (["prompt", "--client", "codex", "--key-file"], None),
        ([], None),
    ],
)
def test_only_the_hook_line_of_its_two_options_goes_fast(argv: list[str], split: tuple[str | None, str] | None) -> None:
    assert quick.command_of(argv) == split


def test_the_entry_hooks_install_writes_takes_the_fast_path(stored: Path, tmp_path: Path) -> None:
    """`localmem hooks install` writes a command that the fast path reads (run as the agent
    runs it: through a shell, the payload on stdin)."""
    target = tmp_path / "settings.json"
    argv = [sys.executable, "-m", "localmem", "--db", str(stored), "hooks", "install", "--client", "claude-code"]
    done = subprocess.run([*argv, "--path", str(target)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (command,) = [h["command"] for h in json.loads(target.read_text("utf-8"))["hooks"]["UserPromptSubmit"][0]["hooks"]]
    server = Server(stored)
    try:
        proc = subprocess.run(
            command,
            shell=True,
            input=_json(ASK),
            capture_output=True,
            timeout=300,
            env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},  # what -X importtime does
        )
    finally:
        server.stop()
    names = {line.rsplit(b"|", 1)[-1].strip() for line in _IMPORT_LINE.findall(proc.stderr)}
    assert proc.returncode == 0 and b"Module 2 returns" in proc.stdout
    assert b"localmem.hooks.quick" in names and b"localmem.config" not in names
    assert status.read(stored)["last_run"]["via"] == "resident"
