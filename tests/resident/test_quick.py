"""The fast entry (`localmem.resident.quick`) with real processes, the real embedder and a
real `localmem serve --transport socket`: a raw command line answered by the server prints
byte for byte what the command prints in-process, and everything unusual (--help, a bad
flag, other settings, a stale or foreign socket, an encrypted store) falls back to the full
CLI, which answers as it does without a server.

Whether the fast entry answered is read from `-X importtime`: a process it answered never
imports `localmem.cli`."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from dataclasses import fields
from pathlib import Path

import pytest

from localmem import __main__ as localmem_main
from localmem.resident import quick, unix, wire
from localmem.storage.engine import keys
from tests.helpers.fastentry import Q, imported_by, ingest, run
from tests.helpers.resident import Server

# (argv after --db, stdin, whether the fast entry answers it)
CASES: list[tuple[list[str], bytes | None, bool]] = [
    (["query", Q], None, True),
    (["query", Q, "--json"], None, True),
    (["query", "--budget", "120", Q, "--json"], None, True),
    (["query", Q, "--as-of", "2024-04-01"], None, True),
    (["query", "Wohin reist Maya — «Lisbon» ✓ 東京?", "--budget=300"], None, True),
    (["query", "shoes\nknee\n\nphysio?", "--json"], None, True),
    (["query", Q, "--scope", "project:elsewhere"], None, True),
    (["query", Q, "--project", "."], None, True),
    (["query", Q, "--cable-tau", "0.3"], None, True),  # the default: the same settings
    (["query", "zzqx unrelated nothing"], None, True),
    (["query", Q, "--no-daemon"], None, True),  # served as the others: the flag only matters in-process
    (["recall"], json.dumps({"prompt": Q}).encode(), True),
    (["recall", "--json"], json.dumps({"query": Q, "budget": 200}).encode(), True),
    (["recall", "--no-daemon"], json.dumps({"prompt": Q}).encode(), True),
    (["recall"], json.dumps({"prompt": "   "}).encode(), True),  # nothing to recall: nothing printed
    (["query", Q, "--no-cable"], None, False),  # other reading settings: refused, in-process
    (["query", "--help"], None, False),
    (["query", Q, "--bogus"], None, False),
    (["query"], None, False),  # no question: the command's own error
    (["query", Q, "--budget", "x"], None, False),
    (["query", Q, "--batch", "b.jsonl"], None, False),
    (["recall"], b"\xff\xfe", False),  # not UTF-8: the command says so
    (["recall"], b'{"prompt": 3}', False),
    (["--embedder", "default", "query", Q], None, True),
    (["--key-file", "k", "query", Q], None, False),
]


def test_served_output_is_the_in_process_output_byte_for_byte(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ingest(db)
    alone = [run(args, db=db, stdin=stdin, cwd=tmp_path) for args, stdin, _ in CASES]
    assert all(r.full_cli for r in alone)
    server = Server(db)
    try:
        served = [run(args, db=db, stdin=stdin, cwd=tmp_path) for args, stdin, _ in CASES]
        # the full CLI asking the same server as it did before the fast entry (op `context`)
        today = [run(args, db=db, stdin=stdin, cwd=tmp_path, full=True) for args, stdin, _ in CASES]
        # a relative store named by $LOCALMEM_DB, from the store's folder
        again = run(["query", Q], db=None, cwd=tmp_path, env={**os.environ, "LOCALMEM_DB": "s.db"})
    finally:
        server.stop()
    for (args, _stdin, fast), before, now, after in zip(CASES, alone, today, served, strict=True):
        assert (after.stdout, after.stderr, after.code) == (now.stdout, now.stderr, now.code), args
        assert after.full_cli is not fast, args
        if args == ["recall", "--json"]:  # says where it was read
            assert json.loads(after.stdout) == json.loads(before.stdout) | {"via": "resident"}
        else:
            assert (after.stdout, after.stderr, after.code) == (before.stdout, before.stderr, before.code), args
    assert not again.full_cli and again.stdout == alone[0].stdout


def test_recall_log_records_a_served_query_as_the_cli_did(tmp_path: Path) -> None:
    from localmem.config import Settings
    from localmem.memory import open_store
    from localmem.storage.layers import recalls

    db = tmp_path / "s.db"
    ingest(db)
    in_process = run(["query", Q, "--project", "."], db=db, cwd=tmp_path)
    server = Server(db)
    try:
        fast = run(["query", Q, "--project", "."], db=db, cwd=tmp_path)
        hook = run(["recall"], db=db, cwd=tmp_path, stdin=json.dumps({"prompt": Q}).encode())
    finally:
        server.stop()
    assert in_process.full_cli and not fast.full_cli and not hook.full_cli
    with open_store(Settings(db=db)) as store:
        calls = recalls.calls(store.conn, 10, 0).items
    assert len(calls) == 3
    recall_call, fast_call, in_process_call = calls  # newest first
    assert fast_call[2:] == in_process_call[2:]  # all but the id and the time
    assert (fast_call.client, fast_call.tool, fast_call.project) == ("cli", "query", str(tmp_path))
    assert (fast_call.scope, fast_call.query) == (f"project:{tmp_path}", Q)
    assert (recall_call.client, recall_call.tool, recall_call.query) == ("cli", "recall", Q)


def test_a_server_of_other_settings_is_refused_and_the_answer_read_in_process(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ingest(db)
    alone = run(["query", Q, "--json"], db=db, cwd=tmp_path)
    other = {**os.environ, "LOCALMEM_RETRIEVAL_CABLE_TAU": "0.5"}
    server = Server(db, env=other)
    try:
        refused = run(["query", Q, "--json"], db=db, cwd=tmp_path)  # this caller's settings are not the server's
        mine = run(["query", Q, "--json"], db=db, cwd=tmp_path, env=other)  # and a caller of the server's settings
    finally:
        server.stop()
    assert refused.full_cli and refused.stdout == alone.stdout and refused.code == 0
    assert not mine.full_cli and mine.code == 0


def test_the_store_named_in_the_config_file_is_found(tmp_path: Path) -> None:
    db = tmp_path / "conf.db"
    ingest(db)
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "localmem" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'db = "{db}"\n', "utf-8")
    alone = run(["query", Q], db=None, cwd=tmp_path)
    server = Server(db)
    try:
        fast = run(["query", Q], db=None, cwd=tmp_path)
        config.write_text(f'db = "{db}"\n[retrieval]\ncable_tau = 0.6\n', "utf-8")  # changed: loaded again
        changed = run(["query", Q], db=None, cwd=tmp_path)
    finally:
        server.stop()
    assert not fast.full_cli and fast.stdout == alone.stdout
    assert changed.full_cli and changed.code == 0


def test_a_stale_socket_falls_back(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ingest(db)
    alone = run(["query", Q], db=db, cwd=tmp_path)
    path = wire.socket_path(db)
    assert path is not None and wire.private_folder(path.parent, create=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # a socket file nobody accepts on: a server killed with SIGKILL
    dead.close()
    stale = run(["query", Q], db=db, cwd=tmp_path)
    assert stale.full_cli and (stale.stdout, stale.stderr, stale.code) == (alone.stdout, alone.stderr, alone.code)


def test_an_open_folder_or_a_foreign_socket_is_not_used(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ingest(db)
    alone = run(["query", Q], db=db, cwd=tmp_path)
    server = Server(db)
    try:
        assert not run(["query", Q], db=db, cwd=tmp_path).full_cli
        server.path.parent.chmod(0o755)
        try:
            opened = run(["query", Q], db=db, cwd=tmp_path)
        finally:
            server.path.parent.chmod(0o700)
        foreign = None
        if os.getuid() == 0:  # root may give the socket file to another user
            os.chown(server.path, 12345, -1)
            try:
                foreign = run(["query", Q], db=db, cwd=tmp_path)
            finally:
                os.chown(server.path, 0, -1)
    finally:
        server.stop()
    for got in (opened, foreign):
        if got is not None:
            assert got.full_cli and got.stdout == alone.stdout and got.code == 0


@pytest.mark.skipif(not keys.encryption_available(), reason="needs apsw-sqlite3mc")
def test_an_encrypted_store_takes_the_full_path(tmp_path: Path) -> None:
    key = "correct horse battery staple"
    plain = {k: v for k, v in os.environ.items() if k not in (keys.KEY_ENV, keys.KEY_FILE_ENV)}
    keyed = {**plain, keys.KEY_ENV: key}
    db = tmp_path / "enc.db"
    ingest(db, keyed)
    assert keys.is_encrypted(db)
    alone = run(["query", Q, "--json"], db=db, cwd=tmp_path, env=keyed)
    server = Server(db, env=keyed)
    try:
        with_key = run(["query", Q, "--json"], db=db, cwd=tmp_path, env=keyed)
        without = run(["query", Q, "--json"], db=db, cwd=tmp_path, env=plain)
    finally:
        server.stop()
    assert with_key.full_cli and with_key.stdout == alone.stdout and with_key.code == 0
    assert without.full_cli and without.code == 2 and not without.stdout
    assert b"this store is encrypted" in without.stderr


def test_the_fast_entry_imports_the_standard_library_only() -> None:
    names = imported_by("localmem.resident.quick")
    ours = {"localmem", "localmem.resident", "localmem.resident.unix", "localmem.resident.quick"}
    assert ours <= names
    others = {n for n in names - ours if n.split(".")[0] not in sys.stdlib_module_names}
    assert not others, others
    costly = {"typing", "hashlib", "tomllib", "argparse", "pathlib", "dataclasses", "socket", "selectors"}
    assert not costly & names


def test_what_the_fast_entry_spells_agrees_with_its_sources() -> None:
    from localmem import config
    from localmem.cli import query

    assert all(quick.secret(n) for n in (*keys.SECRET_ENV, "LOCALMEM_S3_SECRET", "LOCALMEM_API_KEY"))
    settings_vars = [config.env_name(f.name) for f in fields(config.Settings) if f.name not in config.SECTIONS]
    settings_vars += [config.env_name(f"{s}.{f.name}") for s, cls in config.SECTIONS.items() for f in fields(cls)]
    assert not [n for n in settings_vars if quick.secret(n)]  # a setting is always sent
    assert (unix.APP, unix.SQLITE_MAGIC, quick.MAX_STDIN) == (config.APP, keys.SQLITE_MAGIC, query.MAX_STDIN)
    assert quick.COMMANDS == localmem_main.FAST


# the environments both folder rules are checked in (a HOME of each system's own shape added)
FOLDER_ENVS: list[dict[str, str]] = [
    {},
    {"XDG_DATA_HOME": "/srv/data", "XDG_CONFIG_HOME": "/srv/conf/"},
    {"XDG_DATA_HOME": "relative/data", "XDG_CONFIG_HOME": ""},
]


@pytest.mark.parametrize("env", [*FOLDER_ENVS, {"HOME": "/home/someone/"}])
def test_the_user_folders_are_platformdirs_own(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    import platformdirs

    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert unix.user_data_dir() == platformdirs.user_data_dir("localmem")
    assert unix.user_config_dir() == platformdirs.user_config_dir("localmem")
    assert quick.store_path(None) == str(config_default_db())


@pytest.mark.parametrize("env", [*FOLDER_ENVS, {"HOME": "/Users/someone/"}])
def test_the_user_folders_on_macos_are_platformdirs_own(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule for macOS against platformdirs' own macOS class (it computes its folders
    from the environment and ``~``, so it runs here too)."""
    from platformdirs.macos import MacOS

    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(unix.sys, "platform", "darwin")
    mac = MacOS("localmem")
    assert unix.user_data_dir() == mac.user_data_dir
    assert unix.user_config_dir() == mac.user_config_dir
    assert unix.runtime_dir() == os.path.join(mac.user_data_dir, "run")  # wire.runtime_dir's rule
    monkeypatch.setattr(unix.sys, "platform", "win32")
    assert unix.user_data_dir() is None and unix.user_config_dir() is None  # not spelled out: the full CLI


