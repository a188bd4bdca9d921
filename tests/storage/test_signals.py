"""Long-running commands stop on SIGINT and SIGTERM even when started where SIGINT is
ignored: a background job of a non-interactive shell (`cmd &` in a script, nohup, some
service managers) inherits SIGINT as SIG_IGN, and Python then never raises
KeyboardInterrupt. Found on a fresh machine: `localmem replicate` started that way did not
stop on SIGINT and left itself and its Litestream child running."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from localmem.records import TurnIn
from localmem.storage.write.store import Store
from tests.helpers.cli import driver
from tests.helpers.fakes import HashEmbedder
from tests.helpers.replica import env, needs_litestream


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@needs_litestream
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_replicate_stops_on_a_signal_even_with_sigint_inherited_ignored(tmp_path: Path, sig: signal.Signals) -> None:
    db, rep = tmp_path / "live.db", tmp_path / "rep"
    store = Store(db, embedder=HashEmbedder())
    store.write([TurnIn("the kettle is in the left cupboard.", speaker="Ann")], session="a")
    store.close()
    proc = subprocess.Popen(
        driver("--db", str(db), "replicate", "--to", f"file://{rep}"),
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_ignore_sigint,  # what `replicate &` in a script gives it
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(rep.rglob("*.ltx")):
            time.sleep(0.2)
        assert any(rep.rglob("*.ltx")), "Litestream never wrote the replica"
        proc.send_signal(sig)
        assert proc.wait(timeout=60) is not None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    leftover = subprocess.run(["pgrep", "-f", f"litestream.*{tmp_path}"], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", "the Litestream child outlived replicate"
