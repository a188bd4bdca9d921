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

from localmem.bench import agent_logs
from localmem.hooks import codex_list, install, status
from localmem.hooks.events import CLIENT_EVENTS
from localmem.storage.engine import keys
from tests.helpers.agent_clis import cli_path
from tests.helpers.hooks import CWD, SESSION

THEIRS = {"type": "command", "command": "notify-send done", "timeout": 3}


def cli(home: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}
    for k in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "COPILOT_HOME"):
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
    assert set(got["events"]) == set(CLIENT_EVENTS[client])
    # Codex's one problem: a hook runs only once the person trusted it in Codex's /hooks view
    if client == "codex":
        assert len(got["problems"]) == 1 and "/hooks view" in got["problems"][0]
    else:
        assert not got["problems"]
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


def test_copilot_gets_a_hooks_file_of_its_own_in_its_hooks_folder(tmp_path: Path) -> None:
    """Copilot CLI reads every *.json of ~/.copilot/hooks: localmem's is localmem.json, flat
    entries with the command under "bash"; an entry a person added to it stays; uninstall
    takes the file away once nothing else is in it."""
    home, db = tmp_path / "home", tmp_path / "m.db"
    target = install.settings_path("copilot", home, {})
    assert target == home / ".copilot" / "hooks" / "localmem.json"
    assert (
        install.settings_path("copilot", home, {"COPILOT_HOME": str(tmp_path / "ch")}).parent
        == tmp_path / "ch" / "hooks"
    )

    first = cli(home, db, "hooks", "install", "--client", "copilot", "--json")
    assert first.returncode == 0, first.stderr
    got = json.loads(first.stdout)
    assert got["path"] == str(target) and got["backup"] is None and not got["problems"]
    data = json.loads(target.read_text("utf-8"))
    assert data["version"] == 1 and set(data["hooks"]) == set(CLIENT_EVENTS["copilot"].values())
    for event, name in CLIENT_EVENTS["copilot"].items():
        [entry] = data["hooks"][name]
        assert set(entry) == {"type", "bash", "timeoutSec"} and entry["timeoutSec"] == install.TIMEOUTS[event]
        argv = shlex.split(entry["bash"])
        assert argv[1:3] == ["-m", "localmem.hooks"] and argv[-3:] == [event, "--client", "copilot"]

    theirs = {"type": "command", "bash": "notify-send done", "timeoutSec": 3}
    data["hooks"]["agentStop"].insert(0, theirs)
    target.write_text(json.dumps(data), "utf-8")
    assert cli(home, db, "hooks", "install", "--client", "copilot").returncode == 0
    assert json.loads(target.read_text("utf-8")) == data  # nothing doubled, theirs kept

    cmd = data["hooks"]["userPromptSubmitted"][0]["bash"]  # the payload Copilot sends: nothing to recall yet
    payload = b'{"sessionId": "s1", "timestamp": 1, "cwd": "/tmp", "prompt": "hi"}'
    ran = subprocess.run(cmd, shell=True, input=payload, capture_output=True, timeout=300)
    assert ran.returncode == 0 and ran.stdout == b""

    gone = json.loads(cli(home, db, "hooks", "uninstall", "--client", "copilot", "--json").stdout)
    assert gone["removed"] == len(CLIENT_EVENTS["copilot"])
    assert json.loads(target.read_text("utf-8")) == {"version": 1, "hooks": {"agentStop": [theirs]}}

    target.unlink()
    cli(home, db, "hooks", "install", "--client", "copilot")
    gone = json.loads(cli(home, db, "hooks", "uninstall", "--client", "copilot", "--json").stdout)
    assert not target.exists() and Path(gone["backup"]).name.startswith("localmem.json.bak-")

    target.write_text(json.dumps({"version": 2, "hooks": {}}), "utf-8")
    run = cli(home, db, "hooks", "install", "--client", "copilot")
    assert run.returncode != 0 and "version 2" in run.stderr
    assert json.loads(target.read_text("utf-8")) == {"version": 2, "hooks": {}}


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


# -- Codex's trust: the hash it records, reproduced (checked against codex 0.171's own `hooks/list`) --------

