"""Real faults, in real processes: a database file made read-only, a read-only folder, and
a full disk, for CLI ``ingest``, MCP ``remember`` and ``forget`` (a real client session
over stdio), ``watch`` and ``backup``. Each gives one line naming the file and the cause;
reads keep working where they can; nothing acknowledged is lost (turns counted before and
after); nothing is half-written (integrity_check); no stray files (folders listed).

How the faults are made, as root (CI runs as root, and root ignores permissions):
- read-only: the command runs without the capabilities that let root pass permission
  checks (``setpriv --bounding-set=-all``): the kernel then checks the file's and the
  folder's mode bits for it as for any user. (A separate uid would need the interpreter
  and the checkout readable by it; the venv's Python lives under /root.)
- a full disk: a per-process file-size limit (``prlimit --fsize``; Python ignores
  SIGXFSZ, so a write past it fails with EFBIG, which SQLite reports as an I/O error), and
  once a real small file system (tmpfs ``size=``) where mounting is allowed (ENOSPC,
  SQLITE_FULL).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from mcp import Client, StdioServerParameters

from tests.helpers.cli import ROOT, driver, jsonl_lines

UNPRIVILEGED = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"]
COMPANIONS = {"-wal", "-shm"}  # SQLite's own: a -wal may hold commits and must stay


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e["PYTHONDONTWRITEBYTECODE"] = "1"  # the file-size limit is for the database
    e.pop("LOCALMEM_MODEL", None)
    return e


def unprivileged() -> list[str]:
    """The prefix that makes a command meet file permissions (see the module docstring)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed: root cannot be made to meet permissions")
    probe = Path(tempfile.mkdtemp(prefix="localmem-probe-")) / "ro"
    probe.write_text("x")
    probe.chmod(0o444)
    try:
        got = subprocess.run(
            [*UNPRIVILEGED, sys.executable, "-c", f"open({str(probe)!r}, 'a')"], capture_output=True, text=True
        )
    finally:
        shutil.rmtree(probe.parent)
    if "PermissionError" not in got.stderr:
        pytest.skip(f"dropping root's capabilities did not make it meet permissions: {got.stderr[-200:]}")
    return UNPRIVILEGED


def fsize(limit: int) -> list[str]:
    if shutil.which("prlimit") is None:
        pytest.skip("prlimit (util-linux) is not installed: no per-process file-size limit")
    return ["prlimit", f"--fsize={limit}:unlimited", "--"]  # a soft limit: lifted again later without privilege


# 32 KiB for the -shm index (SQLite maps it whole) and a handful of WAL frames: any write
# of a few pages fails, every read works
LIMIT = 36_000


def cli(*args: str, prefix: list[str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(prefix or []), *driver(*args)], capture_output=True, text=True, timeout=timeout, env=env())


def one_line_error(proc: subprocess.CompletedProcess[str], *says: str) -> str:
    assert proc.returncode == 8, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("localmem: error:")]
    assert len(lines) == 1, proc.stderr
    for word in says:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def turns(db: Path) -> int:
    """The turns stored, after integrity_check: nothing half-written. Read as root on a
    read-write connection, which (the last to close) removes the -wal/-shm files, so the
    folder holds the database file alone for the next case."""
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READWRITE)
    try:
        assert [r[0] for r in conn.execute("PRAGMA integrity_check")] == ["ok"]
        return int(conn.execute("SELECT count(*) FROM turns").fetchone()[0])  # type: ignore[index]
    finally:
        conn.close()


def strays(folder: Path, *expected: str) -> set[str]:
    """Files in ``folder`` other than those expected and SQLite's companions of them."""
    allowed = {n for e in expected for n in (e, *(e + c for c in COMPANIONS))}
    return {p.name for p in folder.iterdir()} - allowed


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    """A store of 40 turns (CLI ingest, the test embedder), in a folder of its own."""
    folder = tmp_path / "store"
    folder.mkdir()
    log = tmp_path / "first.jsonl"
    log.write_text(jsonl_lines(0, 40), "utf-8")
    db = folder / "m.db"
    assert cli("--db", str(db), "ingest", str(log), "--json").returncode == 0
    assert turns(db) == 40
    yield db
    folder.chmod(0o755)  # so that pytest can clean up


def read_only(db: Path, what: str) -> None:
    if what in ("file", "both"):
        db.chmod(0o444)
    if what in ("folder", "both"):
        db.parent.chmod(0o555)


# -- CLI ingest, query, stats, backup ------------------------------------------------


