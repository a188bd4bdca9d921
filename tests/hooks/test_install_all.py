"""`localmem hooks install --all | uninstall --all`, `hooks plugin` and `hooks status` across
every agent, through the CLI in a temp HOME: the agents found by their folders or their
commands on PATH, each settings file given back byte for byte (mode included) and every
folder made for it removed, a file changed since keeping its changes, a client that has
localmem's plugin left alone; the plugin files carry the commands `hooks install` writes;
a VS Code payload stores no transcript."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

from localmem.hooks import events, install
from localmem.hooks.events import CLIENT_EVENTS

THEIRS = {"type": "command", "command": "notify-send done", "timeout": 3}


def env_for(home: Path, path: str = "") -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "CODEX_", "CLAUDE_", "GEMINI_", "COPILOT_"))
    }
    env.update(HOME=str(home), PATH=path or os.defpath, LOCALMEM_HOOKS_DAEMON_IDLE="0")
    return env


def cli(home: Path, db: Path, *args: str, path: str = "") -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env_for(home, path),
    )
    assert run.returncode == 0, run.stderr
    return run


def tree(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every file and folder under ``root``: its mode and bytes (None for a folder)."""
    out: dict[str, tuple[int, bytes | None]] = {}
    for p in sorted(root.rglob("*")):
        mode = stat.S_IMODE(p.lstat().st_mode)
        out[str(p.relative_to(root))] = (mode, None if p.is_dir() else p.read_bytes())
    return out


