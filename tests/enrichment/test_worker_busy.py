"""The enrichment worker survives a long lock: while a real second process holds
``BEGIN IMMEDIATE`` far past the busy timeout, the worker's claims and writes wait with
back-off (logged once), and once the lock is released every job is done, none failed."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from localmem.enrichment.worker import run_worker
from localmem.storage.engine.retry import WAITING
from localmem.storage.layers import queue as jobs
from localmem.storage.write.store import Store
from tests.helpers.busy import lock_held
from tests.helpers.fakes import HashEmbedder, ScriptedGenerator, session


def test_the_worker_waits_for_a_long_lock_then_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LOCALMEM_BUSY_TIMEOUT_MS", "200")
    store = Store(tmp_path / "m.db", embedder=HashEmbedder())
    store.write(session("s1", "2024-05-01T10:00:00", ("Ann", "I adopted a beagle named Rufus."), ("Bob", "Nice!")))
    caplog.set_level(logging.WARNING, logger="localmem.enrichment.worker")
    outcome: dict[str, object] = {}

    def work() -> None:
        try:
            outcome["stats"] = run_worker(store, ScriptedGenerator(), until_empty=True)
        except BaseException as exc:  # the test fails on any escape
            outcome["error"] = exc

    with lock_held(tmp_path / "m.db"):
        worker = threading.Thread(target=work)
        worker.start()
        deadline = time.monotonic() + 60
        while WAITING not in caplog.text and worker.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert WAITING in caplog.text, outcome
        time.sleep(1.0)  # five busy timeouts: still waiting, not failing
        assert worker.is_alive()
    worker.join(60)
    assert not worker.is_alive() and "error" not in outcome, outcome
    assert caplog.text.count(WAITING) == 1
    assert jobs.counts(store.conn) == {"pending": 0, "running": 0, "done": 2, "parked": 0}
    store.close()