# (event, entry, the currentHash codex-cli 0.171.0's app-server reported for it: `hooks/list`)
CODEX_SAID = [
    (
        "SessionStart",
        {
            "type": "command",
            "command": "/work/main/.venv/bin/python3 -m localmem.hooks --db /tmp/cx/db.sqlite session-start --client codex",
            "timeout": 10,
        },
        "sha256:fe0a508f99ffade694bb0736202b35065b2412d9f0d91aa39b7601da0e7e6ca8",
    ),
    (
        "PreCompact",
        {
            "type": "command",
            "command": "/work/main/.venv/bin/python3 -m localmem.hooks --db /tmp/cx/db.sqlite pre-compact --client codex",
            "timeout": 60,
        },
        "sha256:1a0ffac50671f13ef77d53c2c5b8b3f27e9556d4db6632ee1f6408c89058882f",
    ),
    (  # non-ASCII, quotes and backslashes: serde_json's escaping
        "SessionStart",
        {
            "type": "command",
            "command": "/x/py -m localmem.hooks --db '/tmp/é \"q\"\\\\ x' session-start --client codex",
            "timeout": 10,
        },
        "sha256:16369979bfbb1ccbc0141c78d867d1a8d7610b67ae314a957390310521369b9a",
    ),
]


@pytest.mark.parametrize(("name", "hook", "want"), CODEX_SAID)
def test_the_codex_trust_hash_is_the_one_codex_computes(name: str, hook: dict[str, object], want: str) -> None:
    assert install.codex_hash(name, hook) == want
    assert install.codex_hash(name, {**hook, "statusMessage": "x"}) is None  # a shape not checked: unknown


def trust_state(target: Path, entries: dict[str, tuple[str, dict[str, object]]]) -> str:
    """config.toml's [hooks.state] as Codex's /hooks writes it, keyed by the file's real path."""
    lines = []
    for key, state in entries.values():
        lines.append(f'[hooks.state."{os.path.realpath(target)}:{key}"]')
        lines += [f"{k} = {json.dumps(v)}" for k, v in state.items()]
    return "\n".join(lines) + "\n"


