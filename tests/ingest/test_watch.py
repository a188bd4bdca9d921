"""The watcher on a temp folder with the real watchdog observer: chunked writes are read
once and whole, renames are not read again, bad files do not stop it, it catches up on
start, ignores temporary and hidden files, and stops cleanly on SIGTERM / SIGINT."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from localmem.config import Settings
from localmem.ingest.watch import Watcher, eligible
from localmem.storage.write.store import Store
from tests.helpers.cli import driver, jsonl_lines
from tests.helpers.fakes import HashEmbedder

SETTLE = 0.5


class Running:
    """A Watcher in a thread that owns its own store, like `localmem watch`."""

    def __init__(self, root: Path, db: Path, recursive: bool = False) -> None:
        self.root, self.db, self.recursive = root, db, recursive
        self.events: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)
        self.thread.start()
        self.wait_for(lambda e: e["event"] == "started")

    def _run(self) -> None:
        with Store(self.db, embedder=HashEmbedder(), settings=Settings(db=self.db)) as store:
            w = Watcher(
                store, self.root, recursive=self.recursive, settle=SETTLE, poll=0.05, on_event=self.events.append
            )
            w.run(self.stop)

    def wait_for(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 15) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in list(self.events):
                if pred(e):
                    return e
            assert self.thread.is_alive(), self.events
            time.sleep(0.02)
        raise AssertionError(f"no such event; got {self.events}")

    def of(self, kind: str, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == kind and Path(e["path"]).name == name]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "inbox"
    d.mkdir()
    return d


@pytest.fixture
def watching(folder: Path, tmp_path: Path) -> Iterator[Running]:
    r = Running(folder, tmp_path / "m.db")
    yield r
    r.close()


def turns(db: Path) -> int:
    conn = apsw.Connection(str(db))
    try:
        return int(conn.execute("SELECT count(*) FROM turns").fetchone()[0])
    finally:
        conn.close()


def quiet_period() -> None:
    time.sleep(SETTLE * 3)


def test_a_file_written_in_chunks_is_ingested_once_and_whole(watching: Running, folder: Path) -> None:
    content = jsonl_lines(0, 60).encode()
    cuts = [0, 101, 1003, 2005, 3007, len(content)]  # every cut falls inside a line
    p = folder / "chat.jsonl"
    with p.open("wb") as fh:
        for a, b in itertools.pairwise(cuts):
            fh.write(content[a:b])
            fh.flush()
            time.sleep(0.08)
    done = watching.wait_for(lambda e: e["event"] == "ingested" and e["path"].endswith("chat.jsonl"))
    quiet_period()
    assert done["report"]["new"] == 60
    assert len(watching.of("ingested", "chat.jsonl")) == 1 and not watching.of("error", "chat.jsonl")
    assert turns(watching.db) == 60


def test_a_rename_is_not_ingested_again_and_a_delete_keeps_memories(watching: Running, folder: Path) -> None:
    (folder / "a.jsonl").write_text(jsonl_lines(0, 5), "utf-8")
    watching.wait_for(lambda e: e["event"] == "ingested")
    (folder / "a.jsonl").rename(folder / "b.jsonl")
    watching.wait_for(lambda e: e["event"] == "moved" and e["path"].endswith("b.jsonl"))
    quiet_period()
    assert [e["event"] for e in watching.events if e["event"] in ("ingested", "error")] == ["ingested"]
    (folder / "b.jsonl").unlink()
    quiet_period()
    assert turns(watching.db) == 5


def test_a_bad_file_does_not_stop_the_watcher(watching: Running, folder: Path) -> None:
    (folder / "bad.json").write_text('[{"uuid": "c", "chat_messages": [', "utf-8")
    err = watching.wait_for(lambda e: e["event"] == "error")
    assert "bad.json" in err["message"]
    (folder / "good.jsonl").write_text(jsonl_lines(0, 3), "utf-8")
    watching.wait_for(lambda e: e["event"] == "ingested" and e["path"].endswith("good.jsonl"))
    assert turns(watching.db) == 3


def test_temporary_and_hidden_files_are_ignored_until_renamed(watching: Running, folder: Path) -> None:
    for name in (".hidden.jsonl", "download.jsonl.part", "notes.tmp", "picture.png", "x.jsonl~"):
        (folder / name).write_text(jsonl_lines(0, 2), "utf-8")
    quiet_period()
    assert [e["event"] for e in watching.events] == ["started"]
    (folder / "download.jsonl.part").rename(folder / "download.jsonl")  # the download finished
    watching.wait_for(lambda e: e["event"] == "ingested" and e["path"].endswith("download.jsonl"))


def test_catch_up_on_start(folder: Path, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    (folder / "old.jsonl").write_text(jsonl_lines(0, 4), "utf-8")
    (folder / "grows.jsonl").write_text(jsonl_lines(100, 103), "utf-8")
    first = Running(folder, db)
    first.wait_for(lambda e: len([x for x in first.events if x["event"] == "ingested"]) == 2)
    first.close()
    # while no watcher runs: a rename, an append, a new file
    (folder / "old.jsonl").rename(folder / "renamed.jsonl")
    with (folder / "grows.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(jsonl_lines(103, 105))
    (folder / "new.md").write_text("## 2024-05-01\nAnn: I got a new bike.\n", "utf-8")
    second = Running(folder, db)
    try:
        second.wait_for(lambda e: e["event"] == "moved" and e["path"].endswith("renamed.jsonl"))
        grown = second.wait_for(lambda e: e["event"] == "ingested" and e["path"].endswith("grows.jsonl"))
        assert grown["report"]["new"] == 2 and grown["report"]["resumed_at_unit"] == 3
        second.wait_for(lambda e: e["event"] == "ingested" and e["path"].endswith("new.md"))
        quiet_period()
        assert not second.of("ingested", "renamed.jsonl")
    finally:
        second.close()
    assert turns(db) == 4 + 5 + 1


def test_eligible() -> None:
    root = Path("/r")
    assert eligible(Path("/r/conversations.json"), root)
    assert eligible(Path("/r/sub/chat.MD"), root)
    for name in ("/r/.git/x.json", "/r/a.json.crdownload", "/r/a.swp", "/r/memory.db", "/other/a.json", "/r/~$a.txt"):
        assert not eligible(Path(name), root), name


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_command_stops_cleanly_on_a_signal(folder: Path, tmp_path: Path, sig: signal.Signals) -> None:
    (folder / "a.jsonl").write_text(jsonl_lines(0, 3), "utf-8")
    cmd = driver("--db", str(tmp_path / "m.db"), "watch", str(folder), "--settle", "0.2", "--json")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    events = []
    for line in proc.stdout:
        events.append(json.loads(line))
        if events[-1]["event"] == "ingested":
            break
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=15)
    events += [json.loads(line) for line in out.splitlines()]
    assert proc.returncode == 0, err
    assert [e["event"] for e in events] == ["started", "ingested", "stopped"]
    assert "Traceback" not in err
