"""The server's long-lived state (the lifespan's value) and the background enrichment worker.

Invariants:
- every use of the store's connection goes through :meth:`AppState.call` (or holds
  ``AppState.lock``): one call at a time, on a worker thread so the event loop never
  blocks; library errors become tool errors with the library's message (SQLite's failures
  as storage names them: "disk full writing PATH: ...", "PATH is read-only (...)");
- model generation never holds that lock (:meth:`AppState.generate`): ``answer``
  reconstructs under it, then the model answers while other tools run;
- a write that still meets "database is locked" after the busy timeout (another process
  held the write lock that long) is retried with back-off before it reaches the client;
- the C heap that calls freed goes back to the system once the calls stop for a second
  (:class:`localmem.util.heap.IdleRelease`), so an idle server holds its live data,
  not its busiest moment;
- the enrichment worker runs in a thread of its own with its own store connection
  (one connection per thread), only when a model is configured, and stops with the
  lifespan.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio.to_thread
import apsw
from mcp.server.mcpserver.exceptions import ToolError

from localmem.enrichment.worker import run_worker
from localmem.errors import LocalmemError, ModelError, NotAStore, StoreCorrupt, StoreReadOnly
from localmem.models.llm import Generator
from localmem.storage.engine.faults import translate
from localmem.storage.engine.retry import BUSY_ERRORS, retry_locked
from localmem.storage.write.store import Store
from localmem.util.heap import IdleRelease

log = logging.getLogger("localmem.mcp")
R = TypeVar("R")


@dataclass
class WorkerStatus:
    running: bool = False
    model: str | None = None
    turns: int = 0
    error: str | None = None


@dataclass
class AppState:
    """What every tool call reaches through ``ctx.request_context.lifespan_context``."""

    store: Store
    generator: Generator | None
    lock: threading.Lock = field(default_factory=threading.Lock)  # one store call at a time
    worker: WorkerStatus = field(default_factory=WorkerStatus)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _idle: IdleRelease = field(default_factory=IdleRelease)

    async def call(self, fn: Callable[..., R], *args: Any, write: bool = False, **kwargs: Any) -> R:
        """Run a library call on the store: serialised, off the event loop, errors translated."""
        job = functools.partial(fn, *args, **kwargs)
        if write:
            job = functools.partial(retry_locked, job)

        def locked() -> R:
            with self.lock:
                why = self.store.replaced()  # its callers would read, and write, a file no longer at the path
                if why is not None:
                    raise LocalmemError(
                        f"{self.store.path}: {why}; this server no longer serves it: restart the MCP server "
                        "(or its client) to open the store now at that path"
                    )
                return job()

        try:
            return await _off_loop(locked, self.store.path)
        finally:
            self._idle.poke()

    async def generate(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """Run a model call that does not touch the store: off the event loop and WITHOUT
        the store lock, so other tools go on while the model works (the generator
        serialises its own calls), errors translated."""
        try:
            return await _off_loop(functools.partial(fn, *args, **kwargs), self.store.path)
        finally:
            self._idle.poke()

    # -- the enrichment worker ---------------------------------------------------------

    def start_worker(self) -> None:
        if self.generator is None or self._thread is not None:
            return
        if str(self.store.path) == ":memory:":
            log.warning("enrichment worker not started: an in-memory database cannot be shared with a thread")
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._work, name="localmem-mcp-worker", daemon=True)
        self.worker.running = True
        self.worker.model = self.generator.model_id
        self._thread.start()

    def stop_worker(self, timeout: float = 30.0) -> None:
        self._idle.cancel()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.worker.running = False

    def _work(self) -> None:
        assert self.generator is not None
        try:
            while not self._stop.is_set():
                try:
                    with Store(self.store.path, embedder=self.store.embedder, settings=self.store.settings) as own:

                        def progress(n: int) -> None:
                            self.worker.turns += n

                        run_worker(own, self.generator, stop=self._stop, progress=progress)
                    return
                except (ModelError, StoreReadOnly, StoreCorrupt, NotAStore) as exc:  # a retry would meet it again
                    self.worker.error = str(exc)
                    log.error("enrichment stopped: %s", exc)
                    return
                except (LocalmemError, apsw.Error) as exc:
                    self.worker.error = str(exc)
                    log.warning("enrichment worker error (restarting in 5 s): %s", exc)
                    self._stop.wait(5.0)
        finally:
            self.worker.running = False


async def _off_loop(job: Callable[[], R], path: object) -> R:
    try:
        return await anyio.to_thread.run_sync(job)
    except LocalmemError as exc:
        raise ToolError(str(exc)) from exc
    except BUSY_ERRORS as exc:
        raise ToolError("the database is busy (another process is writing); try again") from exc
    except apsw.Error as exc:  # met outside storage's named errors (a read of a damaged file)
        named = translate(exc, str(path))
        if named is None:
            raise
        raise ToolError(str(named)) from exc
