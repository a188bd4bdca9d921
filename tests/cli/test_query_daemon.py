"""The daemon ``localmem query`` and ``localmem recall`` leave behind (``query.daemon_idle``),
with real processes, the real embedder and real daemons: a query read in-process starts one
once its answer is out, and the next query is answered through it byte for byte; two first
queries at once start one; ``--no-daemon``, 0, ``--help``, ``--batch``, an error, a new
store and a server that refused the caller start none; the daemon exits when idle, and
when its store file is deleted or replaced; encrypt, decrypt and restore --force stop it
first, never a server someone started.

Whether the fast entry answered (through the daemon) is read from ``-X importtime``
(``tests.helpers.fastentry``). Every daemon a test started is killed when it ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from localmem.resident import daemon, wire
from tests.helpers.fastentry import Q, ingest, run
from tests.helpers.replica import env as replica_env
from tests.helpers.replica import needs_litestream
from tests.helpers.resident import Server, answers, daemons


def on(idle: str = "600") -> dict[str, str]:
    """This test process's environment with the query daemon on (tests/conftest.py turns it off)."""
    return {**os.environ, "LOCALMEM_QUERY_DAEMON_IDLE": idle}


def served(db: Path) -> bool:
    path = wire.socket_path(db)
    assert path is not None
    return answers(path)


def wait_for(what: Callable[[], bool], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.2)


@pytest.fixture
def stored(tmp_path: Path) -> Iterator[Path]:
    """The sample conversation in a store; every daemon started for it (or for ``new.db``
    beside it) is killed afterwards."""
    db = tmp_path / "s.db"
    ingest(db)
    yield db
    for store in (db, tmp_path / "new.db"):
        for pid in daemons(store):
            os.kill(pid, signal.SIGKILL)


def test_a_query_leaves_a_daemon_that_answers_the_next_byte_for_byte(stored: Path, tmp_path: Path) -> None:
    first = run(["query", Q, "--json"], db=stored, cwd=tmp_path, env=on())
    assert first.code == 0 and first.full_cli  # read in-process: no daemon was there
    (pid,) = daemons(stored)  # started before the query exited (a fork and exec)
    wait_for(lambda: served(stored))
    said = daemon.describe(stored)  # `localmem doctor`'s resident line
    assert f"a daemon (pid {pid})" in said and "600 s" in said and f"kill {pid}" in said
    second = run(["query", Q, "--json"], db=stored, cwd=tmp_path, env=on())
    assert not second.full_cli  # the fast entry was answered over the socket
    assert (second.stdout, second.stderr, second.code) == (first.stdout, first.stderr, first.code)
    plain = [run(["query", Q], db=stored, cwd=tmp_path, env=on(idle)) for idle in ("600", "0")]
    assert not plain[0].full_cli and not plain[1].full_cli  # the setting is not a reading setting
    assert plain[0].stdout == plain[1].stdout and json.loads(first.stdout)["text"] in plain[0].stdout.decode()
    assert daemons(stored) == [pid]  # a served query starts nothing


def test_recall_leaves_one_too(stored: Path, tmp_path: Path) -> None:
    payload = json.dumps({"prompt": Q}).encode()
    first = run(["recall", "--json"], db=stored, stdin=payload, cwd=tmp_path, env=on())
    assert json.loads(first.stdout)["via"] == "in-process" and len(daemons(stored)) == 1
    wait_for(lambda: served(stored))
    second = run(["recall", "--json"], db=stored, stdin=payload, cwd=tmp_path, env=on())
    assert not second.full_cli
    assert json.loads(second.stdout) == json.loads(first.stdout) | {"via": "resident"}


def test_two_first_queries_at_once_start_one_daemon(stored: Path) -> None:
    argv = [sys.executable, "-m", "localmem", "--db", str(stored), "query", Q]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=on()) for _ in range(3)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs) and len(set(outs)) == 1
    # at once: a second daemon started beside the first (no lock) would still be loading the
    # store, and would only find the socket taken once it tried to serve, then exit
    assert len(daemons(stored)) == 1
    wait_for(lambda: served(stored))
    time.sleep(1)
    assert len(daemons(stored)) == 1


ASK = json.dumps({"prompt": Q}).encode()


@pytest.mark.parametrize(
    ("args", "idle", "stdin", "code"),
    [
        (["query", Q, "--no-daemon"], "600", None, 0),
        (["recall", "--no-daemon"], "600", ASK, 0),
        (["query", Q], "0", None, 0),
        (["recall"], "0", ASK, 0),
        (["query", "--help"], "600", None, 0),
        (["query", "--batch", "batch.jsonl"], "600", None, 0),
        (["query", Q, "--budget", "0"], "600", None, 3),  # an error: nothing was read
        (["recall"], "600", b"{", 3),  # not JSON: nothing was read
        (["recall"], "600", b'{"prompt": " "}', 0),  # nothing to recall: nothing was read
    ],
)
def test_none_is_started(
    stored: Path, tmp_path: Path, args: list[str], idle: str, stdin: bytes | None, code: int
) -> None:
    (tmp_path / "batch.jsonl").write_text(json.dumps({"query": Q}) + "\n", "utf-8")
    done = run(args, db=stored, stdin=stdin, cwd=tmp_path, env=on(idle))
    assert done.code == code, done.stderr
    assert not daemons(stored) and not served(stored)  # a started one would be there before the command exited