@pytest.mark.parametrize("what", ["file", "folder", "both"])
def test_read_only_store_serves_reads_and_refuses_ingest_in_one_line(store: Path, tmp_path: Path, what: str) -> None:
    prefix = unprivileged()
    log = tmp_path / "more.jsonl"
    log.write_text(jsonl_lines(40, 300), "utf-8")
    read_only(store, what)
    before = sorted(p.name for p in store.parent.iterdir())

    got = cli("--db", str(store), "ingest", str(log), prefix=prefix)
    why = {
        "file": "the file is not writable",
        "folder": f"the folder {store.parent} is not writable: SQLite needs it for the -wal/-shm files",
        "both": "the file is not writable; the folder",
    }[what]
    one_line_error(got, f"{store} is read-only (", why)

    query = cli("--db", str(store), "query", "topic 3", "--json", prefix=prefix)
    assert query.returncode == 0, query.stderr
    assert json.loads(query.stdout)["turns"]
    stats = cli("--db", str(store), "stats", "--json", prefix=prefix)
    assert stats.returncode == 0 and json.loads(stats.stdout)["turns"] == 40, stats.stderr
    out = tmp_path / "copy.db"  # a read-only store can be backed up
    assert cli("--db", str(store), "backup", str(out), prefix=prefix).returncode == 0
    assert turns(out) == 40

    assert turns(store) == 40
    if what == "file":  # a reader in a writable folder makes SQLite's -wal/-shm, as any reader does
        assert strays(store.parent, "m.db") == set()
    else:
        assert sorted(p.name for p in store.parent.iterdir()) == before


def test_ingest_on_a_full_disk_says_so_keeps_what_it_stored_and_resumes(store: Path, tmp_path: Path) -> None:
    log = tmp_path / "more.jsonl"
    log.write_text(jsonl_lines(40, 600), "utf-8")  # three batches of 256 turns and the rest
    got = cli("--db", str(store), "ingest", str(log), prefix=fsize(LIMIT))
    one_line_error(got, f"disk full writing {store}: the file size limit was reached")
    after = turns(store)
    assert 40 <= after < 600
    assert strays(store.parent, "m.db") == set()

    query = cli("--db", str(store), "query", "topic 3", "--json", prefix=fsize(LIMIT))
    assert query.returncode == 0 and json.loads(query.stdout)["turns"], query.stderr

    again = cli("--db", str(store), "ingest", str(log), "--json")  # space again: it finishes
    assert again.returncode == 0, again.stderr
    assert turns(store) == 600


def test_backup_to_a_full_destination_names_it_and_leaves_nothing(store: Path, tmp_path: Path) -> None:
    dest_dir = tmp_path / "out"
    dest_dir.mkdir()
    dest = dest_dir / "b.db"
    size = store.stat().st_size
    got = cli("--db", str(store), "backup", str(dest), prefix=fsize(size // 2))
    line = one_line_error(got, f"disk full writing {dest}: the file size limit was reached")
    assert "not an error" not in line
    assert list(dest_dir.iterdir()) == []
    assert turns(store) == 40 and strays(store.parent, "m.db") == set()


def test_backup_to_a_small_file_system_names_it_and_leaves_nothing(store: Path, tmp_path: Path) -> None:
    mnt = tmp_path / "small"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        dest = mnt / "b.db"
        got = cli("--db", str(store), "backup", str(dest))
        one_line_error(got, f"disk full writing {dest}: no space left on the device")
        assert list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
    assert turns(store) == 40


def test_backup_to_a_read_only_folder_names_it_and_leaves_nothing(store: Path, tmp_path: Path) -> None:
    prefix = unprivileged()
    dest_dir = tmp_path / "out"
    dest_dir.mkdir()
    dest_dir.chmod(0o555)
    try:
        got = cli("--db", str(store), "backup", str(dest_dir / "b.db"), prefix=prefix)
        one_line_error(got, f"cannot write the backup {dest_dir / 'b.db'}: the folder {dest_dir} is not writable")
        assert list(dest_dir.iterdir()) == []
    finally:
        dest_dir.chmod(0o755)


# -- watch ----------------------------------------------------------------------------


def watch(db: Path, folder: Path, prefix: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*prefix, *driver("--db", str(db), "watch", str(folder), "--settle", "0.2")],
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )


def lines_until(proc: subprocess.Popen[str], word: str, timeout: float = 60) -> list[str]:
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line.rstrip("\n"))
        if word in line:
            return seen
    raise AssertionError(f"no {word!r} in {seen}")