def config_default_db() -> Path:
    from localmem.config import default_db_path

    return default_db_path()


@pytest.mark.parametrize(
    ("argv", "split"),
    [
        (["query", "q"], (None, "query")),
        (["--db", "a.db", "recall"], ("a.db", "recall")),
        (["--db=a.db", "--embedder", "e", "--db", "b.db", "query", "--db", "x"], ("b.db", "query")),
        (["--db", "-x", "query"], None),
        (["--key-file", "k", "query"], None),
        (["--age-identity=k", "query"], None),
        (["--version"], None),
        (["serve"], None),
        (["--db"], None),
        ([], None),
    ],
)
def test_only_the_two_commands_with_their_two_global_flags_go_fast(
    argv: list[str], split: tuple[str | None, str] | None
) -> None:
    assert quick.command_of(argv) == split


def test_no_secret_travels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the fast entry sends, read by a listener on the store's socket: the settings'
    variables, never a key, a key file's path, a passphrase or a token."""
    db = tmp_path / "s.db"
    db.write_bytes(unix.SQLITE_MAGIC + bytes(4080))  # a plaintext store's first page, as far as the client reads
    secrets = {n: f"secret-value-{i}" for i, n in enumerate((*keys.SECRET_ENV, "LOCALMEM_S3_SECRET"))}
    for name, value in {**secrets, "LOCALMEM_RETRIEVAL_CABLE_TAU": "0.4"}.items():
        monkeypatch.setenv(name, value)
    path = wire.socket_path(db)
    assert path is not None and wire.private_folder(path.parent, create=True)
    got: list[bytes] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen(1)
        listener.settimeout(30)

        def answer() -> None:
            conn, _ = listener.accept()
            with conn:
                got.append(unix.read_line(conn, unix.MAX_LINE))
                conn.sendall(unix.encode({"ok": False, "why": "settings"}))

        thread = threading.Thread(target=answer)
        thread.start()
        assert quick.run(["--db", str(db), "query", "q"]) is None  # refused: nothing written, the full CLI's turn
        thread.join(30)
    request = unix.decode(got[0])
    assert request["op"] == "cli" and request["argv"] == ["--db", str(db), "query", "q"]
    assert request["env"]["LOCALMEM_RETRIEVAL_CABLE_TAU"] == "0.4"
    assert not [s for s in (*secrets, *secrets.values()) if s.encode() in got[0]]
