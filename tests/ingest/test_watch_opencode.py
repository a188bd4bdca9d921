"""`localmem watch` and OpenCode's database, with the real watcher (watchdog, a thread that
owns its store): a database made after the watcher started is read, a turn OpenCode writes
later (into the ``-wal``) is read from where the last read stopped, an assistant message
still being written waits and is stored once complete, and each turn is stored once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from localmem.config import Settings
from localmem.ingest import capture
from localmem.ingest.watch import Watcher
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder
from tests.helpers.opencode_db import OpenCodeDb, now_ms, text


def stored(db: Path) -> list[str]:
    with Store(db, embedder=HashEmbedder(), settings=Settings(db=db)) as store:
        return [str(r[0]) for r in store.conn.execute("SELECT text FROM turns ORDER BY id").fetchall()]


def until(pred: Callable[[], bool], events: list[dict[str, Any]], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"not reached; events: {events}")


def test_watch_follows_opencode_database(tmp_path: Path) -> None:
    data, mem = tmp_path / "opencode", tmp_path / "mem.db"
    data.mkdir()
    events: list[dict[str, Any]] = []
    stop = threading.Event()

    def run() -> None:
        with Store(mem, embedder=HashEmbedder(), settings=Settings(db=mem)) as store:
            loc = capture.Location("opencode", data, "opencode")
            Watcher.agents(store, [loc], poll=0.05, final_after=1.0, on_event=events.append).run(stop)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        until(lambda: any(e["event"] == "started" for e in events), events)
        db = OpenCodeDb(data / "opencode.db")
        t = now_ms()
        db.session("ses_w", "/home/dev/shop", t=t)
        db.message("ses_w", "user", [text("Where is the coupon limit set?")], t)
        db.message("ses_w", "assistant", [text("In settings.py, COUPON_LIMIT.")], t + 10)
        until(lambda: len(stored(mem)) == 2, events)
        assert (data / "opencode.db-wal").stat().st_size > 0  # OpenCode's writes land in the -wal first
        db.message("ses_w", "user", [text("Raise it to three.")], t + 20)
        writing = db.message("ses_w", "assistant", [{"type": "step-start"}], t + 30, time={"created": t + 30})
        until(lambda: len(stored(mem)) == 3, events)
        time.sleep(0.5)
        db.complete(writing, t + 40, "Raised COUPON_LIMIT to 3.")
        db.close()
        until(lambda: len(stored(mem)) == 4, events)
        time.sleep(1.5)  # the read once it is quiet (final_after) adds nothing
    finally:
        stop.set()
        thread.join(15)
    assert not thread.is_alive()
    assert stored(mem) == [
        "Where is the coupon limit set?",
        "In settings.py, COUPON_LIMIT.",
        "Raise it to three.",
        "Raised COUPON_LIMIT to 3.",
    ]
    assert not [e for e in events if e["event"] == "error"], events