def test_watch_on_a_full_disk_says_so_once_keeps_watching_and_loses_nothing(store: Path, tmp_path: Path) -> None:
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "chat.jsonl").write_text(jsonl_lines(40, 400), "utf-8")
    proc = watch(store, folder, fsize(LIMIT))  # prlimit execs the watcher: the same pid
    try:
        seen = lines_until(proc, "disk full")
        assert f"disk full writing {store}: the file size limit was reached; trying again" in seen[-1]
        assert "Traceback" not in "\n".join(seen)
        time.sleep(1.5)  # it backs off and tries again, without a word more
        assert proc.poll() is None
        assert 40 <= turns(store) < 400
        # space again (the limit lifted from the running process): the same watcher stores the file
        subprocess.run(["prlimit", "--pid", str(proc.pid), "--fsize=unlimited:unlimited"], check=True)
        later = lines_until(proc, "ingested")
        assert not [line for line in later[:-1] if "disk full" in line or "skipped" in line], later
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert turns(store) == 400 and strays(store.parent, "m.db") == set()


def test_watch_on_a_read_only_store_stops_with_one_line(store: Path, tmp_path: Path) -> None:
    prefix = unprivileged()
    folder = tmp_path / "inbox"
    folder.mkdir()
    (folder / "chat.jsonl").write_text(jsonl_lines(40, 60), "utf-8")
    read_only(store, "folder")
    proc = watch(store, folder, prefix)
    _out, err = proc.communicate(timeout=120)
    done = subprocess.CompletedProcess(proc.args, proc.returncode or 0, "", err)
    one_line_error(done, f"{store} is read-only (the folder {store.parent} is not writable")
    assert turns(store) == 40 and [p.name for p in store.parent.iterdir()] == ["m.db"]


# -- MCP remember and forget, over stdio ----------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def server(db: Path, prefix: list[str]) -> Client:
    params = StdioServerParameters(
        command=prefix[0] if prefix else sys.executable,
        args=[*prefix[1:], sys.executable, "-m", "mcp_server", "--db", str(db)]
        if prefix
        else ["-m", "mcp_server", "--db", str(db)],
        env=env(),
        cwd=str(ROOT),
    )
    return Client(params, read_timeout_seconds=90)


TURNS = [
    {"text": "I adopted a grey cat called Miso.", "speaker": "Ana", "timestamp": "2024-04-02T18:00"},
    {"text": "Miso hides under the sofa all day.", "speaker": "Ana", "timestamp": "2024-04-03T09:00"},
]


async def tool_error(c: Client, name: str, args: dict[str, Any]) -> str:
    res = await c.call_tool(name, args)
    assert res.is_error, res
    text = " ".join(getattr(part, "text", "") for part in res.content)
    # the SDK puts "Error executing tool NAME: " before a tool's own message: the cause must follow
    assert "\n" not in text.strip() and text.strip() != f"Error executing tool {name}", text
    return text


async def works(c: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    res = await c.call_tool(name, args)
    assert not res.is_error, res.content
    assert res.structured_content is not None
    return res.structured_content


@pytest.fixture
async def remembered(tmp_path: Path) -> Path:
    """A store of two turns written by ``remember`` (the server's own embedder)."""
    db = tmp_path / "store" / "mcp.db"
    async with server(db, []) as c:
        assert len((await works(c, "remember", {"turns": TURNS, "session": "pets"}))["turn_ids"]) == 2
    return db


@pytest.mark.anyio
@pytest.mark.parametrize("fault", ["full", "file", "folder"])
async def test_mcp_remember_and_forget_say_why_and_reads_go_on(remembered: Path, fault: str) -> None:
    db = remembered
    if fault == "full":
        prefix = fsize(LIMIT)
        why = f"disk full writing {db}: the file size limit was reached"
    else:
        prefix = unprivileged()
        read_only(db, fault)
        why = f"{db} is read-only (" + (
            "the file is not writable" if fault == "file" else f"the folder {db.parent} is not writable"
        )
    try:
        async with server(db, prefix) as c:
            more = [{"text": "Ana bought Miso a red collar.", "speaker": "Ana"}]
            assert why in await tool_error(c, "remember", {"turns": more, "session": "pets"})
            assert why in await tool_error(c, "forget", {"session": "pets"})
            ctx = await works(c, "reconstruct", {"query": "What is the name of Ana's cat?"})
            assert "Miso" in ctx["text"]
            assert (await works(c, "memory_stats", {}))["turns"] == 2
    finally:
        db.parent.chmod(0o755)
        db.chmod(0o644)
    assert turns(db) == 2
    assert strays(db.parent, "mcp.db") == set()
    if fault == "folder":
        assert [p.name for p in db.parent.iterdir()] == ["mcp.db"]
