"""Capture: the agents' default folders backfilled by `localmem capture` (a real CLI
process; resumable, idempotent, progress, --json; VS Code's chat sessions included), a
step the agent is still in held back until it is whole, and `watch` following a transcript
that grows, with the real watchdog observer: every turn once, in order; an agent's folder
and its session folders made after `watch` started are followed too (a real process)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from localmem.bench import agent_logs, watch_bench
from localmem.config import Settings
from localmem.ingest import capture, load, runner, units
from localmem.ingest.watch import Watcher
from localmem.storage.bench import reads
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SESSION = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"


def fake_home(tmp_path: Path) -> Path:
    """A home with the fixtures where each agent keeps its logs, all two days old."""
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "claude-code", home / ".claude" / "projects")
    day = home / ".codex" / "sessions" / "2025" / "10" / "14"
    day.mkdir(parents=True)
    for f in (FIXTURES / "codex").glob("*.jsonl"):
        shutil.copy(f, day)
    shutil.copytree(FIXTURES / "gemini", home / ".gemini" / "tmp" / "3f9a")
    shutil.copytree(FIXTURES / "vscode" / "User", home / ".config" / "Code" / "User")
    (home / ".config" / "Code" / "User" / "globalStorage" / "state.vscdb").write_bytes(b"SQLite format 3\0")
    (home / ".claude" / "projects" / "notes.txt").write_text("not a log", "utf-8")
    old = time.time() - 2 * 86400
    for f in home.rglob("*"):
        os.utime(f, (old, old))
    return home


def cli(home: Path, db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME", "VSCODE_PORTABLE"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args], capture_output=True, text=True, timeout=300, env=env
    )


def stored_texts(db: Path) -> list[str]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [t.text for t in reads.turn_texts(conn)]
    finally:
        conn.close()


def test_capture_backfills_the_default_folders_once(tmp_path: Path) -> None:
    home = fake_home(tmp_path)
    db = tmp_path / "m.db"
    first = cli(home, db, "capture", "--json", "--progress-every", "0.001")
    assert first.returncode == 0, first.stderr
    got = json.loads(first.stdout)
    assert [loc["client"] for loc in got["locations"]] == [
        *(
            "claude-code",
            "codex",
            "gemini",
            "vscode",
            "vscode",
            "copilot",
            "cursor",
            "opencode",
        )  # aider only when asked
    ]
    assert got["files"] == got["read"] == 9 and got["unchanged"] == 0 and not got["errors"]
    by_client = {c: n["files"] for c, n in got["by_client"].items()}
    assert by_client == {"claude-code": 2, "codex": 2, "gemini": 2, "vscode": 3}
    assert got["new"] > 30 and "ETA" in first.stderr  # progress with an ETA on stderr
    # every turn a complete read of each file gives, and nothing else
    expected = []
    for f in sorted((home / ".claude" / "projects").rglob("*.jsonl")):
        expected += [t.text for s in load(f, "claude-code") for t in s.turns]
    for f in sorted((home / ".config" / "Code").rglob("*.json*")):
        expected += [t.text for s in load(f, "vscode") for t in s.turns] if f.name != "workspace.json" else []
    texts = stored_texts(db)
    assert set(expected) <= set(texts) and len(texts) == got["new"]
    assert "Why does applying two coupons fail at checkout?" in texts

    again = json.loads(cli(home, db, "capture", "--json").stdout)
    assert again["unchanged"] == 9 and again["read"] == 0 and again["new"] == 0

    # a log that grew: only what is new is read and stored
    rollout = next((home / ".codex").rglob("rollout-2025-10-14*.jsonl"))
    line = {"timestamp": "2025-10-14T16:30:00.000Z", "type": "response_item"}
    line["payload"] = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "One more thing."}],
    }
    with rollout.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")
    os.utime(rollout, (time.time() - 3600, time.time() - 3600))
    grown = json.loads(cli(home, db, "capture", "--json", "--only", "codex").stdout)
    assert grown["read"] == 1 and grown["new"] == 1 and grown["already_present"] == 0
    assert stored_texts(db)[-1] == "One more thing."

    plain = cli(home, db, "capture")
    assert plain.returncode == 0 and "9 unchanged" in plain.stdout


def test_capture_reads_other_folders_and_reports_bad_files(tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere" / "-home-dev-x"
    folder.mkdir(parents=True)
    (folder / f"{SESSION}.jsonl").write_text(
        "\n".join(agent_logs.transcript(SESSION, "/home/dev/x", 2)) + "\n", "utf-8"
    )
    (folder / "broken.jsonl").write_text('{"type": "user", "sessionId": "x", "message": \n', "utf-8")
    old = time.time() - 3600  # not being written: read to its end
    for f in folder.iterdir():
        os.utime(f, (old, old))
    db = tmp_path / "m.db"
    run = cli(
        tmp_path, db, "capture", "--json", "--only", "claude-code", "--dir", f"claude-code={tmp_path / 'elsewhere'}"
    )
    got = json.loads(run.stdout)
    assert got["read"] + len({e["file"] for e in got["errors"]}) == 2 and got["new"] == 6
    assert any("broken.jsonl" in e["file"] for e in got["errors"])
    bad = cli(tmp_path, db, "capture", "--dir", "nope")
    assert bad.returncode != 0 and "CLIENT=PATH" in bad.stderr


def test_a_step_still_open_is_held_until_it_is_whole(tmp_path: Path) -> None:
    lines = list(agent_logs.transcript(SESSION, "/home/dev/x", 2))
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(lines[:8]) + "\n", "utf-8")  # exchange 1 stops after its tool call
    held = [t.text for u in units(log, "claude-code", hold=True) for s in u.sessions for t in s.turns]
    assert held == [*agent_logs.expected_turns(1), agent_logs.expected_turns(2)[3]]
    whole = [t.text for u in units(log, "claude-code") for s in u.sessions for t in s.turns]
    assert whole[-1] == "I will run the tests of module 1 first.\nran: pytest tests/test_m1.py"
    # through the runner: the held step is stored whole once the log goes on
    with Store(tmp_path / "m.db", embedder=HashEmbedder(), settings=Settings(db=tmp_path / "m.db")) as store:
        first = runner.ingest_file(store, log, "claude-code", hold=True)
        assert first.new == 4
        log.write_text("\n".join(lines) + "\n", "utf-8")
        second = runner.ingest_file(store, log, "claude-code", hold=True)
        assert second.new == 1 and second.already_present == 0  # the closing text opens a step: held
        last = runner.ingest_file(store, log, "claude-code")  # the agent stopped: read to the end
        assert last.new == 1 and last.already_present == 0
        texts = [t.text for t in reads.turn_texts(store.conn)]
    assert texts == agent_logs.expected_turns(2)


class Following:
    """``Watcher.agents`` in a thread with its own store, as `localmem watch` runs it."""

    def __init__(self, root: Path, db: Path, final_after: float, client: str = "claude-code") -> None:
        self.events: list[dict[str, Any]] = []
        self.stop = threading.Event()
        locs = capture.locations([client], {client: root})
        self.db = db

        def run() -> None:
            with Store(db, embedder=HashEmbedder(), settings=Settings(db=db)) as store:
                w = Watcher.agents(
                    store, locs, poll=0.02, settle=0.2, final_after=final_after, on_event=self.events.append
                )
                w.run(self.stop)

        self.thread = threading.Thread(target=run)
        self.thread.start()
        self.wait(lambda: any(e["event"] == "started" for e in self.events))

    def wait(self, pred: Callable[[], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            assert self.thread.is_alive(), self.events
            assert time.monotonic() < deadline, self.events
            time.sleep(0.05)

    def stored(self) -> int:
        return sum(e.get("report", {}).get("new", 0) for e in self.events if e["event"] == "ingested")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive()


def test_watch_follows_a_growing_transcript_every_turn_once_in_order(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    folder = root / "-home-dev-app"
    folder.mkdir(parents=True)
    log = folder / f"{SESSION}.jsonl"
    log.write_text("", "utf-8")
    exchanges = 30
    lines = list(agent_logs.transcript(SESSION, "/home/dev/app", exchanges))
    watch = Following(root, tmp_path / "m.db", final_after=1.0)
    try:
        with log.open("a", encoding="utf-8") as fh:
            for n, line in enumerate(lines):
                if n % 7 == 3:  # half a line, then the rest
                    fh.write(line[: len(line) // 2])
                    fh.flush()
                    time.sleep(0.03)
                    fh.write(line[len(line) // 2 :] + "\n")
                else:
                    fh.write(line + "\n")
                fh.flush()
                time.sleep(0.01)
        expected = agent_logs.expected_turns(exchanges)
        watch.wait(lambda: watch.stored() >= len(expected))
        reads_made = sum(1 for e in watch.events if e["event"] == "ingested")
    finally:
        watch.close()
    assert stored_texts(tmp_path / "m.db") == expected
    assert reads_made > 1  # read as it grew, not once at the end
    assert not [e for e in watch.events if e["event"] == "error"]


def test_watch_follows_a_vscode_session_saved_again_and_again(tmp_path: Path) -> None:
    """A VS Code ``.json`` session rewritten whole on every save (each request first saved
    mid-stream, as VS Code writes one: cancelled, no result) and a ``.jsonl`` log appended
    entry by entry, while the real watcher follows the folder: every turn once, in order,
    no half-streamed answer stored."""
    user = tmp_path / "User"
    chats = user / "workspaceStorage" / "8b1a" / "chatSessions"
    chats.mkdir(parents=True)
    src = FIXTURES / "vscode" / "User" / "workspaceStorage" / "8b1a9953c4611296a827abf8c47804d7" / "chatSessions"
    full = json.loads(next(src.glob("*.json")).read_text("utf-8"))
    flat = chats / "2f7d5c1b.json"
    log_lines = next(src.glob("*.jsonl")).read_text("utf-8").splitlines(keepends=True)
    log = chats / "7e3a1c9d.jsonl"
    watch = Following(user, tmp_path / "m.db", final_after=1.0, client="vscode")
    try:
        for n in range(1, len(full["requests"]) + 1):
            saved = json.loads(json.dumps(full))
            saved["requests"] = saved["requests"][:n]
            last = saved["requests"][-1]
            streaming = {**last, "response": last["response"][:-1], "modelState": {"value": 2, "completedAt": 1}}
            streaming.pop("result")
            for version in ({**saved, "requests": [*saved["requests"][:-1], streaming]}, saved):
                flat.write_text(json.dumps(version, indent=2), "utf-8")
                time.sleep(0.3)
        for line in log_lines:
            with log.open("a", encoding="utf-8") as fh:
                fh.write(line)
            time.sleep(0.05)
        expected = [t.text for s in load(flat, "vscode") for t in s.turns]
        expected_log = [t.text for s in load(log, "vscode") for t in s.turns]
        watch.wait(lambda: len(watch_texts(tmp_path / "m.db")) >= len(expected) + len(expected_log))
        time.sleep(1.5)  # past final_after: the last reads are done
    finally:
        watch.close()
    texts = stored_texts(tmp_path / "m.db")
    assert sorted(texts) == sorted(expected + expected_log) and len(texts) == 9
    assert [t for t in texts if t in expected] == expected and [t for t in texts if t in expected_log] == expected_log
    assert not [e for e in watch.events if e["event"] == "error"]


def watch_texts(db: Path) -> list[str]:
    try:
        return stored_texts(db)
    except apsw.Error:  # not made yet
        return []


def test_watch_follows_agents_folders_made_after_it_started(tmp_path: Path) -> None:
    """A real `localmem watch` in a home with no ~/.claude/projects: the folder, a project
    folder and a session log are made and the log grows; later another project's folder
    and log appear. Every turn is stored once, in order."""
    home = tmp_path / "home"
    home.mkdir()
    db = tmp_path / "m.db"
    env = {**os.environ, "HOME": str(home)}
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "XDG_CONFIG_HOME", "VSCODE_PORTABLE"):
        env.pop(name, None)
    cmd = [sys.executable, "-m", "localmem", "--db", str(db), "watch", "--json", "--final-after", "1"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    events: list[dict[str, Any]] = []

    def read_events() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            events.append(json.loads(line))

    reader = threading.Thread(target=read_events, daemon=True)
    reader.start()

    def wait(pred: Callable[[], bool], timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            assert proc.poll() is None, (events, proc.stderr.read() if proc.stderr else "")
            assert time.monotonic() < deadline, events
            time.sleep(0.1)

    try:
        wait(lambda: any(e["event"] == "started" for e in events))
        assert "waiting for" in events[0]["message"] and ".claude" in events[0]["message"]
        lines = list(agent_logs.transcript(SESSION, "/home/dev/app", 6))
        log = home / ".claude" / "projects" / "-home-dev-app" / f"{SESSION}.jsonl"
        log.parent.mkdir(parents=True)
        with log.open("a", encoding="utf-8") as fh:
            for line in lines:
                fh.write(line + "\n")
                fh.flush()
                time.sleep(0.05)
        first = agent_logs.expected_turns(6)
        wait(lambda: len(watch_texts(db)) >= len(first))
        assert any(e["event"] == "watching" for e in events)
        other = "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"
        log2 = home / ".claude" / "projects" / "-home-dev-lib" / f"{other}.jsonl"
        log2.parent.mkdir(parents=True)
        log2.write_text("\n".join(agent_logs.transcript(other, "/home/dev/lib", 2)) + "\n", "utf-8")
        second = [t for s in load(log2, "claude-code") for t in s.turns]
        wait(lambda: len(watch_texts(db)) >= len(first) + len(second))
        time.sleep(1.5)  # past --final-after: nothing more comes
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0
    texts = stored_texts(db)
    assert texts == first + [t.text for t in second]
    assert not [e for e in events if e["event"] == "error"]


def test_watch_with_a_folder_takes_no_agents_flags(tmp_path: Path) -> None:
    both = cli(tmp_path, tmp_path / "m.db", "watch", str(tmp_path), "--only", "codex")
    assert both.returncode != 0 and "without a folder" in both.stderr


@pytest.mark.parametrize("client", capture.CLIENTS)
def test_default_folders_follow_the_agents_environment(client: str, tmp_path: Path) -> None:
    env = {"CODEX_HOME": str(tmp_path / "cx"), "CLAUDE_CONFIG_DIR": str(tmp_path / "cc")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    want = {"claude-code": tmp_path / "cc" / "projects", "codex": tmp_path / "cx" / "sessions"}
    want["vscode"] = tmp_path / "xdg" / "Code" / "User"
    want |= {"copilot": tmp_path / ".copilot" / "session-state", "cursor": tmp_path / ".cursor" / "projects"}
    want["opencode"] = tmp_path / "data" / "opencode"  # its database's folder
    want["aider"] = tmp_path  # a folder of repositories: the home folder unless --dir names one
    got = capture.default_root(client, env, home=tmp_path, platform="linux")
    assert got == want.get(client, tmp_path / ".gemini" / "tmp")
    assert capture.default_root(client, {}, home=tmp_path).is_relative_to(tmp_path)


def test_vscode_folders_on_each_system(tmp_path: Path) -> None:
    def root(platform: str, **env: str) -> Path:
        return capture.default_root("vscode", env, home=tmp_path, platform=platform)

    assert root("linux") == tmp_path / ".config" / "Code" / "User"
    assert root("darwin") == tmp_path / "Library" / "Application Support" / "Code" / "User"
    assert root("win32", APPDATA="C:/Users/dev/AppData/Roaming") == Path("C:/Users/dev/AppData/Roaming/Code/User")
    assert root("linux", VSCODE_PORTABLE=str(tmp_path / "vsc")) == tmp_path / "vsc" / "user-data" / "User"
    locs = capture.locations(["vscode"], {"vscode": FIXTURES / "vscode" / "User"})
    assert [loc.root.name for loc in locs] == ["workspaceStorage", "emptyWindowChatSessions"]
    files = [p.name for loc in locs for p in loc.files()]
    assert sorted(files) == sorted(p.name for p in (FIXTURES / "vscode").rglob("*-*.json*"))
    ws = locs[0].root
    assert not locs[0].accepts(ws / "h" / "workspace.json") and not locs[0].accepts(ws / "h" / "x" / "y.json")
    assert locs[0].accepts(ws / "h" / "chatSessions" / "s.jsonl")


def test_bench_watch_vscode_log_whose_folder_appears_later(tmp_path: Path) -> None:
    """`localmem bench watch --client vscode`'s run, small: a real `localmem watch` process
    finds VS Code's folder made after it started and stores every finished answer once."""
    r = watch_bench.run(tmp_path, appends=60, interval=0.02, final_after=1.0, client="vscode")
    assert r["turns_expected"] == r["turns_stored"] > 0
    assert r["missing"] == r["duplicated"] == r["unexpected"] == r["out_of_order"] == 0
    assert r["exit_code"] == 0