def test_a_new_store_gets_none(stored: Path, tmp_path: Path) -> None:
    new = tmp_path / "new.db"
    done = run(["query", Q], db=new, cwd=tmp_path, env=on())
    assert done.code == 0 and new.exists()  # the query made the store, empty
    assert not daemons(new)


def test_a_server_that_refused_the_caller_gets_no_daemon_beside_it(stored: Path, tmp_path: Path) -> None:
    server = Server(stored)
    try:
        other = run(["query", Q, "--no-cable"], db=stored, cwd=tmp_path, env=on())  # other reading settings
        assert other.code == 0 and other.full_cli
        assert not daemons(stored) and server.proc.poll() is None
        assert f"pid {server.proc.pid} serves this store (`localmem serve`" in daemon.describe(stored)
    finally:
        server.stop()


def test_the_daemon_exits_when_idle(stored: Path, tmp_path: Path) -> None:
    assert run(["query", Q], db=stored, cwd=tmp_path, env=on("3")).code == 0
    assert len(daemons(stored)) == 1
    wait_for(lambda: served(stored))
    path = wire.socket_path(stored)
    assert path is not None
    wait_for(lambda: not daemons(stored), 90)  # 3 idle seconds, then it exits and removes its socket
    assert not path.exists()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_the_daemon_exits_when_its_store_is_gone(stored: Path, tmp_path: Path, how: str) -> None:
    assert run(["query", Q], db=stored, cwd=tmp_path, env=on("600")).code == 0
    wait_for(lambda: served(stored))
    (pid,) = daemons(stored)
    if how == "deleted":
        stored.unlink()
    else:
        copy = tmp_path / "copy.db"
        copy.write_bytes(stored.read_bytes())
        os.replace(copy, stored)  # another file (inode) at the path
    wait_for(lambda: pid not in daemons(stored), 30)  # its next idle check (every 5 s), not 600 s
    log = wire.socket_path(stored)
    assert log is not None
    assert "deleted or replaced" in log.with_suffix(".log").read_text("utf-8")


def test_encrypt_and_decrypt_stop_the_daemon_a_query_left_but_never_a_server(stored: Path, tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("correct horse battery staple\n", "utf-8")
    key_file.chmod(0o600)
    keyed = on() | {"LOCALMEM_KEY_FILE": str(key_file)}

    def cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "localmem", "--db", str(stored), *argv]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)

    assert run(["query", Q], db=stored, cwd=tmp_path, env=on()).code == 0
    (pid,) = daemons(stored)
    wait_for(lambda: served(stored))
    done = cli("encrypt", env=keyed)  # the daemon holds the store open: encrypt needs it alone
    assert done.returncode == 0, done.stderr
    assert f"stopped the store's resident daemon (pid {pid})" in done.stderr and daemons(stored) == []
    assert cli("query", Q, env=keyed).returncode == 0  # an encrypted store whose key opens gets its daemon
    (again,) = daemons(stored)
    wait_for(lambda: served(stored))
    done = cli("decrypt", env=keyed)
    assert done.returncode == 0 and f"(pid {again})" in done.stderr and daemons(stored) == []
    # a server someone started is theirs: encrypt names it instead of stopping it
    server = Server(stored, env=on())
    try:
        refused = cli("encrypt", env=keyed)
        assert refused.returncode != 0 and "is open in another process" in refused.stderr
        assert "localmem doctor" in refused.stderr and server.proc.poll() is None
    finally:
        server.stop()


@needs_litestream
def test_restore_force_over_the_store_stops_its_daemon_first(stored: Path, tmp_path: Path) -> None:
    rep = f"file://{tmp_path / 'rep'}"

    def cli(*argv: str, db: Path = stored) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "localmem", "--db", str(db), *argv]
        return subprocess.run(cmd, capture_output=True, text=True, env=replica_env(), timeout=300)

    once = cli("replicate", "--to", rep, "--once")
    assert once.returncode == 0, once.stderr
    assert run(["query", Q], db=stored, cwd=tmp_path, env=on()).code == 0
    (pid,) = daemons(stored)
    wait_for(lambda: served(stored))
    done = cli("restore", "--from", rep, "--force", str(stored), db=tmp_path / "other.db")
    assert done.returncode == 0, done.stderr  # the daemon held the file: replacing it needs it alone
    assert f"stopped the store's resident daemon (pid {pid})" in done.stderr and daemons(stored) == []
    assert run(["query", Q, "--no-daemon"], db=stored, cwd=tmp_path).code == 0  # the restored store reads
