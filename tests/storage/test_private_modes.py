"""Private by default (issue 49): whatever the umask, what localmem creates is its user's
alone: files 600 (a new store and the -wal/-shm SQLite makes beside it, backups plain and
age, exports, snapshots, restores, the replica's config, sync segments, the hooks' status
file, the settings and scorer files it writes), folders it made 700, and folders the user
already had left as they were. The commands run as real `localmem` processes under the
umask (``subprocess``'s ``umask``), on real files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from localmem.config import Settings
from localmem.hooks import status
from localmem.retrieval.scorer import DEFAULT_WEIGHTS
from localmem.retrieval.scorer_file import write_weights
from localmem.storage.engine import checkpoints
from localmem.sync import folder as sync_folder
from localmem.util import private
from mcp_server import clientconfig
from tests.helpers.cli import jsonl_lines
from tests.helpers.replica import needs_litestream

UMASKS = [0o022, 0o000]
# an age recipient whose identity nobody needs here: the test reads only the file's mode
RECIPIENT = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def cli(*args: str | Path, umask: int) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "localmem", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
        umask=umask,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    return proc


@pytest.fixture
def umasked() -> Iterator[None]:
    """This process under a permissive umask, for the in-process writers."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _ingest(db: Path, tmp_path: Path, umask: int) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(jsonl_lines(0, 5), "utf-8")
    cli("--db", db, "ingest", log, umask=umask)


@pytest.mark.parametrize("umask", UMASKS)
def test_a_new_store_its_wal_and_what_is_made_from_it_are_private(tmp_path: Path, umask: int) -> None:
    tmp_path.chmod(0o755)  # the user's folder: localmem must leave it as it is
    db = tmp_path / "new" / "sub" / "m.db"
    _ingest(db, tmp_path, umask)
    assert mode(tmp_path) == 0o755
    assert (mode(tmp_path / "new"), mode(db.parent), mode(db)) == (0o700, 0o700, 0o600)

    # SQLite gives the -wal and -shm the db file's mode: seen while a connection holds the store
    old = os.umask(umask)
    try:
        conn = apsw.Connection(str(db))
        try:
            assert conn.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
            conn.execute("SELECT count(*) FROM turns").fetchall()
            sidecars = [Path(f"{db}-wal"), Path(f"{db}-shm")]
            assert all(p.exists() for p in sidecars)
            assert [mode(p) for p in sidecars] == [0o600, 0o600]
        finally:
            conn.close()
    finally:
        os.umask(old)

    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    out.chmod(0o755)
    cli("--db", db, "backup", out / "b.db", umask=umask)
    cli("--db", db, "backup", "--encrypt-to", RECIPIENT, out / "b.age", umask=umask)
    cli("--db", db, "export", "--out", out / "e.jsonl", umask=umask)
    cli("--db", db, "hooks", "install", "--client", "claude-code", umask=umask)
    settings = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    made = [out / "b.db", out / "b.age", out / "e.jsonl", Path(f"{db}-hooks.json"), settings]
    assert {p.name: mode(p) for p in made} == {p.name: 0o600 for p in made}
    assert mode(out) == 0o755 and sorted(p.name for p in out.iterdir()) == ["b.age", "b.db", "e.jsonl"]  # no partials


@pytest.mark.parametrize("umask", UMASKS)
def test_the_default_data_folder_is_made_700(tmp_path: Path, umask: int) -> None:
    data = Path(os.environ["XDG_DATA_HOME"])
    assert not data.exists()
    log = tmp_path / "log.jsonl"
    log.write_text(jsonl_lines(0, 3), "utf-8")
    cli("ingest", log, umask=umask)
    assert (mode(data), mode(data / "localmem"), mode(data / "localmem" / "memory.db")) == (0o700, 0o700, 0o600)


