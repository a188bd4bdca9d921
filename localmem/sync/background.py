"""Sync on a thread of its own while something else runs: ``serve --sync DIR`` (the MCP
server, ``localmem serve`` and ``localmem-mcp`` alike) and ``watch --sync DIR``.

The thread opens its own store (one connection per thread) and runs ``run.watch``. Its log
(``say``: stderr, the server's log) tells, once each, that the folder is waited for (a sync
tool may make it later; the first pass runs when it appears), that a segment is refused
(nothing of it is folded) and that it no longer is. Only an error no pass could get past
(a key file that cannot be read, a store that cannot be opened) stops it, said in the log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from localmem.errors import LocalmemError
from localmem.storage.write.store import Store
from localmem.sync.keys import Keyring
from localmem.sync.run import PLAINTEXT_WARNING, Pass, watch


@contextmanager
def syncing(
    open_store: Callable[[], Store], root: Path, keys: Keyring, interval: float, say: Callable[[str], None]
) -> Iterator[None]:
    """Sync with ``root`` every ``interval`` seconds on a thread while the body runs."""
    if not keys.encrypts:
        say(f"warning: {PLAINTEXT_WARNING.format(root=root)}")
    stop = threading.Event()
    told: set[str] = set()

    def report(done: Pass) -> None:
        refused = set(done.folded.refused)
        for reason in sorted(refused - told):
            say(f"refused {reason} (nothing of it is folded; `localmem sync status` lists it)")
        for reason in sorted(told - refused):
            say(f"no longer refused: {reason}")
        told.clear()
        told.update(refused)

    def loop() -> None:
        try:
            with open_store() as store:
                watch(store, root, keys, interval, stop, report, say)
        except LocalmemError as exc:
            say(f"background sync stopped: {exc}")

    thread = threading.Thread(target=loop, name="localmem-sync", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)
