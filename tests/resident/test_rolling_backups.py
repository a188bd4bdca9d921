"""Rolling backups from real processes that hold the store (resident/backups.py): the daemon a
query or hook starts (``serve --transport socket --idle-exit``) and the MCP server (``serve``,
stdio) each take one when none exists and say so in their log; ``[backups] enabled = false``
(by environment) turns them off; ``localmem backups`` lists them (text and ``--json``) and
``--now`` takes one. The embedder is the fake one (``tests/helpers/cli.driver``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import apsw
import pytest

from localmem.storage.copies import rolling
from tests.helpers.cli import driver, jsonl_lines
from tests.helpers.resident import answers

NOW = {"LOCALMEM_BACKUPS_DELAY_S": "0"}  # look at once (a process waits a minute by default)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    log = tmp_path / "chat.jsonl"
    log.write_text(jsonl_lines(0, 120), "utf-8")
    path = tmp_path / "memory.db"
    proc = subprocess.run(driver("--db", str(path), "ingest", str(log)), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return path


def started(
    args: list[str], env: dict[str, str], err: Path, stdin: int | None = subprocess.DEVNULL
) -> subprocess.Popen[bytes]:
    with err.open("wb") as fh:
        return subprocess.Popen(args, stdin=stdin, stdout=subprocess.DEVNULL, stderr=fh, env={**os.environ, **env})


def wait_for(what: object, proc: subprocess.Popen[bytes], err: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not what():  # type: ignore[operator]
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"not seen; the process said: {err.read_text('utf-8', 'replace')}")
        time.sleep(0.1)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def checked(path: Path) -> int:
    conn = apsw.Connection(str(path))
    try:
        assert [r[0] for r in conn.execute("PRAGMA integrity_check")] == ["ok"]
        (turns,) = conn.execute("SELECT count(*) FROM turns").fetchone() or (0,)
        return int(turns)
    finally:
        conn.close()


def test_the_daemon_takes_one_when_none_exists(db: Path, tmp_path: Path) -> None:
    err = tmp_path / "daemon.log"
    daemon = started(driver("--db", str(db), "serve", "--transport", "socket", "--idle-exit", "120"), NOW, err)
    try:
        wait_for(lambda: rolling.latest(db) is not None, daemon, err)
        wait_for(lambda: "backup taken" in err.read_text("utf-8"), daemon, err, timeout=10)
        path = wire_path(db)
        assert answers(path)  # still serving while and after it took one
    finally:
        stop(daemon)
    (only,) = rolling.list_backups(db)
    assert checked(only.path) == only.turns == 120
    assert f"backup taken: {only.path}" in err.read_text("utf-8")


def wire_path(db: Path) -> Path:
    from localmem.resident import wire

    path = wire.socket_path(db)
    assert path is not None
    return path


def test_the_mcp_server_takes_one_too(db: Path, tmp_path: Path) -> None:
    err = tmp_path / "mcp.log"
    server = started(driver("--db", str(db), "serve"), NOW, err, stdin=subprocess.PIPE)  # stdio: waits for a client
    try:
        wait_for(lambda: rolling.latest(db) is not None, server, err)
    finally:
        assert server.stdin is not None
        server.stdin.close()  # the client went away: the server exits
        server.wait(30)
    (only,) = rolling.list_backups(db)
    assert checked(only.path) == 120


def test_the_setting_turns_them_off(db: Path, tmp_path: Path) -> None:
    err = tmp_path / "daemon.log"
    env = {**NOW, "LOCALMEM_BACKUPS_ENABLED": "false"}
    daemon = started(driver("--db", str(db), "serve", "--transport", "socket", "--idle-exit", "120"), env, err)
    try:
        wait_for(lambda: answers(wire_path(db)), daemon, err)
        time.sleep(3)  # a look would have come at once (delay 0)
        assert rolling.list_backups(db) == [] and not rolling.folder(db).exists()
    finally:
        stop(daemon)
    listed = run_backups(db, env=env)
    assert "off (backups.enabled = false)" in listed and "0 backups, 0.0 MB in all" in listed


def run_backups(db: Path, *args: str, env: dict[str, str] | None = None, code: int = 0) -> str:
    proc = subprocess.run(
        driver("--db", str(db), "backups", *args),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == code, proc.stderr
    return proc.stdout


def test_the_list_command(db: Path) -> None:
    assert json.loads(run_backups(db, "--json"))["backups"] == []
    run_backups(db, "--now")
    time.sleep(1.1)  # names are by the second
    out = json.loads(run_backups(db, "--now", "--json"))
    assert out["folder"] == str(rolling.folder(db)) and out["enabled"] is True and out["keep"] == 7
    assert [b["turns"] for b in out["backups"]] == [120, 120] and not any(b["encrypted"] for b in out["backups"])
    assert out["total_bytes"] == sum(b["bytes"] for b in out["backups"]) > 0
    assert out["backups"][0]["taken"] > out["backups"][1]["taken"]  # newest first
    text = run_backups(db)
    assert f"backups of {db}: on, folder {rolling.folder(db)}" in text
    assert text.count(" 120 turns  plaintext") == 2 and "2 backups, " in text
    # keep = 1 by environment: the next one taken leaves only itself
    time.sleep(1.1)
    kept = json.loads(run_backups(db, "--now", "--json", env={"LOCALMEM_BACKUPS_KEEP": "1"}))["backups"]
    assert len(kept) == 1 and kept[0]["taken"] > out["backups"][0]["taken"]
    # a disk that cannot keep enough free: exit 1, said on stderr
    time.sleep(1.1)
    proc = subprocess.run(
        driver("--db", str(db), "backups", "--now"),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LOCALMEM_BACKUPS_MIN_FREE_MB": "1e12"},
    )
    assert proc.returncode == 1 and "no backup taken: the disk is too full" in proc.stderr


def test_the_doctor_line(db: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from localmem.cli import doctor
    from localmem.config import Settings
    from localmem.config.settings import BackupsParams

    settings = Settings(db=db)
    assert doctor.backups(settings).startswith("none yet: a daemon, the MCP server or `localmem serve` takes one")
    rolling.tick(db, BackupsParams(min_free_mb=0), datetime.now(UTC) - timedelta(days=3))  # three days old
    with pytest.raises(doctor.Warn, match=r"newest 3 days ago, .* none taken since"):
        doctor.backups(settings)
    off = Settings(db=db, backups=BackupsParams(enabled=False))
    assert doctor.backups(off).startswith("off (backups.enabled = false); 1 taken before (")
    run_backups(db, "--now")
    proc = subprocess.run(
        driver("--db", str(db), "doctor", "--json"), capture_output=True, text=True, timeout=300, env=os.environ.copy()
    )
    line = {c["name"]: c for c in json.loads(proc.stdout)}["backups"]
    assert line["ok"] and not line["warn"], line
    assert line["detail"].startswith("2 (keep 7, every 24 h), newest 0.0 h ago, ")
    assert line["detail"].endswith(f" MB in {rolling.folder(db)}")
