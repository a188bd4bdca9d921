"""localmem's plugins and ``hooks install --all`` with the agents' real CLIs, offline.

- ``localmem hooks plugin`` writes a Claude Code plugin that ``claude plugin validate``
  accepts (the marketplace and the plugin), a Gemini CLI extension that ``gemini extensions
  validate`` accepts, and a Codex plugin that Codex's own loader adds and lists as
  installed and enabled (``codex plugin marketplace add``, ``codex plugin add``); each
  validator refuses a broken copy, so the acceptance is not vacuous.
- Added with the one line ``hooks plugin`` prints, each plugin's hooks run in a real
  session and store its turns once.
- ``hooks install --all`` in one HOME with the three agents, Copilot CLI and OpenCode: a
  session of each is stored once (no agent twice), and ``uninstall --all`` gives every settings file
  back byte for byte.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest

from localmem.hooks import codex_list
from tests.helpers.agent_clis import CLIENTS, NODE_BIN, Rig, cli_path, exported, rig, wait_for_turns
from tests.helpers.copilot_cli import copilot_bin
from tests.helpers.copilot_cli import env_for as copilot_env
from tests.helpers.opencode_cli import env_for as opencode_env
from tests.helpers.opencode_cli import opencode_bin

pytestmark = pytest.mark.slow
SETTINGS = {"claude-code": ".claude/settings.json", "codex": ".codex/hooks.json", "gemini": ".gemini/settings.json"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / "cache"  # the embedding model's, as tests/conftest.py keeps it


def run_cli(r: Rig, *argv: str) -> subprocess.CompletedProcess[str]:
    """A client's own command (its first word found in .ci/node) in the rig's HOME."""
    path = str(NODE_BIN / argv[0])
    return subprocess.run(
        [path, *argv[1:]],
        env=r.env(),
        cwd=r.project,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


def write_plugin(r: Rig, out: Path) -> dict[str, object]:
    done = r.localmem("hooks", "plugin", "--client", r.client, "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    got: dict[str, object] = json.loads(done.stdout)
    return got


@pytest.mark.parametrize("client", ["claude-code", "gemini"])
def test_the_clients_validator_accepts_the_plugin_and_refuses_a_broken_one(
    client: str, tmp_path: Path, cache: Path
) -> None:
    cli_path(client)
    with rig(client, tmp_path, cache) as r:
        out = tmp_path / "plugin"
        write_plugin(r, out)
        if client == "claude-code":
            targets = [out, out / "localmem"]  # the marketplace, then the plugin
            validate = ["claude", "plugin", "validate"]
            manifest = out / "localmem" / ".claude-plugin" / "plugin.json"
        else:
            targets = [out]
            validate = ["gemini", "extensions", "validate"]
            manifest = out / "gemini-extension.json"
        for target in targets:
            done = run_cli(r, *validate, str(target))
            said = done.stdout + done.stderr
            assert done.returncode == 0 and "failed" not in said.lower(), said
        broken = json.loads(manifest.read_text("utf-8"))
        del broken["name"]
        manifest.write_text(json.dumps(broken), "utf-8")
        done = run_cli(r, *validate, str(targets[-1]))
        assert done.returncode != 0 or "Validation failed" in done.stdout, done.stdout + done.stderr


def test_codex_loads_the_plugin_from_its_marketplace(tmp_path: Path, cache: Path) -> None:
    cli_path("codex")
    with rig("codex", tmp_path, cache) as r:
        out = tmp_path / "plugin"
        write_plugin(r, out)
        for argv in (
            ("codex", "plugin", "marketplace", "add", str(out)),
            ("codex", "plugin", "add", "localmem@localmem"),
        ):
            done = run_cli(r, *argv)
            assert done.returncode == 0, done.stdout + done.stderr
        listed = run_cli(r, "codex", "plugin", "list").stdout
        assert any(
            line.split()[:3] == ["localmem@localmem", "installed,", "enabled"] for line in listed.splitlines()
        ), listed
        # whether Codex runs the plugin's hooks, in its own words (hooks.codex_list): none trusted yet
        status = json.loads(r.localmem("hooks", "status", "--client", "codex", "--json").stdout)["clients"][0]
        assert status["trust"] == dict.fromkeys(("session-start", "prompt", "stop", "pre-compact"), "not trusted")
        assert any("/hooks" in p for p in status["problems"]), status
        # the person trusts them in /hooks, which records Codex's hashes in config.toml: trusted
        listed_hooks = codex_list.hooks_list(str(r.project), r.env())
        config = r.home / ".codex" / "config.toml"
        with config.open("a", encoding="utf-8") as fh:
            for h in listed_hooks:
                if h.get("pluginId") == "localmem@localmem" and not h["key"].endswith("user_prompt_submit:0:0"):
                    # listed as "sha256:<entry>/sha256:<…>"; Codex trusts the entry's part (checked with 0.171)
                    trusted = h["currentHash"].split("/")[0]
                    fh.write(f'\n[hooks.state."{h["key"]}"]\ntrusted_hash = "{trusted}"\n')
        status = json.loads(r.localmem("hooks", "status", "--client", "codex", "--json").stdout)["clients"][0]
        assert status["trust"] == {
            "session-start": "trusted",
            "prompt": "not trusted",
            "stop": "trusted",
            "pre-compact": "trusted",
        }, status
        # a manifest Codex cannot read is not listed as installable
        (out / "localmem" / ".codex-plugin" / "plugin.json").write_text("{ not json", "utf-8")
        bad = run_cli(r, "codex", "plugin", "add", "localmem@localmem")
        assert bad.returncode != 0, bad.stdout


@pytest.mark.parametrize("client", CLIENTS)
def test_a_plugin_added_with_its_one_line_stores_a_session_once(client: str, tmp_path: Path, cache: Path) -> None:
    cli_path(client)
    with rig(client, tmp_path, cache) as r:
        got = write_plugin(r, tmp_path / "plugin")
        for part in str(got["add"]).split(" && "):
            argv = shlex.split(part)
            if argv[:3] == ["gemini", "extensions", "link"]:
                argv.append("--consent")  # the person's yes to Gemini's third-party notice
            done = run_cli(r, *argv)
            assert done.returncode == 0, done.stdout + done.stderr
        assert r.localmem("hooks", "status", "--json").returncode == 0
        shown = json.loads(r.localmem("hooks", "status", "--client", client, "--json").stdout)["clients"][0]
        assert shown["plugin"] and not shown["events"], shown  # by its plugin, not by settings entries
        prompt = f"For the {client} plugin run we keep the invoices in the cellar archive."
        r.session(prompt, "Noted: the cellar archive.")
        wait_for_turns(r.db, 2)
        assert exported(r) == [("user", prompt), ("assistant", "Noted: the cellar archive.")]


def test_install_all_captures_every_agent_once_and_uninstall_all_restores(tmp_path: Path, cache: Path) -> None:
    for client in CLIENTS:
        cli_path(client)
    copilot, opencode = copilot_bin(), opencode_bin()  # skipped without them, a failure in CI
    with ExitStack() as stack:
        rigs = [stack.enter_context(rig(c, tmp_path, cache)) for c in CLIENTS]  # one HOME, one store: one machine
        claude = rigs[0]
        files = {c.client: c.home / SETTINGS[c.client] for c in rigs}
        files["copilot"] = claude.home / ".copilot" / "hooks" / "localmem.json"  # localmem's own files there
        files["opencode"] = claude.home / ".config" / "opencode" / "plugin" / "localmem.js"
        before = {k: p.read_bytes() if p.exists() else None for k, p in files.items()}
        done = claude.localmem("hooks", "install", "--all", "--json")
        assert done.returncode == 0, done.stderr
        acts = {a["client"]: a["action"] for a in json.loads(done.stdout)["agents"]}
        found = {c for c, act in acts.items() if act != "not found"}
        # the three, Copilot CLI and OpenCode: their pinned CLIs on the rigs' PATH (.ci/node)
        assert found == {*CLIENTS, "copilot", "opencode"}, acts
        assert {acts[c] for c in found} == {"installed"}, acts
        said = []
        for n, r in enumerate(rigs, 1):
            prompt = f"In the {r.client} session we agreed the kiln fires on Thursdays."
            r.session(prompt, f"Agreed, Thursdays ({r.client}).")
            said += [("user", prompt), ("assistant", f"Agreed, Thursdays ({r.client}).")]
            wait_for_turns(claude.db, 2 * n)
        # Copilot CLI in the same HOME, against the Responses stand-in Codex's rig serves
        responses = rigs[CLIENTS.index("codex")].stand_in
        env = {**claude.env(), **{k: v for k, v in copilot_env(claude.home, responses).items() if "COPILOT" in k}}
        prompt, reply = "In the copilot session we agreed the kiln fires on Thursdays.", "Agreed, Thursdays (copilot)."
        responses.reply = reply
        ran = subprocess.run(
            [str(copilot), "-p", prompt, "--allow-all-tools", "--no-auto-update"],
            cwd=claude.project,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr[-4000:]
        said += [("user", prompt), ("assistant", reply)]
        wait_for_turns(claude.db, len(said))
        # OpenCode, its plugin file installed, against Claude's Messages stand-in
        own = opencode_env(claude.home, claude.stand_in)  # writes its opencode.json in the same HOME
        env = {**claude.env(), **{k: v for k, v in own.items() if k.startswith("OPENCODE_")}}
        prompt, reply = "In the opencode session we agreed the kiln fires on Thursdays.", "Agreed (opencode)."
        claude.stand_in.reply = reply
        ran = subprocess.run(
            [str(opencode), "run", prompt],
            cwd=claude.project,
            env={**env, "PWD": str(claude.project)},  # OpenCode takes its folder from $PWD
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr[-4000:]
        said += [("user", f'"{prompt}"'), ("assistant", reply)]  # `opencode run` keeps a spaced prompt quoted
        wait_for_turns(claude.db, len(said))
        turns = exported(claude)
        assert sorted(turns) == sorted(said) and len(turns) == len(set(turns)), turns  # each agent once
        gone = claude.localmem("hooks", "uninstall", "--all", "--json")
        undone = {a["client"]: a["action"] for a in json.loads(gone.stdout)["agents"]}
        assert {undone[c] for c in found} == {"restored"}, gone.stdout
        after = {k: p.read_bytes() if p.exists() else None for k, p in files.items()}
        assert after == before
