"""The hooks that ingest (stop, pre-compact, session end) done after the agent has moved on:
the store's one ingest worker and its queue.

The hook process forks as soon as the payload is read (``hooks.detach``); the child does the
ingest with its own, longer deadline (``hooks.background_deadline``), waiting out a write
lock held elsewhere instead of failing on it.

Hooks that fire while an ingest runs do not pile up on the store: :class:`Queue` keeps one
worker per store. Each hook appends its payload to the store's queue file, then tries the
queue's lock without waiting; the holder drains the file, releases the lock, and looks
again (an entry added between its last drain and its release is taken by whoever then
gets the lock, itself included). So six Stops on a 20,000-line transcript read it once
and wait on nobody, and every payload is read by some worker.

Invariants:
- the standard library only;
- queue and lock live in this user's private runtime folder (mode 700, files 600) beside
  the store's socket; where there is none, each detached hook ingests on its own;
- a payload is never lost to the queue: it is appended (one line, ``O_APPEND``) before the
  lock is tried, and removed only by the worker that took it under the lock. A worker
  killed mid-drain loses the entries it took; their transcripts are read again from the
  last resume point by the next hook (``ingest.runner``), so no turn is lost, only a count.
"""

from __future__ import annotations

import binascii
import json
import os

TYPE_CHECKING = False  # typing costs ~3 ms of a hook; type checkers take the branch
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

try:
    import fcntl
except ImportError:  # Windows: no flock; ingest hooks run in the foreground there (``hooks.detach``)
    fcntl = None  # type: ignore[assignment]

MAX_QUEUE = 64 << 20  # a queue file grown past this (a worker that never runs) is started again


class Queue:
    """The store's queue of ingest payloads and the lock of its one worker (module docstring)."""

    def __init__(self, base: str) -> None:
        self.path = base + ".ingest"
        self.lock_path = base + ".ingest.lock"
        self._fd: int | None = None

    @classmethod
    def for_store(cls, socket: str | None) -> Queue | None:
        """The queue beside the store's socket path ``socket`` (``wire.socket_path``); None
        when the store has none."""
        if socket is None or fcntl is None:
            return None
        return cls(socket[: -len(".sock")] if socket.endswith(".sock") else socket)

    def push(self, client: str, event: str, raw: bytes, started: float) -> None:
        """Append one hook's payload (``started``: its process's start, wall clock)."""
        line = json.dumps(
            {"client": client, "event": event, "at": started, "raw": binascii.b2a_base64(raw, newline=False).decode()}
        )
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # a worker's read-and-empty of the file is one step against this
            if os.fstat(fd).st_size > MAX_QUEUE:
                os.ftruncate(fd, 0)  # never drained: its transcripts are read again by this worker's hook anyway
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    def acquire(self) -> bool:
        """Take the worker's lock without waiting; False when another worker holds it."""
        assert fcntl is not None
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # the flock goes with the last descriptor
            self._fd = None

    def take(self) -> list[tuple[str, str, bytes, float]]:
        """Every payload queued now, removed from the file (only under the lock)."""
        assert self._fd is not None
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return []
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # no push lands between the read and the truncate
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)
        return list(_entries(b"".join(chunks)))

    def drain(self, work: Callable[[str, str, bytes, float], None]) -> int:
        """Be the store's worker while the queue has payloads: ``work(client, event, raw,
        at)`` for each (``at``: its hook's start, wall clock); the number done. Returns at
        once when another worker holds the lock (it takes what this hook queued)."""
        done = 0
        while self.acquire():
            try:
                while batch := self.take():
                    for item in batch:
                        work(*item)
                        done += 1
            finally:
                self.release()
            if not self.pending():  # one pushed after the last take, before the release: take it too
                break
        return done

    def pending(self) -> bool:
        try:
            return os.path.getsize(self.path) > 0
        except OSError:
            return False


def _entries(data: bytes) -> Iterator[tuple[str, str, bytes, float]]:
    for line in data.splitlines():
        try:
            item = json.loads(line)
            yield str(item["client"]), str(item["event"]), binascii.a2b_base64(item["raw"]), float(item["at"])
        except (
            ValueError,
            KeyError,
            TypeError,
        ):  # a line cut by a crash mid-write: its hook's transcript is read again
            continue
