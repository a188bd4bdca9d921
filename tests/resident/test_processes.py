"""The fast path with real processes and the real embedder: `localmem serve --transport
socket` holds the store, `localmem query` / `recall` ask it; killed, a stale socket; two
stores; and what a process served over the socket imports (no numpy, no model)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localmem.cli import COMMANDS
from localmem.config import Settings
from localmem.resident import wire
from localmem.storage.engine import keys
from tests.helpers.resident import HEAVY, Server, answers

SAMPLE = Path(__file__).resolve().parents[2] / "localmem" / "data" / "sample_conversation.jsonl"
QUESTION = "Which shoes did Maya switch to?"
# What a query answered over the socket must not load (the point of the fast path).


def localmem(*args: str, db: Path, stdin: str | None = None, env: dict[str, str] | None = None) -> str:
    proc = cli(*args, db=db, stdin=stdin, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def cli(
    *args: str, db: Path, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        env=env or os.environ.copy(),
    )


def recall(db: Path, env: dict[str, str] | None = None) -> dict[str, object]:
    out = json.loads(localmem("recall", "--json", db=db, stdin=json.dumps({"prompt": QUESTION}), env=env))
    assert isinstance(out, dict)
    return out


@pytest.fixture
def stores(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for db in (a, b):
        localmem("ingest", str(SAMPLE), db=db)
    return a, b


def test_served_killed_stale_and_back(stores: tuple[Path, Path]) -> None:
    db = stores[0]
    alone = recall(db)
    assert alone["via"] == "in-process"
    query_alone = localmem("query", QUESTION, "--json", db=db)

    server = Server(db)
    try:
        served = recall(db)
        assert served["via"] == "resident" and served["context"] == alone["context"]
        assert localmem("query", QUESTION, "--json", db=db) == query_alone  # byte for byte
        assert os.stat(server.path).st_mode & 0o777 == 0o600
        assert server.path.parent.stat().st_mode & 0o777 == 0o700
        assert not imported_heavy(db)  # and the process served over the socket stayed light
    finally:
        server.stop(signal.SIGKILL)

    assert server.path.exists()  # killed: the socket file stays behind, nobody answers on it
    stale = recall(db)
    assert stale["via"] == "in-process" and stale["context"] == alone["context"]

    again = Server(db)  # a new server replaces the stale socket
    try:
        assert recall(db)["via"] == "resident"
    finally:
        again.stop()
    assert not again.path.exists()  # stopped cleanly: the socket is gone
    assert recall(db)["via"] == "in-process"


def test_two_stores_each_their_own(stores: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = stores
    server = Server(a)
    try:
        assert recall(a)["via"] == "resident"
        assert recall(b)["via"] == "in-process"  # no server of b; a's does not answer for it
        env = {**os.environ, "LOCALMEM_RETRIEVAL_CABLE": "false"}
        assert recall(a, env)["via"] == "in-process"  # other reading settings: read in-process
    finally:
        server.stop()


def test_fast_path_of_the_default_store(tmp_path: Path) -> None:
    """Without --db: the client finds the server of the configured store."""
    db = Settings().db
    assert str(db).startswith(os.environ["XDG_DATA_HOME"])
    localmem("ingest", str(SAMPLE), db=db)
    server = Server(db)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "localmem", "recall", "--json"],
            input=json.dumps({"query": QUESTION}),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert json.loads(proc.stdout)["via"] == "resident"
    finally:
        server.stop()


def imported_heavy(db: Path) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "localmem", "--db", str(db), "query", QUESTION],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    names = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    return [n for n in names if n.split(".")[0] in HEAVY or n.startswith(HEAVY)]


def test_help_imports_no_command() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "localmem", "--help"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and "recall" in proc.stdout
    names = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    commands = {f"localmem.cli.{c.module}" for c in COMMANDS}
    assert not [n for n in names if n.startswith(HEAVY) or n in commands], names


@pytest.mark.skipif(not keys.encryption_available(), reason="needs apsw-sqlite3mc")
def test_an_encrypted_store_is_served_only_to_who_has_its_key(tmp_path: Path) -> None:
    """The server holds the store open with its key; a caller without the key (or with a
    wrong one) gets the same one-line error it gets without a server, never an answer."""
    key = "correct horse battery staple"
    plain = {k: v for k, v in os.environ.items() if k not in (keys.KEY_ENV, keys.KEY_FILE_ENV)}
    keyed = {**plain, keys.KEY_ENV: key}
    db = tmp_path / "enc.db"
    localmem("ingest", str(SAMPLE), db=db, env=keyed)
    assert keys.is_encrypted(db)
    server = Server(db, env=keyed)
    try:
        assert recall(db, keyed)["via"] == "resident"
        for env, says in ((plain, "this store is encrypted"), ({**plain, keys.KEY_ENV: "not it"}, "does not open")):
            proc = cli("recall", "--json", db=db, stdin=json.dumps({"prompt": QUESTION}), env=env)
            assert proc.returncode == 2 and says in proc.stderr and not proc.stdout, proc.stderr
    finally:
        server.stop()


def test_the_mcp_server_answers_on_the_socket_too(tmp_path: Path) -> None:
    """`localmem serve` (stdio, what desktop clients start) serves the socket beside MCP,
    and removes it when its client goes away (stdin closed)."""
    db = tmp_path / "m.db"
    localmem("ingest", str(SAMPLE), db=db)
    proc = subprocess.Popen(
        [sys.executable, "-m", "localmem", "--db", str(db), "serve", "--no-worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    path = wire.socket_path(db)
    assert path is not None
    try:
        deadline = time.monotonic() + 120
        while not answers(path):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
        assert recall(db)["via"] == "resident"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()  # the MCP client hangs up
        proc.wait(60)
    assert not path.exists()
    assert recall(db)["via"] == "in-process"