def a_machine(tmp_path: Path) -> tuple[Path, Path, str]:
    """A HOME with Claude Code (its settings as a person wrote them, mode 644), Gemini CLI
    (a folder, no settings yet), Copilot CLI (a folder, no hooks folder yet), Cursor (its
    hooks file holding a hook of the person's) and OpenCode (its config folder, no plugin
    folder yet); Codex only as a command on PATH. (home, store, PATH)"""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    claude = home / ".claude" / "settings.json"
    claude.write_bytes(b'{ "theme":"dark",\n  "hooks": {"Stop": [{"hooks": [%s]}]} }' % json.dumps(THEIRS).encode())
    claude.chmod(0o644)
    (home / ".gemini").mkdir()
    (home / ".gemini" / "GEMINI.md").write_text("be brief\n", "utf-8")
    (home / ".copilot").mkdir()
    (home / ".copilot" / "config.json").write_text('{"banner": "never"}\n', "utf-8")
    (home / ".cursor").mkdir()
    (home / ".cursor" / "hooks.json").write_text(
        '{"version": 1, "hooks": {"afterFileEdit": [{"command": "./hooks/format.sh"}]}}\n', "utf-8"
    )
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text('{"autoupdate": false}\n', "utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    codex = bin_dir / "codex"  # only its presence on PATH is read: it is never run
    codex.write_text("#!/bin/sh\nexit 0\n", "utf-8")
    codex.chmod(0o755)
    return home, tmp_path / "store" / "m.db", f"{bin_dir}{os.pathsep}{os.defpath}"


def test_install_all_finds_every_agent_and_uninstall_all_gives_every_byte_back(tmp_path: Path) -> None:
    home, db, path = a_machine(tmp_path)
    db.parent.mkdir()
    before = tree(home)

    got = json.loads(cli(home, db, "hooks", "install", "--all", "--json", path=path).stdout)
    did = {a["client"]: a for a in got["agents"]}
    assert {c: a["action"] for c, a in did.items()} == dict.fromkeys(CLIENT_EVENTS, "installed")
    assert "its command" in did["codex"]["why"] and "its folder" in did["claude-code"]["why"]
    assert "/hooks" in did["codex"]["todo"][0] and "restart" in did["gemini"]["todo"][0]
    assert "its folder" in did["copilot"]["why"] and did["copilot"]["path"].endswith(".copilot/hooks/localmem.json")
    record = Path(got["record"])
    assert record.is_file() and stat.S_IMODE(record.stat().st_mode) == 0o600
    for client in CLIENT_EVENTS:
        target = install.settings_path(client, home, {})
        found = install.inspect(client, target)
        assert set(found.events) == set(CLIENT_EVENTS[client]), client
        assert not list(target.parent.glob("*.bak-*"))  # the old bytes are in the record, not beside the file
    data = json.loads((home / ".claude" / "settings.json").read_text("utf-8"))
    assert data["theme"] == "dark" and THEIRS in data["hooks"]["Stop"][0]["hooks"]
    cursor = json.loads((home / ".cursor" / "hooks.json").read_text("utf-8"))
    assert cursor["version"] == 1 and cursor["hooks"]["afterFileEdit"] == [{"command": "./hooks/format.sh"}]
    assert cursor["hooks"]["stop"] == [install.entry(db, "cursor", "stop")]
    assert "mcp-config --client cursor --install" in did["cursor"]["todo"][0]
    named = shlex.split(did["cursor"]["todo"][0].split("`")[1])  # the command the to-do names runs as written
    assert named[0] == "localmem" and cli(home, db, *named[1:], "--help").returncode == 0
    assert "its folder" in did["opencode"]["why"] and did["opencode"]["path"].endswith("opencode/plugin/localmem.js")

    again = json.loads(cli(home, db, "hooks", "install", "--all", "--json", path=path).stdout)  # twice: same files
    assert [a["action"] for a in again["agents"]] == ["installed"] * len(CLIENT_EVENTS)

    shown = json.loads(cli(home, db, "hooks", "status", "--json", path=path).stdout)["clients"]
    assert all(c["found"] and set(c["events"]) == set(CLIENT_EVENTS[c["client"]]) for c in shown)

    gone = json.loads(cli(home, db, "hooks", "uninstall", "--all", "--json", path=path).stdout)
    assert [a["action"] for a in gone["agents"]] == ["restored"] * len(CLIENT_EVENTS)
    assert tree(home) == before  # every byte and mode; ~/.codex, ~/.copilot/hooks and OpenCode's plugin folder gone
    assert not record.exists() and not record.parent.exists()


def test_a_file_changed_since_keeps_its_changes_and_loses_only_ours(tmp_path: Path) -> None:
    home, db, path = a_machine(tmp_path)
    cli(home, db, "hooks", "install", "--all", path=path)
    target = home / ".gemini" / "settings.json"
    data = json.loads(target.read_text("utf-8"))
    target.write_text(json.dumps({**data, "ui": {"theme": "GitHub"}}), "utf-8")  # the person changed a setting

    gone = json.loads(cli(home, db, "hooks", "uninstall", "--all", "--json", path=path).stdout)
    did = {a["client"]: a for a in gone["agents"]}
    assert did["gemini"]["action"] == "kept" and "changed since" in did["gemini"]["why"]
    assert json.loads(target.read_text("utf-8")) == {"ui": {"theme": "GitHub"}}
    assert did["claude-code"]["action"] == "restored"


def test_a_client_with_localmems_plugin_is_left_alone(tmp_path: Path) -> None:
    home, db, path = a_machine(tmp_path)
    claude = home / ".claude" / "settings.json"
    claude.write_text(json.dumps({"enabledPlugins": {"localmem@localmem": True}}), "utf-8")
    before = claude.read_bytes()
    got = json.loads(cli(home, db, "hooks", "install", "--all", "--json", path=path).stdout)
    did = {a["client"]: a for a in got["agents"]}
    assert did["claude-code"]["action"] == "left" and "plugin localmem@localmem" in did["claude-code"]["why"]
    assert claude.read_bytes() == before  # no second set of hooks: each would run twice

    # installed by hand beside the plugin: status names the double run
    cli(home, db, "hooks", "install", "--client", "claude-code", path=path)
    shown = cli(home, db, "hooks", "status", "--client", "claude-code", path=path).stdout
    assert "plugin: localmem's plugin localmem@localmem" in shown and "each runs twice" in shown


def test_nothing_found_installs_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    got = json.loads(cli(home, tmp_path / "m.db", "hooks", "install", "--all", "--json").stdout)
    assert [a["action"] for a in got["agents"]] == ["not found"] * len(CLIENT_EVENTS)
    assert sorted(p.name for p in home.iterdir()) == []


def test_client_and_all_together_are_refused(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "localmem",
            "--db",
            str(tmp_path / "m.db"),
            "hooks",
            "install",
            "--all",
            "--client",
            "codex",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env_for(tmp_path),
    )
    assert run.returncode != 0 and "leave out --client" in run.stderr


def test_plugin_files_carry_the_hook_commands_and_the_mcp_server(tmp_path: Path) -> None:
    home, db = tmp_path / "home", tmp_path / "m.db"
    home.mkdir()
    for client, root, manifest, hooks_at in (
        ("claude-code", "localmem", ".claude-plugin/plugin.json", "hooks/hooks.json"),
        ("codex", "localmem", ".codex-plugin/plugin.json", "hooks/hooks.json"),
        ("gemini", ".", "gemini-extension.json", "hooks/hooks.json"),
        ("copilot", "localmem", "plugin.json", "hooks.json"),
    ):
        out = tmp_path / f"plugin-{client}"
        got = json.loads(cli(home, db, "hooks", "plugin", "--client", client, "--out", str(out), "--json").stdout)
        assert str(out) in got["add"] and json.loads((out / root / manifest).read_text("utf-8"))["name"] == "localmem"
        hooks_file = json.loads((out / root / hooks_at).read_text("utf-8"))
        hooks = hooks_file["hooks"]
        assert set(hooks) == set(CLIENT_EVENTS[client].values())
        for event, name in CLIENT_EVENTS[client].items():
            if client == "copilot":  # Copilot's own hooks format: flat entries, the file's version 1
                assert hooks_file["version"] == 1 and hooks[name] == [install.entry(db, client, event)]
                continue
            (hook,) = hooks[name][0]["hooks"]
            assert hook["command"] == install.command(db, client, event)
        servers = (
            json.loads((out / "gemini-extension.json").read_text("utf-8"))
            if client == "gemini"
            else json.loads((out / root / ".mcp.json").read_text("utf-8"))
        )["mcpServers"]
        entry = servers["localmem"]
        assert entry["command"] == str(Path(sys.executable).absolute())
        assert entry["args"] == ["-m", "localmem", "--db", str(db.resolve()), "serve"]
        assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in map(Path, got["files"]))
        # written again: the same files; a folder holding something else is refused untouched
        cli(home, db, "hooks", "plugin", "--client", client, "--out", str(out))
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine", "utf-8")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "localmem",
            "--db",
            str(db),
            "hooks",
            "plugin",
            "--client",
            "gemini",
            "--out",
            str(other),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env_for(home),
    )
    assert run.returncode != 0 and "not localmem's plugin" in run.stderr
    assert [p.name for p in other.iterdir()] == ["notes.txt"]