def test_codex_install_says_the_hooks_must_be_trusted_and_status_says_which_are(tmp_path: Path) -> None:
    real, home, db = tmp_path / "real-home", tmp_path / "home", tmp_path / "m.db"
    real.mkdir()
    home.symlink_to(real)  # Codex keys trust by the file's real path
    target = install.settings_path("codex", home, {})
    target.parent.mkdir(parents=True)
    theirs = {"hooks": {"SessionStart": [{"hooks": [THEIRS]}]}}  # ours is the second group: index 1
    target.write_text(json.dumps(theirs), "utf-8")
    made = cli(home, db, "hooks", "install", "--client", "codex")
    assert made.returncode == 0, made.stderr
    assert "type /hooks" in made.stdout and "--dangerously-bypass-hook-trust" in made.stdout
    assert "for tests only" in made.stdout

    shown = cli(home, db, "hooks", "status", "--client", "codex").stdout
    assert (
        "codex trust: session-start not trusted, prompt not trusted, stop not trusted, pre-compact not trusted" in shown
    )
    doctor = {c["name"]: c for c in json.loads(cli(home, db, "doctor", "--json").stdout)}
    assert not doctor["hooks codex"]["ok"] and "trust it in its /hooks view" in doctor["hooks codex"]["detail"]

    data = json.loads(target.read_text("utf-8"))["hooks"]
    hook_of = {name: data[name][-1]["hooks"][0] for name in ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact")}
    state = {
        "session-start": (
            "session_start:1:0",
            {"trusted_hash": install.codex_hash("SessionStart", hook_of["SessionStart"])},
        ),
        "prompt": (
            "user_prompt_submit:0:0",
            {"enabled": False, "trusted_hash": install.codex_hash("UserPromptSubmit", hook_of["UserPromptSubmit"])},
        ),
        "stop": ("stop:0:0", {"trusted_hash": "sha256:" + "0" * 64}),  # trusted, then the entry changed
    }
    (target.parent / "config.toml").write_text(trust_state(target, state), "utf-8")
    got = json.loads(cli(home, db, "hooks", "status", "--client", "codex", "--json").stdout)["clients"][0]
    assert got["trust"] == {
        "session-start": "trusted",
        "prompt": "turned off",
        "stop": "changed since trusted",
        "pre-compact": "not trusted",
    }
    # all four trusted: doctor's check passes
    state = {
        e: (k, {"trusted_hash": install.codex_hash(n, hook_of[n])})
        for (e, (k, _)), n in zip(
            {**state, "pre-compact": ("pre_compact:0:0", {})}.items(),
            ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact"),
            strict=True,
        )
    }
    (target.parent / "config.toml").write_text(trust_state(target, state), "utf-8")
    doctor = {c["name"]: c for c in json.loads(cli(home, db, "doctor", "--json").stdout)}
    assert doctor["hooks codex"]["ok"], doctor["hooks codex"]
    (target.parent / "config.toml").write_text("[hooks.state\nnot toml", "utf-8")
    got = json.loads(cli(home, db, "hooks", "status", "--client", "codex", "--json").stdout)["clients"][0]
    assert set(got["trust"].values()) == {"unknown"}


def test_a_real_codex_lists_the_installed_entries_with_the_hashes_computed_here(tmp_path: Path) -> None:
    codex = str(cli_path("codex"))  # the pinned CLI in .ci/node: skipped without it, a failure in CI
    home, db = tmp_path / "home", tmp_path / "m.db"
    assert cli(home, db, "hooks", "install", "--client", "codex").returncode == 0
    target = install.settings_path("codex", home, {})
    env = {**os.environ, "HOME": str(home), "CODEX_HOME": str(target.parent)}
    hooks = codex_list.hooks_list(str(tmp_path), env, codex)  # Codex's app-server, as its own UIs ask it
    listed = {h["key"].rsplit(":", 3)[1]: h for h in hooks}
    data = json.loads(target.read_text("utf-8"))["hooks"]
    for name, label in install.CODEX_LABELS.items():
        assert listed[label]["currentHash"] == install.codex_hash(name, data[name][0]["hooks"][0])
        assert listed[label]["trustStatus"] == "untrusted"


# -- the key file: its path in the entries, a key that does not open the store refused --------------------


def key_file(path: Path, key: str) -> Path:
    path.write_text(key + "\n", "utf-8")
    path.chmod(0o600)
    return path


def test_the_key_file_goes_into_the_entries_and_the_hooks_open_the_encrypted_store(tmp_path: Path) -> None:
    home, db = tmp_path / "home", tmp_path / "m.db"
    key = key_file(tmp_path / "store.key", "correct horse battery staple")
    made = cli(home, db, "--key-file", str(key), "hooks", "install", "--client", "claude-code", "--json")
    assert made.returncode == 0, made.stderr
    got = json.loads(made.stdout)
    assert got["key_file"] == str(key.resolve()) and not got["problems"]
    assert "correct horse" not in install.settings_path("claude-code", home, {}).read_text("utf-8")
    for cmd in got["events"].values():
        argv = shlex.split(cmd)
        assert argv[argv.index("--key-file") + 1] == str(key.resolve())
    log = tmp_path / f"{SESSION}.jsonl"
    log.write_text("\n".join(agent_logs.transcript(SESSION, CWD, 4)) + "\n", "utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("LOCALMEM_KEY", "LOCALMEM_KEY_FILE")}
    env["LOCALMEM_HOOK_FOREGROUND"] = "1"

    def run(event: str, payload: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            got["events"][event],
            shell=True,
            input=json.dumps(payload).encode(),
            capture_output=True,
            timeout=300,
            env=env,
        )

    assert run("stop", {"session_id": SESSION, "transcript_path": str(log), "cwd": CWD}).returncode == 0
    assert keys.is_encrypted(db), status.read(db)  # the first ingest made it, with the key
    asked = run("prompt", {"session_id": "s2", "cwd": CWD, "prompt": "what does module 2 return for empty input?"})
    assert b"Module 2 returns an empty list" in asked.stdout, status.read(db)
    assert not status.read(db).get("last_error")

    # another key: refused, nothing written; no key at all: refused too
    settings = install.settings_path("claude-code", home, {})
    before = settings.read_text("utf-8")
    wrong = cli(
        home,
        db,
        "--key-file",
        str(key_file(tmp_path / "other.key", "wrong")),
        "hooks",
        "install",
        "--client",
        "claude-code",
    )
    assert wrong.returncode != 0 and "wrong key" in wrong.stderr and "nothing was written" in wrong.stderr
    none = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), "hooks", "install", "--client", "gemini"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "HOME": str(home)},
    )
    assert none.returncode != 0 and "this store is encrypted, no key given" in none.stderr
    assert settings.read_text("utf-8") == before and not install.settings_path("gemini", home, {}).exists()

    # a key file others may read: doctor's hooks check names it, and a hook counts it as 'key missing'
    key.chmod(0o644)
    doctor = {c["name"]: c for c in json.loads(cli(home, db, "doctor", "--json").stdout)}
    assert not doctor["hooks claude-code"]["ok"] and "readable by others" in doctor["hooks claude-code"]["detail"]
    run("prompt", {"session_id": "s3", "cwd": CWD, "prompt": "what does module 3 return?"})
    assert status.read(db)["last_error"]["kind"] == "key missing"
