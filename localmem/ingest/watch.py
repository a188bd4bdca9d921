"""Watch a folder and ingest chat logs as they appear (``localmem watch DIR``).

The watchdog observer's thread only notes which paths changed; the thread that calls
``Watcher.run`` owns the store and does all reading and writing. A file is read once it
has had no event for ``settle`` seconds and its size and mtime still match what the
last event saw, so a file being copied is not read half-way. Renames and moves update
the ingest bookkeeping instead of ingesting again (also for moves made while the
watcher was not running: content already ingested under a path that no longer exists
is recognised by its fingerprint). Deleting a file keeps its memories. Hidden files,
temporary files (``.tmp``, ``.part``, ``.crdownload``, ``~``, ...) and files that are
not ``.json``, ``.jsonl``, ``.ndjson``, ``.md``, ``.markdown`` or ``.txt`` are ignored.
A bad file is reported and skipped until it changes again. A busy database (another
process held the write lock past the busy timeout) never stops the watcher: it reports
once that it waits, keeps watching, and tries the file again after a back-off (what was
committed before stays; the rest resumes); a full disk likewise (it says so once, with the
file and the cause, and tries again after a back-off). A store that cannot be written at
all (read-only, damaged) stops the watcher: ``run`` raises that one-line error after
stopping cleanly. On start, files that
changed while the watcher was not running are caught up. ``run`` returns cleanly when
``stop`` is set (``stop_on_signals`` sets it on SIGINT/SIGTERM), after the batch in
progress is stored.

Coding agents' folders (``Watcher.agents``: the locations of ``localmem.ingest.capture``)
are followed differently, since their logs only grow: a log is read ``settle`` (0.5 s)
after the first change not yet read, not after the last, so a session that writes all
the time is still read as it goes; a line still being written is left for the next read,
a step the agent is still in is held back (``hold``: ``localmem.ingest._agent``), and once
the log has been quiet for ``final_after`` seconds it is read to its end. Each read starts
at the resume point, so every turn is stored once, in order. A whole-file log (a VS Code
``.json`` session, rewritten on every save) is read once it settles, with ``hold`` too.
OpenCode's sessions are in a SQLite database: its folder is watched (not recursively) and a
change to ``opencode.db`` or its ``-wal`` reads the sessions that changed
(``localmem.ingest.opencode_runner``; the database is only ``os.stat``-ed here, never opened).
An agent's folder that does not exist yet is looked for every 0.5 s and watched from the
moment it appears (``localmem.ingest._roots.Absent``), what it already holds read at once;
a project or session folder made inside a watched folder is followed by the observer
(watchdog reports the files made in it before its watch was added).

Hook: ``run(stop, worker=...)`` runs the enrichment worker's loop in a thread alongside
and stops it with the watcher.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from localmem.errors import InputError, LocalmemError, StoreError, StoreFull
from localmem.ingest import opencode, opencode_runner, runner, state
from localmem.ingest._roots import EXTENSIONS, TEMP_SUFFIXES, Absent, Event, Root, Signature, eligible, signature
from localmem.ingest.capture import Location
from localmem.storage.engine.retry import BUSY_ERRORS, WAITING
from localmem.storage.write.store import Store

APPEND_SETTLE = 0.5  # seconds after an agent's log's first unread change until it is read
FINAL_AFTER = 30.0  # seconds an agent's log read with hold stays quiet before it is read to its end
__all__ = ["EXTENSIONS", "TEMP_SUFFIXES", "Event", "Root", "Signature", "Watcher", "eligible", "signature"]


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        src = Path(os.fsdecode(event.src_path))
        if event.event_type == "moved":
            dest = Path(os.fsdecode(event.dest_path))
            if event.is_directory:
                self.watcher.note_dir_move(src, dest)
            else:
                self.watcher.note_move(src, dest)
        elif event.is_directory:
            return
        elif event.event_type in ("created", "modified", "closed"):
            self.watcher.note_change(src)
        elif event.event_type == "deleted":
            self.watcher.note_gone(src)


class Watcher:
    def __init__(
        self,
        store: Store,
        root: Path | Sequence[Root],
        *,
        recursive: bool = False,
        settle: float = 2.0,
        poll: float = 0.2,
        on_event: Callable[[Event], None] | None = None,
        final_after: float = FINAL_AFTER,
    ) -> None:
        given = [Root(root, recursive)] if isinstance(root, Path) else list(root)
        every = [replace(r, path=r.path.expanduser().resolve()) for r in given]
        for r in every:
            if not r.append and not r.path.is_dir():
                raise InputError("not a folder", path=str(r.path))
        # An agent's folder that does not exist yet is watched once it appears (_roots.Absent).
        self.roots = [r for r in every if r.path.is_dir()]
        self.absent = Absent([r for r in every if not r.path.is_dir()])
        self.root = every[0].path
        self.store = store
        self.recursive = recursive
        self.settle = settle
        self.poll = poll
        self.final_after = final_after
        self.on_event = on_event or (lambda e: None)
        self._lock = threading.Lock()
        self._pending: dict[Path, tuple[float, Signature]] = {}  # path -> (last event, its signature)
        self._finals: dict[Path, tuple[float, Signature]] = {}  # agents' logs read with hold: (read at, size)
        self._moves: list[tuple[Path, Path]] = []
        self._failed: dict[Path, Signature] = {}  # bad files, and the state they were bad in
        self._busy_until = 0.0  # the database was locked: try again after this (monotonic)
        self._pause = 0.0  # the back-off while it stays locked; 0 when not waiting
        self._stop: threading.Event | None = None

    @classmethod
    def agents(cls, store: Store, locs: Sequence[Location], **kwargs: Any) -> Watcher:
        """A watcher of the coding agents' folders (``capture.locations``), those that do
        not exist yet included: each is watched from the moment it appears."""
        roots = [Root(loc.root, loc.recursive, loc.format, loc.accepts, append=True) for loc in locs]
        if not roots:
            raise InputError("no agents' folders to watch")
        kwargs.setdefault("settle", APPEND_SETTLE)
        return cls(store, roots, **kwargs)

    def root_of(self, path: Path) -> Root | None:
        """The watched root ``path`` is a file of, if it takes it."""
        for r in self.roots:
            if path.is_relative_to(r.path) and (r.recursive or path.parent == r.path) and r.takes(path):
                return r
        return None

    # -- called from the observer thread ----------------------------------------------

    def note_change(self, path: Path) -> None:
        root = self.root_of(path)
        if root is not None:
            path = _database(root, path) or path
            with self._lock:
                self._finals.pop(path, None)
                if _growing(root, path) and path in self._pending:
                    return  # an agent's log: read `settle` after its first unread change
                self._pending[path] = (time.monotonic(), signature(path))

    def note_gone(self, path: Path) -> None:
        with self._lock:
            self._pending.pop(path, None)

    def note_move(self, src: Path, dest: Path) -> None:
        with self._lock:
            self._moves.append((src, dest))

    def note_dir_move(self, src: Path, dest: Path) -> None:
        files = [p for p in dest.rglob("*") if p.is_file()] if dest.is_dir() else []
        with self._lock:
            self._moves.extend((src / p.relative_to(dest), p) for p in files)

    # -- the owning thread ------------------------------------------------------------

    def run(self, stop: threading.Event, worker: Callable[[threading.Event], None] | None = None) -> None:
        """Watch until ``stop`` is set. ``worker``: the enrichment worker's loop, run in
        its own thread (with its own store connection) until ``stop`` is set."""
        self._stop = stop
        observer = Observer()
        for r in self.roots:
            observer.schedule(_Handler(self), str(r.path), recursive=r.recursive)
        observer.start()  # before the catch-up, so nothing changed meanwhile is missed
        helper = threading.Thread(target=worker, args=(stop,), name="localmem-worker") if worker else None
        if helper:
            helper.start()
        folders = ", ".join(str(r.path) + (" (recursive)" if r.recursive else "") for r in self.roots)
        later = ", ".join(str(r.path) for r in self.absent.roots)
        self._emit(
            "started", self.root, f"watching {folders or 'nothing yet'}" + (f"; waiting for {later}" if later else "")
        )
        try:
            self.catch_up()
            while not stop.is_set():
                for r in self.absent.appeared():
                    observer.schedule(_Handler(self), str(r.path), recursive=r.recursive)  # before the search
                    self.roots.append(r)
                    self.catch_up([r])
                    self._emit("watching", r.path, f"{r.path} appeared: watching it")
                self.step()
                stop.wait(self.poll)
        except BaseException:
            stop.set()  # the worker beside us stops too
            raise
        finally:
            observer.stop()
            observer.join(timeout=10)
            if helper:
                helper.join()
            self._emit("stopped", self.root, "stopped")

    def catch_up(self, roots: Sequence[Root] | None = None) -> None:
        """Queue every file (of ``roots``, default all) that changed since it was last ingested (or never was)."""
        due = time.monotonic() - self.settle
        for r in self.roots if roots is None else roots:
            files = r.path.rglob("*") if r.recursive else r.path.iterdir()
            for path in sorted(files):
                if not path.is_file() or not r.takes(path):
                    continue
                path = _database(r, path) or path
                sig = signature(path)
                if sig is not None and self._unchanged(path, sig):
                    continue
                with self._lock:
                    self._pending.setdefault(path, (due, sig))

    def step(self) -> None:
        """Apply the moves seen, then ingest the files that have settled."""
        now = time.monotonic()
        if now < self._busy_until:
            return
        with self._lock:
            moves, self._moves = self._moves, []
        for i, (src, dest) in enumerate(moves):
            try:
                self._move(src, dest)
            except (*BUSY_ERRORS, StoreFull) as exc:
                with self._lock:
                    self._moves[:0] = moves[i:]
                self._busy(dest, exc)
                return
        with self._lock:
            due = sorted((p, t, sig) for p, (t, sig) in self._pending.items() if now - t >= self.settle)
        for path, t, sig in due:
            if self._stop is not None and self._stop.is_set():
                return
            current = signature(path)
            root = self.root_of(path)
            agents = root is not None and root.append  # read with hold, then to its end once quiet
            growing = root is not None and _growing(root, path)
            with self._lock:
                if self._pending.get(path) != (t, sig):
                    continue  # a newer event came in meanwhile
                if current != sig and not growing:  # changed without an event we saw: wait again
                    self._pending[path] = (now, current)
                    continue
                del self._pending[path]
            if current is None or self._failed.get(path) == current:
                continue
            try:
                self._ingest(path, current, hold=agents)
            except (*BUSY_ERRORS, StoreFull) as exc:
                with self._lock:  # due again once the back-off is over
                    self._pending.setdefault(path, (now - self.settle, current))
                self._busy(path, exc)
                return
            self._pause = 0.0
        self._finish(now)

    def _finish(self, now: float) -> None:
        """Agents' logs read with ``hold`` and quiet since for ``final_after`` seconds: read to their end."""
        with self._lock:
            due = [(p, sig) for p, (t, sig) in self._finals.items() if now - t >= self.final_after]
        for path, sig in due:
            if self._stop is not None and self._stop.is_set():
                return
            with self._lock:
                if path in self._pending or self._finals.get(path, (0.0, None))[1] != sig:
                    continue
                del self._finals[path]
            current = signature(path)
            if current != sig or current is None:
                self.note_change(path)
                continue
            try:
                self._ingest(path, current, hold=False)
            except (*BUSY_ERRORS, StoreFull) as exc:
                with self._lock:
                    self._finals.setdefault(path, (now - self.final_after, current))
                self._busy(path, exc)
                return

    def _busy(self, path: Path, exc: Exception) -> None:
        """Another process holds the write lock, or the disk is full: say so once, then back off."""
        if not self._pause:
            if isinstance(exc, StoreFull):
                self._emit("error", path, f"not stored yet: {exc}; trying again", error=str(exc))
            else:
                self._emit("waiting", path, WAITING)
        cap = 30.0 if isinstance(exc, StoreFull) else 5.0  # space is freed by a person, not in a moment
        self._pause = min(max(self._pause * 2, 0.5), cap)
        self._busy_until = time.monotonic() + self._pause

    def _unchanged(self, path: Path, sig: tuple[int, int]) -> bool:
        """Read to its end at this size and time (an agent's log: with nothing held back)."""
        root = self.root_of(path)
        if root is not None and root.format == opencode.CLIENT:
            return opencode_runner.unchanged(self.store, path)
        whole = root is not None and root.append
        return any(
            r.complete and (r.stat.size, r.stat.mtime_ns) == sig and (not whole or r.cursor.offset == sig[0])
            for r in state.for_path(self.store.conn, path)
        )

    def _move(self, src: Path, dest: Path) -> None:
        with self._lock:
            was_pending = self._pending.pop(src, None) is not None
        self._failed.pop(src, None)
        inside = self.root_of(dest) is not None
        moved = state.move(self.store.conn, str(src), dest) if inside else 0
        if moved:
            self._emit("moved", dest, f"{src} renamed to {dest}: already ingested, not read again")
        if inside and (was_pending or (not moved and not self._unchanged(dest, signature(dest) or (-1, -1)))):
            self.note_change(dest)  # new under this name, or still changing when renamed

    def _ingest(self, path: Path, sig: tuple[int, int], *, hold: bool = False) -> None:
        conn = self.store.conn
        root = self.root_of(path)
        fmt = root.format if root is not None else None
        options: dict[str, Any] = {"hold": True} if hold else {}
        if root is not None and root.append and sig[0] == 0:
            return  # an agent's log just made: nothing in it yet
        if root is not None and root.format == opencode.CLIENT:
            return self._database(path, sig, hold=hold)
        try:
            if self._unchanged(path, sig):
                return
            fp = state.stat(path)
            if not state.for_path(conn, path):
                for row in state.with_fingerprint(conn, fp):
                    if not Path(row.path).exists():  # moved while we were not watching
                        state.move(conn, row.path, path)
                        self._emit("moved", path, f"{row.path} moved to {path}: already ingested, not read again")
                        return
            stop = self._stop
            report = runner.ingest_file(self.store, path, fmt, should_stop=stop.is_set if stop else None, **options)
        except StoreError:
            raise  # the store's fault, not the file's: never marks the file bad
        except LocalmemError as exc:
            self._failed[path] = sig
            self._emit("error", path, f"skipped {path}: {exc}", error=str(exc))
            return
        if hold:
            with self._lock:
                self._finals[path] = (time.monotonic(), sig)
        if report.turns or not hold:
            self._emit("ingested", path, report.line(), report=report.to_dict())

    def _database(self, db: Path, sig: tuple[int, int], *, hold: bool) -> None:
        """OpenCode's database: its sessions' new turns (``ingest.opencode_runner``); with
        ``hold``, a step an agent is still in waits for the read once it is quiet."""
        stop = self._stop
        try:
            if self._unchanged(db, sig):
                return
            got = opencode_runner.ingest(
                self.store, db, hold_since=0.0 if hold else None, should_stop=stop.is_set if stop else None
            )
        except StoreError:
            raise
        except LocalmemError as exc:
            self._failed[db] = sig
            self._emit("error", db, f"skipped {db}: {exc}", error=str(exc))
            return
        if hold:
            with self._lock:
                self._finals[db] = (time.monotonic(), sig)
        if got.report.turns or got.report.errors or not hold:
            self._emit("ingested", db, got.report.line(), report=got.report.to_dict())

    def _emit(self, kind: str, path: Path, message: str, **extra: Any) -> None:
        self.on_event({"event": kind, "path": str(path), "message": message, **extra})


def _database(root: Root, path: Path) -> Path | None:
    """OpenCode's database, for a change to it or its ``-wal`` (the file the watcher reads)."""
    return opencode.database_of(path) if root.format == opencode.CLIENT else None


def _growing(root: Root, path: Path) -> bool:
    """An agent's log that only grows (or OpenCode's database): read ``settle`` after its
    first unread change, not after the last, so a busy session is read as it goes."""
    return root.append and (path.suffix == ".jsonl" or root.format == opencode.CLIENT)


def stop_on_signals() -> threading.Event:
    """An event set by SIGINT or SIGTERM (call from the main thread)."""
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    return stop