@needs_litestream
@pytest.mark.parametrize("umask", UMASKS)
def test_replicas_snapshots_and_restores_are_private(tmp_path: Path, umask: int) -> None:
    tmp_path.chmod(0o755)
    db = tmp_path / "m.db"
    _ingest(db, tmp_path, umask)
    cli("--db", db, "replicate", "--snapshots", "--once", "--to", f"file://{tmp_path / 'snaps'}", umask=umask)
    cli("--db", db, "replicate", "--once", "--to", f"file://{tmp_path / 'lsrep'}", umask=umask)
    cli("--db", db, "restore", "--from", f"file://{tmp_path / 'snaps'}", tmp_path / "r1.db", umask=umask)
    cli("--db", db, "restore", "--from", f"file://{tmp_path / 'lsrep'}", tmp_path / "r2.db", umask=umask)
    [snapshot] = (tmp_path / "snaps").iterdir()
    config = tmp_path / ".localmem-replica"
    assert (mode(tmp_path / "snaps"), mode(config)) == (0o700, 0o700)
    files = [snapshot, config / "litestream.yml", tmp_path / "r1.db", tmp_path / "r2.db"]
    assert [mode(p) for p in files] == [0o600] * len(files)
    assert mode(tmp_path) == 0o755


def test_in_process_writers_make_600_files_in_700_folders(tmp_path: Path, umasked: None) -> None:
    root = tmp_path / "sync"
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    seg = sync_folder.put(root / "device-a", 1, b"segment")
    assert (mode(root), mode(seg.parent), mode(seg)) == (0o755, 0o700, 0o600)

    scorer = tmp_path / "scorer.json"
    write_weights(scorer, DEFAULT_WEIGHTS, "some-model", {})
    db = tmp_path / "m.db"
    checkpoints.announce(db, os.getpid())
    cfg = tmp_path / "client" / "mcp.json"
    clientconfig.install(Settings(db=db), "cursor", cfg)
    status.record(tmp_path / "fresh" / "m.db", "codex", "prompt", "quiet", ms=1.0)  # no install before
    made = [scorer, checkpoints.marker(db), cfg, Path(status.path_for(tmp_path / "fresh" / "m.db"))]
    assert [mode(p) for p in made] == [0o600] * len(made)
    assert mode(tmp_path / "fresh") == 0o700
    assert json.loads(cfg.read_text("utf-8"))["mcpServers"]["localmem"]


@pytest.mark.parametrize("umask", [0o022, 0o000, 0o277])
def test_the_helpers_defeat_any_umask_and_leave_what_exists(tmp_path: Path, umask: int) -> None:
    tmp_path.chmod(0o751)
    old = os.umask(umask)
    try:
        private.make_private_dir(tmp_path / "a" / "b")
        assert private.reserve(tmp_path / "a" / "b" / "new.db")
        with private.open_private(tmp_path / "a" / "w.txt", "w") as fh:
            fh.write("x")
        leftover = tmp_path / "left.part"
        leftover.write_text("old", "utf-8")
        leftover.chmod(0o644)
        private.write_file(leftover, b"new")
    finally:
        os.umask(old)
    assert mode(tmp_path) == 0o751
    assert (mode(tmp_path / "a"), mode(tmp_path / "a" / "b")) == (0o700, 0o700)
    assert mode(tmp_path / "a" / "b" / "new.db") == 0o600 and (tmp_path / "a" / "b" / "new.db").stat().st_size == 0
    assert mode(tmp_path / "a" / "w.txt") == 0o600 and mode(leftover) == 0o600
    assert leftover.read_bytes() == b"new"


def test_reserve_never_opens_an_existing_store(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    conn = apsw.Connection(str(db))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t(x)")
    before = os.stat(db)
    try:
        # O_EXCL: an existing file (here one a connection holds) is never opened
        assert not private.reserve(db)
        assert not private.reserve(tmp_path)  # a folder: nothing made, nothing raised
    finally:
        conn.close()
    after = os.stat(db)
    assert (after.st_ino, stat.S_IMODE(after.st_mode)) == (before.st_ino, stat.S_IMODE(before.st_mode))


def test_a_path_that_is_a_file_is_refused_as_a_folder(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("", "utf-8")
    with pytest.raises(FileExistsError):
        private.make_private_dir(tmp_path / "f")
    with pytest.raises((FileExistsError, NotADirectoryError)):
        private.make_private_dir(tmp_path / "f" / "below")
