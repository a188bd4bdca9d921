"""The real OpenCode CLI, offline, and what `localmem capture` reads of its database.

OpenCode runs against the loopback stand-in of the Anthropic Messages API
(``localmem.bench.agent_apis``; the recipe in tests/helpers/opencode_cli.py). One turn of
``opencode run``: `localmem capture --only opencode` stores the person's prompt and the
stand-in's reply once, with the session's folder as its project; a second turn of the same
session (``--continue``) adds only the new turn; a capture with nothing new stores nothing.

The CLI: ``PIN`` from ``.ci/node`` (``npm install --prefix .ci/node opencode-ai@1.18.33``),
or the binary ``$LOCALMEM_OPENCODE_BIN`` names; the test skips when neither is there (fails
under ``$LOCALMEM_REQUIRE_AGENTS``, as CI sets it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from localmem.bench.agent_apis import StandIn
from tests.helpers.opencode_cli import data_dir, env_for, opencode_bin


def test_capture_reads_real_opencode_sessions(tmp_path: Path) -> None:
    command = opencode_bin()
    home, project, db = tmp_path / "home", tmp_path / "project", tmp_path / "store" / "memory.db"
    for d in (home, project, db.parent):
        d.mkdir(parents=True)
    said = [
        ("We keep the invoice cache in SQLite, not Redis.", "Noted: the invoice cache stays in SQLite."),
        ("Which database holds the invoice cache?", "SQLite holds the invoice cache."),
    ]
    with StandIn("anthropic", reply="") as stand_in:
        env = env_for(home, stand_in)

        def opencode(*args: str, reply: str) -> None:
            stand_in.reply = reply
            done = subprocess.run(
                [str(command), "run", *args],
                cwd=project,
                env={**env, "PWD": str(project)},  # OpenCode takes its folder from $PWD, as a shell sets it
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, f"opencode exited {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
            assert reply in done.stdout

        def capture() -> dict[str, object]:
            argv = [sys.executable, "-m", "localmem", "--db", str(db), "capture", "--only", "opencode", "--json"]
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr
            return dict(json.loads(done.stdout))

        opencode(said[0][0], reply=said[0][1])
        assert (data_dir(home) / "opencode.db").is_file()
        first = capture()  # the turn ended (finish "stop"): nothing is held back
        assert first["new"] == 2 and not first["held"] and not first["errors"], first
        assert capture()["new"] == 0
        opencode("--continue", said[1][0], reply=said[1][1])
        again = capture()
        assert again["new"] == 2 and again["already_present"] == 0 and not again["errors"], again
        assert len([r for r in stand_in.requests if r.path.startswith("/v1/messages")]) >= 2

    done = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), "export"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    turns = [json.loads(line) for line in done.stdout.splitlines()]
    assert [t["speaker"] for t in turns] == ["user", "assistant", "user", "assistant"]
    texts = [t["text"] for t in turns]
    assert said[0][0] in texts[0] and texts[1] == said[0][1]  # `opencode run` quotes a prompt with spaces
    assert said[1][0] in texts[2] and texts[3] == said[1][1]
    assert len({t["session"] for t in turns}) == 1
    assert {t["client"] for t in turns} == {"opencode"} and {t["cwd"] for t in turns} == {str(project)}
