"""`localmem hooks install | uninstall | status` for each client, through the CLI: the
entries merged into the client's real settings file beside what was there (a backup
first), installing twice changes nothing, uninstall takes out only localmem's, a file
that is not JSON is refused untouched, and the installed command runs."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from localmem.hooks import install
from localmem.hooks.events import CLIENT_EVENTS

THEIRS = {"type": "command", "command": "notify-send done", "timeout": 3}


def cli(home: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}
    for k in ("CODEX_HOME", "CLAUDE_CONFIG_DIR"):
        env.pop(k, None)
    return subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args], capture_output=True, text=True, timeout=300, env=env
    )


@pytest.mark.parametrize("client", ["claude-code", "codex", "gemini"])
def test_install_merges_keeps_theirs_and_uninstall_takes_only_ours(client: str, tmp_path: Path) -> None:
    home, db = tmp_path / "home", tmp_path / "m.db"
    target = install.settings_path(client, home, {})
    target.parent.mkdir(parents=True)
    stop = CLIENT_EVENTS[client]["stop"]
    before = {"theme": "dark", "hooks": {stop: [{"hooks": [THEIRS]}]}}
    target.write_text(json.dumps(before), "utf-8")

    first = cli(home, db, "hooks", "install", "--client", client, "--json")
    assert first.returncode == 0, first.stderr
    got = json.loads(first.stdout)
    assert got["path"] == str(target) and Path(got["backup"]).read_text("utf-8") == json.dumps(before)
    assert set(got["events"]) == set(CLIENT_EVENTS[client]) and not got["problems"]
    assert Path(got["status_file"]).stat().st_size > 0
    data = json.loads(target.read_text("utf-8"))
    assert data["theme"] == "dark" and THEIRS in data["hooks"][stop][0]["hooks"]
    for event, name in CLIENT_EVENTS[client].items():
        hooks = [h for g in data["hooks"][name] for h in g["hooks"] if install.ours(h, client)]
        assert len(hooks) == 1
        argv = shlex.split(hooks[0]["command"])
        assert argv[0] == str(Path(sys.executable).absolute()) and argv[1:3] == ["-m", "localmem.hooks"]
        assert argv[argv.index("--db") + 1] == str(db.resolve()) and argv[-3:] == [event, "--client", client]
        want = install.TIMEOUTS[event] * (1000 if client == "gemini" else 1)
        assert hooks[0]["timeout"] == want

    again = cli(home, db, "hooks", "install", "--client", client)
    assert again.returncode == 0 and json.loads(target.read_text("utf-8")) == data  # nothing doubled

    status = cli(home, db, "hooks", "status", "--json")
    clients = {c["client"]: c for c in json.loads(status.stdout)["clients"]}
    assert set(clients[client]["events"]) == set(CLIENT_EVENTS[client])

    # the installed command runs and exits 0 (a prompt with no store yet: nothing to say)
    cmd = next(h for g in data["hooks"][CLIENT_EVENTS[client]["prompt"]] for h in g["hooks"] if install.ours(h, client))
    ran = subprocess.run(
        cmd["command"], shell=True, input=b'{"prompt": "hi", "cwd": "/tmp"}', capture_output=True, timeout=300
    )
    assert ran.returncode == 0 and ran.stdout == b""

    gone = cli(home, db, "hooks", "uninstall", "--client", client, "--json")
    assert json.loads(gone.stdout)["removed"] == len(CLIENT_EVENTS[client])
    assert json.loads(target.read_text("utf-8")) == before
    assert "no localmem hooks" in cli(home, db, "hooks", "uninstall", "--client", client).stdout


def test_a_settings_file_that_is_not_json_is_refused_untouched(tmp_path: Path) -> None:
    home = tmp_path / "home"
    target = install.settings_path("claude-code", home, {})
    target.parent.mkdir(parents=True)
    target.write_text("{ not json", "utf-8")
    run = cli(home, tmp_path / "m.db", "hooks", "install", "--client", "claude-code")
    assert run.returncode != 0 and "cannot read it as JSON" in run.stderr and str(target) in run.stderr
    assert target.read_text("utf-8") == "{ not json"
    assert [p.name for p in target.parent.iterdir()] == ["settings.json"]


def test_status_and_doctor_see_broken_entries_and_codex_hooks_turned_off(tmp_path: Path) -> None:
    home, db = tmp_path / "home", tmp_path / "m.db"
    assert cli(home, db, "hooks", "install", "--client", "codex").returncode == 0
    codex = install.settings_path("codex", home, {})
    (codex.parent / "config.toml").write_text("[features]\nhooks = false\n", "utf-8")
    text = codex.read_text("utf-8").replace(str(Path(sys.executable).absolute()), "/nowhere/python3")
    codex.write_text(text, "utf-8")
    status = cli(home, db, "hooks", "status")
    assert "/nowhere/python3 does not exist" in status.stdout and "hooks = false" in status.stdout
    doctor = json.loads(cli(home, db, "doctor", "--json").stdout)
    check = next(c for c in doctor if c["name"] == "hooks codex")
    assert not check["ok"] and "does not exist" in check["detail"]
    assert next(c for c in doctor if c["name"] == "hooks gemini")["detail"].startswith("not installed")