def test_a_vscode_payload_stores_no_transcript(tmp_path: Path) -> None:
    """VS Code's agent runs Claude Code's settings hooks with its own payload shape."""
    transcript = tmp_path / "vscode-transcript.json"
    transcript.write_text('{"requests": []}', "utf-8")
    vscode = {
        "timestamp": "2026-02-09T10:30:00.000Z",
        "cwd": str(tmp_path),
        "sessionId": "vs-1",
        "hookEventName": "Stop",
        "transcript_path": str(transcript),
    }
    ev = events.parse("claude-code", "stop", json.dumps(vscode).encode())
    assert ev.host == "vscode" and ev.transcript_path == "" and ev.session_id == "vs-1"
    claude = {**vscode, "hook_event_name": "Stop", "session_id": "cc-1"}
    del claude["hookEventName"], claude["sessionId"]
    ev = events.parse("claude-code", "stop", json.dumps(claude).encode())
    assert ev.host == "" and ev.transcript_path == str(transcript)

    # the installed command, run with VS Code's payload: quiet, nothing stored, nothing failed
    db = tmp_path / "m.db"
    argv = shlex.split(install.command(db, "claude-code", "stop"))
    done = subprocess.run(
        argv, input=json.dumps(vscode).encode(), capture_output=True, timeout=300, env=env_for(tmp_path)
    )
    assert done.returncode == 0 and done.stdout == b""
    from tests.helpers.hooks import settled

    settled(db, "stop", 1)
    from localmem.hooks import status

    got = status.read(db)
    assert got["events"]["stop"].get("quiet") == 1 and not got["failures"], got
