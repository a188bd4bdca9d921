"""OpenCode's hooks: localmem's plugin file (``hooks install / uninstall / status --client
opencode``: ``$XDG_CONFIG_HOME/opencode/plugin/localmem.js``) and the hook commands it runs,
as `python -m localmem.hooks … --client opencode` processes with the plugin's payload.

The plugin holds the same absolute commands as every other client's entries (with
``--key-file`` when given), installing twice writes the same bytes, a file there that is not
localmem's is refused untouched, ``status`` names an interpreter that is gone, and
``uninstall`` removes the file. A stop reads the payload's session (and only it) from a
database in OpenCode's own schema, through the rows ``localmem capture`` keeps: capture then
stores the other session and nothing of the first again. The real OpenCode CLI runs the
plugin in tests/agents/test_opencode_hooks.py."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from localmem.errors import InputError
from localmem.hooks import events, install, opencode
from localmem.hooks.events import CLIENT_EVENTS
from tests.helpers.hooks import hook
from tests.helpers.opencode_db import OpenCodeDb, text


def cli(home: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "cfg"), LOCALMEM_HOOKS_DAEMON_IDLE="0")
    return subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_install_writes_localmems_plugin_and_uninstall_removes_it(tmp_path: Path) -> None:
    home, db = tmp_path / "home", tmp_path / "store" / "m.db"
    key = tmp_path / "store.key"
    key.write_text("correct horse battery staple\n", "utf-8")
    key.chmod(0o600)
    made = cli(home, db, "--key-file", str(key), "hooks", "install", "--client", "opencode", "--json")
    assert made.returncode == 0, made.stderr
    got = json.loads(made.stdout)
    plugin = home / "cfg" / "opencode" / "plugin" / "localmem.js"
    assert got["path"] == str(plugin) and got["backup"] is None and not got["problems"]
    assert stat.S_IMODE(plugin.stat().st_mode) == 0o600
    assert set(got["events"]) == set(CLIENT_EVENTS["opencode"]) == {"session-start", "prompt", "stop", "pre-compact"}
    written = opencode.read(plugin)
    for event, cmd in got["events"].items():
        assert shlex.split(cmd) == written[event] == install.argv(db, "opencode", event, key_file=key)
        assert written[event][written[event].index("--key-file") + 1] == str(key.resolve())
    source = plugin.read_text("utf-8")
    assert "correct horse" not in source and "export const LocalmemPlugin" in source
    line = next(line for line in source.splitlines() if line.endswith(opencode.MARK))
    hooks = json.loads(line.removeprefix("const HOOKS = ").removesuffix(opencode.MARK))
    assert {e: h["timeout"] for e, h in hooks["events"].items()} == {e: install.TIMEOUTS[e] for e in hooks["events"]}

    again = cli(home, db, "--key-file", str(key), "hooks", "install", "--client", "opencode")
    assert again.returncode == 0 and plugin.read_text("utf-8") == source  # twice: the same bytes
    assert [p.name for p in plugin.parent.iterdir()] == ["localmem.js"]  # no backups where OpenCode loads plugins

    shown = json.loads(cli(home, db, "hooks", "status", "--client", "opencode", "--json").stdout)["clients"][0]
    assert shown["path"] == str(plugin) and set(shown["events"]) == set(CLIENT_EVENTS["opencode"])

    gone = cli(home, db, "hooks", "uninstall", "--client", "opencode", "--json")
    assert json.loads(gone.stdout)["removed"] == 4 and not plugin.exists()
    assert json.loads(cli(home, db, "hooks", "uninstall", "--client", "opencode", "--json").stdout)["removed"] == 0


def test_status_names_a_missing_interpreter_and_a_file_not_localmems_is_left_alone(tmp_path: Path) -> None:
    home, db = tmp_path / "home", tmp_path / "m.db"
    assert cli(home, db, "hooks", "install", "--client", "opencode").returncode == 0
    plugin = home / "cfg" / "opencode" / "plugin" / "localmem.js"
    source = plugin.read_text("utf-8")
    plugin.write_text(source.replace(json.dumps(str(Path(sys.executable).absolute())), '"/nowhere/python3"'), "utf-8")
    status = cli(home, db, "hooks", "status", "--client", "opencode")
    assert "/nowhere/python3 does not exist" in status.stdout, status.stdout
    doctor = json.loads(cli(home, db, "doctor", "--json").stdout)
    check = next(c for c in doctor if c["name"] == "hooks opencode")
    assert not check["ok"] and "does not exist" in check["detail"]

    theirs = "export const Mine = async () => ({})\n"
    plugin.write_text(theirs, "utf-8")
    for action in ("install", "uninstall"):
        refused = cli(home, db, "hooks", action, "--client", "opencode")
        assert refused.returncode != 0 and "not localmem's plugin" in refused.stderr, refused.stderr
        assert plugin.read_text("utf-8") == theirs
    plugin.write_text(source.replace('{"version": 1', '{"version": 1,,', 1), "utf-8")
    with pytest.raises(InputError, match="HOOKS is not JSON") as bad:
        opencode.read(plugin)
    assert str(plugin) in str(bad.value) and "line " in str(bad.value)


def test_the_payload_names_the_session_its_project_and_opencodes_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", "/data")
    raw = json.dumps({"sessionID": "ses_1", "directory": "/p", "prompt": "why?"}).encode()
    ev = events.parse("opencode", "prompt", raw)
    assert (ev.session_id, ev.cwd, ev.prompt, ev.transcript_path) == ("ses_1", "/p", "why?", "")
    assert events.parse("opencode", "stop", raw).transcript_path == "/data/opencode/opencode.db"
    named = {"sessionID": "ses_1", "database": "/x/opencode-beta.db"}
    assert events.parse("opencode", "stop", json.dumps(named).encode()).transcript_path == "/x/opencode-beta.db"
    for odd in ("/x/secrets.db", "relative/opencode.db"):  # only OpenCode's database, by absolute path
        named["database"] = odd
        assert events.parse("opencode", "stop", json.dumps(named).encode()).transcript_path.startswith("/data/")
    assert json.loads(events.reply("opencode", "prompt", "ctx")) == {"additionalContext": "ctx"}


def test_a_stop_stores_its_session_once_and_capture_the_rest(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "opencode").mkdir(parents=True)
    src = OpenCodeDb(data / "opencode" / "opencode.db")
    said = {
        "ses_a": ("We keep the invoice cache in SQLite.", "Noted: SQLite."),
        "ses_b": ("Rename the billing job.", "Renamed it to ledger-sync."),
    }
    for n, (sid, (prompt, reply)) in enumerate(said.items()):
        src.session(sid, "/home/dev/app", t=1_700_000_000_000 + n * 1000)
        src.message(sid, "user", [text(prompt)], t=1_700_000_000_100 + n * 1000)
        src.message(sid, "assistant", [text(reply)], t=1_700_000_000_200 + n * 1000)
    src.close()
    db = tmp_path / "store" / "m.db"
    env = {"XDG_DATA_HOME": str(data)}
    payload = {"sessionID": "ses_a", "directory": "/home/dev/app"}
    run = hook(db, "stop", payload, client="opencode", **env)
    assert run.returncode == 0 and run.stdout == b""
    exported = cli(tmp_path, db, "export").stdout.splitlines()
    assert [json.loads(line)["text"] for line in exported] == list(said["ses_a"])
    hook(db, "stop", payload, client="opencode", **env)  # again: nothing new
    assert len(cli(tmp_path, db, "export").stdout.splitlines()) == 2

    capture = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), "capture", "--only", "opencode", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
    )
    got = json.loads(capture.stdout)
    assert got["new"] == 2 and got["already_present"] == 0 and not got["errors"], got  # ses_b only
    texts = [json.loads(line)["text"] for line in cli(tmp_path, db, "export").stdout.splitlines()]
    assert sorted(texts) == sorted([*said["ses_a"], *said["ses_b"]])
