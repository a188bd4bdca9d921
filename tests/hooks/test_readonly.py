"""A store whose folder cannot be written (a file system mounted read-only): the hook still
exits 0 with nothing on stdout, its status goes to this user's state folder, and
`hooks status` and `doctor` say where it could not go and why; `doctor`'s `store folder`
check fails. Once the folder can be written again, the status goes back beside the store
and `doctor` warns about the time it could not.

The folder is made read-only for real: as root (who writes through permission bits) by a
read-only bind mount in a mount namespace of the hook's and the doctor's own (``unshare
-m``), else by ``chmod 555``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localmem.bench import agent_logs
from localmem.hooks import status
from tests.helpers.hooks import CWD, SESSION

MOUNT_RO = 'mount --bind -o ro "$0" "$0" && exec "$@"'


def read_only(folder: Path) -> list[str]:
    """A prefix that runs a command with ``folder`` read-only (the module docstring)."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return []
    if shutil.which("unshare") is None:
        pytest.skip("root ignores permission bits, and there is no unshare(1) for a read-only mount")
    prefix = ["unshare", "-m", "sh", "-c", MOUNT_RO, str(folder)]
    probe = subprocess.run([*prefix, "touch", str(folder / "probe")], capture_output=True, text=True)
    if "Read-only file system" not in probe.stderr:
        pytest.skip(f"no read-only bind mount here (root ignores permission bits): {probe.stderr.strip()}")
    return prefix


def run(
    prefix: list[str], argv: list[str], env: dict[str, str], stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*prefix, *argv], input=stdin, capture_output=True, timeout=300, env=env)


def test_a_read_only_store_folder_is_named_by_hooks_status_and_doctor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, state = tmp_path / "store", tmp_path / "state"
    folder.mkdir()
    db, log = folder / "m.db", tmp_path / f"{SESSION}.jsonl"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))  # this process reads what the hooks write
    env = {**os.environ, "LOCALMEM_HOOK_FOREGROUND": "1"}
    log.write_text("\n".join(agent_logs.transcript(SESSION, CWD, 4)) + "\n", "utf-8")
    payload = json.dumps({"session_id": SESSION, "transcript_path": str(log), "cwd": CWD}).encode()
    hook = [sys.executable, "-m", "localmem.hooks", "--db", str(db), "stop", "--client", "claude-code"]
    first = run([], hook, env, payload)
    assert first.returncode == 0 and status.read(db)["events"]["stop"]["runs"] == 1

    prefix = read_only(folder)
    try:
        with log.open("a", encoding="utf-8") as fh:
            fh.write("\n".join(agent_logs.exchange(SESSION, CWD, 4)) + "\n")
        stuck = run(prefix, hook, env, payload)
        assert stuck.returncode == 0 and stuck.stdout == b"", stuck.stderr
        moved = status.fallback_path(db)
        assert moved.startswith(str(state / "localmem" / "hook-status"))
        ran = status.read(db)
        assert ran["status_file"] == moved and ran["events"]["stop"]["runs"] == 1
        refused = ran["unwritable"]
        assert refused["path"] == status.path_for(db) and refused["error"] in (
            "Read-only file system",
            "Permission denied",
        )
        said = f"status could not be written to {status.path_for(db)} ({refused['error']})"

        shown = run(prefix, [sys.executable, "-m", "localmem", "--db", str(db), "hooks", "status"], env)
        assert said in shown.stdout.decode() and moved in shown.stdout.decode(), shown.stdout
        doctor = run(prefix, [sys.executable, "-m", "localmem", "--db", str(db), "doctor", "--json"], env)
        checks = {c["name"]: c for c in json.loads(doctor.stdout)}
        assert not checks["hook runs"]["ok"] and said in checks["hook runs"]["detail"], checks["hook runs"]
        folder_check = checks["store folder"]
        assert not folder_check["ok"] and f"{folder} is not writable" in folder_check["detail"], folder_check
        assert moved in folder_check["detail"]
    finally:
        folder.chmod(0o755)

    # writable again: the next run is recorded beside the store, and doctor warns about the gap
    again = run([], hook, env, payload)
    assert again.returncode == 0
    ran = status.read(db)
    assert "unwritable" not in ran and ran["unwritable_before"]["path"] == status.path_for(db)
    doctor = run([], [sys.executable, "-m", "localmem", "--db", str(db), "doctor", "--json"], env)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)}
    assert checks["store folder"] == {
        "name": "store folder",
        "ok": True,
        "warn": False,
        "detail": f"{folder} is writable",
    }
    assert checks["hook runs"]["warn"] and "and can be now" in checks["hook runs"]["detail"], checks["hook runs"]
