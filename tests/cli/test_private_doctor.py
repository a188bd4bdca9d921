"""``localmem doctor`` warns about a store that other users can read (issue 49: a store an
earlier version made 644 in a 755 folder), names the files and the folder, and gives the
one command that fixes it; after that command it is quiet. Real `localmem` processes."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw

from localmem.util import private
from tests.helpers.cli import jsonl_lines


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "localmem", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
        umask=0o022,
    )


def _private_check(db: Path) -> dict[str, Any]:
    proc = _cli("--db", db, "doctor", "--json")
    checks = {c["name"]: c for c in json.loads(proc.stdout)}
    return checks["private"]


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_doctor_warns_about_a_store_others_can_read_and_its_fix_clears_it(tmp_path: Path) -> None:
    db = tmp_path / "data" / "m.db"
    log = tmp_path / "log.jsonl"
    log.write_text(jsonl_lines(0, 3), "utf-8")
    assert _cli("--db", db, "ingest", log).returncode == 0
    assert _private_check(db) == {"name": "private", "ok": True, "warn": False, "detail": private.store_privacy(db)[1]}

    # as an earlier version (umask 022) left it, open in another process meanwhile (so its
    # -wal and -shm stay: the last connection to close deletes them)
    for path, mode in ((db, 0o644), (db.parent, 0o755)):
        path.chmod(mode)
    holder = apsw.Connection(str(db))
    try:
        holder.execute("SELECT count(*) FROM turns").fetchall()
        wal, shm = Path(f"{db}-wal"), Path(f"{db}-shm")
        wal.chmod(0o644)
        assert (_mode(wal), _mode(shm)) == (0o644, 0o644)
        check = _private_check(db)
        assert check["ok"] and check["warn"], check
        for named in (
            "m.db (mode 644)",
            "m.db-wal (mode 644)",
            "m.db-shm (mode 644)",
            f"its folder {db.parent} (mode 755)",
        ):
            assert named in check["detail"], check["detail"]
        found = re.search(r"fix: `([^`]+)`", check["detail"])
        assert found is not None, check["detail"]
        assert "[warn] private: other users of this machine can read" in _cli("--db", db, "doctor").stdout

        subprocess.run(found.group(1), shell=True, check=True)
        assert (_mode(db), _mode(wal), _mode(shm), _mode(db.parent)) == (0o600, 0o600, 0o600, 0o700)
        check = _private_check(db)
        assert check["ok"] and not check["warn"] and "only you can read it" in check["detail"]
    finally:
        holder.close()


def test_a_folder_shared_by_design_is_not_named_only_the_files(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp: its openness is not the store's to fix
    db = shared / "m.db"
    db.write_bytes(b"")
    db.chmod(0o600)
    assert private.store_privacy(db)[0]
    db.chmod(0o640)
    ok, line = private.store_privacy(db)
    assert not ok and "m.db (mode 640)" in line and "its folder" not in line and "chmod 700" not in line
    home = Path(os.environ["HOME"])
    home.chmod(0o755)
    at_home = home / "m.db"
    at_home.write_bytes(b"")
    at_home.chmod(0o600)
    assert private.store_privacy(at_home)[0]  # the home folder is never asked to be 700


def test_a_missing_store_is_not_a_warning(tmp_path: Path) -> None:
    ok, line = private.store_privacy(tmp_path / "none" / "m.db")
    assert ok and "does not exist yet" in line
