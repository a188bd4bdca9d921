"""``localmem bench sync`` end to end: three real Syncthing daemons on 127.0.0.1 (Debian's
``syncthing``), three localmem devices writing at once through their own MCP servers and
CLI ingest, a forget; every device must end with the same turns, forget set and derived
layers, none lost, none twice. CI installs syncthing and sets LOCALMEM_REQUIRE_SYNCTHING,
so there a missing binary fails instead of skipping."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def test_three_syncthing_devices_converge(tmp_path: Path) -> None:
    if shutil.which("syncthing") is None:
        if os.environ.get("LOCALMEM_REQUIRE_SYNCTHING") == "1":
            pytest.fail("LOCALMEM_REQUIRE_SYNCTHING=1 but the syncthing binary is absent (apt-get install syncthing)")
        pytest.skip("needs Debian's syncthing")
    cmd = [sys.executable, "-m", "localmem", "bench", "sync", "--turns", "60", "--timeout", "240"]
    cmd += ["--workdir", str(tmp_path / "work"), "--json"]
    run = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "LOCALMEM_DB": str(tmp_path / "x.db")}
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])["mesh"]
    assert result["devices"] == 3 and result["converged"] and result["identical"]
    assert result["lost"] == 0 and result["duplicated"] == 0
    assert result["turns_forgotten"] > 0
    assert len(set(result["turns_each"])) == 1
    assert result["turns_each"][0] == result["turns_written"] - result["turns_forgotten"]
    assert len(set(result["forget_set_each"])) == 1 and len(set(result["derived_cues_each"])) == 1
    assert result["wire_bytes"] > 0
