"""The resident side of the fast path: a process that holds a store open (``localmem serve``,
the MCP server, ``localmem serve --transport socket``) answers CLI queries and hooks on the
store's Unix socket, with its model loaded and its vector mirrors warm.

Invariants (docs/architecture.md, "The resident fast path"):
- one socket per store (``wire.socket_path``): a live server already on it is left alone
  (this process then serves no socket); a stale socket file (nobody accepts on it) is
  replaced; the file is made under a temporary name, given mode 600, then renamed into
  place in the private folder (mode 700), so no one ever finds it with wider access;
- only this user's processes are answered (the folder and ``SO_PEERCRED``);
- the answer is the in-process one: the same ``reconstruct`` on the same store, refused
  (the caller reads in-process) when the request's store identity, settings fingerprint,
  code version or protocol is not this process's own, or when the store stays busy with
  another call for ``BUSY_S``; a ``cli`` request (a raw command line) is answered only by a
  server given a ``wire.Plan`` maker (``localmem serve`` gives ``localmem.cli.served``'s),
  and only when the plan names this store and this fingerprint; a ``hook-cli`` request (a
  raw hook command line) likewise, by a server given a ``wire.HookPlan`` maker
  (``localmem.hooks.served``'s: ``localmem serve`` and the MCP server give it), and its
  reply says first how many seconds the plan leaves of the hook's deadline, then the
  answer within them, or a refusal (``timeout``) then, while the recall finishes and its
  rows are written; an ingest event's line (from a detached hook) is read into this
  store under the lock for about ``INGEST_S`` and only under the caller's own write
  settings (``wire.write_fingerprint``); a longer one is refused ``partial`` after its
  first batches, and the caller reads on;
- store calls hold the caller's lock (the MCP server's: one call on the connection at a
  time); the socket thread never holds it while it waits for a client;
- a ``cli`` read's recall-log row (the row the caller's own process would write) is written
  once the reply is sent, so the caller does not wait for it (~1 ms, p95 ~14 ms under load
  at 100k turns); ``stop`` waits for calls in flight, rows included;
- on stop, the socket file is removed only while it is still this server's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import apsw

from localmem import __version__
from localmem.errors import LocalmemError
from localmem.resident import hookline, listen, local, quick, recall, unix, wire
from localmem.resident.hookline import Answer, refuse
from localmem.storage.engine import keys
from localmem.storage.layers.recalls import RecallWrite
from localmem.storage.write.store import Store

log = logging.getLogger("localmem.resident")
BUSY_S = 2.0  # how long a request waits for the store's lock before it is sent away
REQUEST_S = 5.0  # a client that has not sent its request by then is dropped
ACCEPT_S = 0.5  # the accept loop looks at the stop flag this often
STANDBY_S = 5.0  # how often a process that found the socket taken checks whether it is free again
STOP_S = 10.0  # how long stop() waits for calls in flight (a reply, its recall-log row)
P = TypeVar("P", wire.Plan, wire.HookPlan)  # a raw line's plan (op cli, op hook-cli)


class ResidentServer:
    """Serves ``store`` on its socket from a thread; ``start`` / ``stop``, or ``with``."""

    def __init__(
        self,
        store: Store,
        lock: threading.Lock | None = None,
        cli: Callable[[wire.CliCall], wire.Plan] | None = None,
        hooks: Callable[[wire.HookCall], wire.HookPlan] | None = None,
    ) -> None:
        self.store = store
        self.lock = lock or threading.Lock()
        self.cli = cli  # makes the plan of a raw command line (op ``cli``); None: that op is refused
        self.hooks = hooks  # makes the plan of a raw hook command line (op ``hook-cli``); None: refused
        self.path: Path | None = None
        self._sock: socket.socket | None = None
        self._inode: int | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._guard = threading.Lock()  # start (also from the standby thread) against stop
        self._standby: threading.Thread | None = None
        self._lost: str | None = None  # why the socket could not be bound again (logged once)
        self._fingerprint = wire.fingerprint(store.settings)
        self.writes = wire.write_fingerprint(store.settings)  # what an ingest stores: a hook's only under it
        self.busy_s, self.wait_s = BUSY_S, BUSY_S + REQUEST_S  # for resident.hookline
        # the file this process holds open: a file renamed over the path later (encrypt,
        # restore, a copy) is another store, which the caller reads in-process
        self._identity = wire.store_identity(store.path)
        # a raw command line carries no key rules: only a plaintext store answers one. Read
        # through SQLite's file layer: a Python open and close of the store would drop the
        # locks this process's connection holds on it (storage.engine.fileread)
        self._plain = keys.file_state(store.path) == "plain"
        self._calls = threading.Condition()  # calls in flight, which stop() waits for
        self._in_flight = 0
        self.served = 0  # requests answered (the tests and `bench startup` read it)
        self.last_call = time.monotonic()  # when the last request was done: an idle daemon exits

    def start(self, *, standby: bool = True) -> bool:
        """Listen on the store's socket; False when the store has no usable socket path or
        another live process serves it. With ``standby``, a process that found another
        one serving checks every ``STANDBY_S`` and takes the socket over once it is gone
        (two MCP clients each start a server; the second serves when the first exits)."""
        if self._listen():
            return True
        if standby and self._standby is None and wire.socket_path(self.store.path) is not None:
            self._standby = threading.Thread(target=self._wait_turn, name="localmem-resident-standby", daemon=True)
            self._standby.start()
        return False

    def _wait_turn(self) -> None:
        while not self._stop.wait(STANDBY_S):
            if self._listen():
                return

    def _listen(self) -> bool:
        with self._guard:
            return not self._stop.is_set() and self._bind()

    def _bind(self) -> bool:
        path = wire.socket_path(self.store.path)
        if path is None or str(self.store.path) == ":memory:":
            return False
        bound = listen.open_socket(path, ACCEPT_S)
        if isinstance(bound, str):
            if bound:
                log.warning("resident socket not served: %s", bound)
            return False
        self.path, (self._sock, self._inode) = path, bound
        self._thread = threading.Thread(target=self._accept, name="localmem-resident", daemon=True)
        self._thread.start()
        log.info("resident socket %s", path)
        return True

    def _keep_path(self) -> None:
        """Bind the socket again when its file is gone (a ``/tmp`` cleaner or a person removed
        it, or its folder): callers find a server by the path, never by this open socket.
        A failure is logged once, not at every look."""
        if self.path is None or os.path.lexists(self.path):
            return
        with self._guard:
            if self._stop.is_set():
                return
            bound = listen.open_socket(self.path, ACCEPT_S)
            if isinstance(bound, str):
                if bound and bound != self._lost:
                    log.warning("resident socket not served again: %s", bound)
                self._lost = bound
                return
            old, (self._sock, self._inode), self._lost = self._sock, bound, None
        if old is not None:
            old.close()
        log.info("resident socket %s bound again (its file was removed)", self.path)

    def stop(self) -> None:
        self._stop.set()
        with self._guard:
            pass  # a start in progress has finished: what it made is in the fields below
        for thread in (self._thread, self._standby):
            if thread is not None:
                thread.join(timeout=5)
        with self._calls:  # a reply being sent, a recall-log row being written
            self._calls.wait_for(lambda: self._in_flight == 0, timeout=STOP_S)
        if self._sock is not None:
            self._sock.close()
        if self.path is not None:
            with contextlib.suppress(OSError):
                if os.lstat(self.path).st_ino == self._inode:  # still ours, not a successor's
                    self.path.unlink()
        self._sock = self._thread = self._standby = None

    def __enter__(self) -> ResidentServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                self._keep_path()  # and a look at the stop flag
                continue
            except OSError:
                return
            conn.settimeout(REQUEST_S)  # not inherited on every OS: set it on the connection
            threading.Thread(target=self._serve, args=(conn,), name="localmem-resident-call", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with self._calls:
            self._in_flight += 1
        record = None
        try:
            with conn:
                try:
                    if unix.peer_uid(conn) not in (None, os.getuid()):
                        return
                    request = wire.decode(unix.read_line(conn, wire.MAX_LINE))
                    reply, record = self.answer(request, early=lambda msg: conn.sendall(wire.encode(msg)))
                    conn.settimeout(unix.REPLY_S)
                    conn.sendall(wire.encode(reply))
                except (OSError, ValueError) as exc:  # the client went away, sent no JSON line, or a lone surrogate
                    log.debug("resident call dropped: %s", exc)
            self.log_recall(record)  # after the reply: the caller does not wait for the row
        finally:
            with self._calls:
                self._in_flight -= 1
                self._calls.notify_all()

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request (see ``wire``), its recall-log row written."""
        reply, record = self.answer(req)
        self.log_recall(record)
        return reply

    def answer(self, req: dict[str, Any], early: Callable[[dict[str, Any]], None] | None = None) -> Answer:
        """The reply to one request, and the recall-log row its read leaves to write
        (``log_recall``, once the reply is on its way). ``early``: sends a message before
        the reply (a ``hook-cli`` recall's ``{"ok": true, "left": S}``, so that the caller
        knows how long to wait)."""
        if req.get("protocol") != wire.PROTOCOL or req.get("version") != __version__:
            return refuse("version"), None
        op = req.get("op")
        raw = {"cli": self.cli, "hook-cli": self.hooks}  # a raw command line: a plan maker, a plaintext store
        if op not in ("context", "hook", *raw) or (op in raw and (raw[op] is None or not self._plain)):
            return refuse("op"), None
        if self._identity is None or req.get("store") != self._identity or self.store.replaced():
            return refuse("store"), None  # another file, or this one rewritten in place: read by the caller
        if op == "cli":
            return self._command(req)
        if op == "hook-cli":
            return hookline.answer(self, req, early)
        if req.get("settings") != self._fingerprint:
            return refuse("settings"), None
        try:
            query: wire.Query | wire.HookAsk = (
                wire.parse_query(req.get("query")) if op == "context" else wire.parse_hook(req.get("query"))
            )
        except ValueError as exc:
            return refuse(f"request: {exc}"), None
        if isinstance(query, wire.HookAsk):
            hook = query
            return self.locked(lambda: ({"ok": True, "hook": recall.answer(self.store, hook)}, None))
        asked = query
        return self.locked(lambda: ({"ok": True, "context": local.context(self.store, asked)}, None))

    def planned(self, plan_of: Callable[[], P]) -> P | Answer:
        """A raw line's plan, or the refusal it gets: a request or command line the
        planner refuses, or a plan naming another store or other settings."""
        try:
            plan = plan_of()
        except ValueError as exc:
            return refuse(f"request: {exc}"), None
        except wire.Refused as exc:
            return refuse(f"command: {exc}"[:200]), None
        if plan.store != self._identity:
            return refuse("store"), None
        if plan.fingerprint != self._fingerprint:
            return refuse("settings"), None
        return plan

    def _command(self, req: dict[str, Any]) -> Answer:
        """A raw command line (op ``cli``): its plan, checked, read and printed as the
        caller's own process would."""
        cli = self.cli
        assert cli is not None
        plan = self.planned(lambda: cli(wire.parse_cli(req)))
        if isinstance(plan, tuple):  # refused
            return plan
        query = plan.query
        if query is None:
            return printed(plan, None), None

        def read() -> Answer:
            ctx, record = local.read(self.store, query)
            return printed(plan, ctx), record

        return self.locked(read)

    def within(self, call: Callable[[], Answer], seconds: float) -> Answer:
        """``call()`` in a thread of its own, waited for ``seconds``: then a refusal
        (``timeout``) while it finishes; ``stop`` waits for it as for a call in flight."""
        box: list[Answer] = []
        done = threading.Event()

        def work() -> None:
            try:
                box.append(call())
            except Exception as exc:  # what the caller's own process meets again and counts its way
                box.append((refuse(f"error: {type(exc).__name__}"), None))
            finally:
                done.set()
                with self._calls:
                    self._in_flight -= 1
                    self._calls.notify_all()

        with self._calls:
            self._in_flight += 1
        threading.Thread(target=work, name="localmem-resident-hook", daemon=True).start()
        if not done.wait(seconds):
            return refuse("timeout"), None
        return box[0]

    def locked(self, call: Callable[[], Answer], busy_s: float = BUSY_S) -> Answer:
        """``call()`` holding the store's lock: a refusal when it stays busy for ``busy_s``
        or the read fails (the caller meets the error again in-process and says it its
        own way)."""
        if not self.lock.acquire(timeout=busy_s):
            return refuse("busy"), None
        try:
            answered = call()
        except LocalmemError as exc:
            return refuse(f"error: {exc}"), None
        finally:
            self.lock.release()
            self.last_call = time.monotonic()
        self.served += 1
        return answered

    def log_recall(self, record: RecallWrite | None) -> None:
        """Write a served read's recall-log row, as the caller's process would have (best
        effort there too: a store that stays busy costs the row, never the reply)."""
        if record is None:
            return
        if not self.lock.acquire(timeout=BUSY_S):
            log.warning("recall log not written: the store stayed busy")
            return
        try:
            local.log(self.store, record)
        except (LocalmemError, apsw.Error) as exc:
            log.warning("recall log not written: %s", exc)
        finally:
            self.lock.release()

    def idle_for(self) -> float:
        """Seconds since the last request was answered (or since the server was made)."""
        return time.monotonic() - self.last_call

    def warm(self) -> None:
        """Do a first caller's one-time work now: the raw-line parser, this process's own
        settings (a daemon inherited its starter's environment, so its next caller's are
        the same) and a read of a query nobody asked (the vector mirrors, the read path's
        modules and pages; its recall-log row is not written). Under the store's lock, so
        a caller that arrives meanwhile waits for it; never an error."""
        if self.cli is not None:
            with contextlib.suppress(Exception):  # a plan of a made-up line may be refused: nothing is lost
                here = quick.caller()
                argv = ("--db", str(self.store.path), "query", "warm-up")
                self.cli(wire.CliCall(argv, here["cwd"], here["env"], here["platform"]))
        if self.lock.acquire(timeout=BUSY_S):  # not a call: ``served`` and the idle clock stay as they are
            try:
                with contextlib.suppress(Exception):
                    local.read(self.store, wire.Query("warm-up", tool="warm-up"))
            finally:
                self.lock.release()

    def store_gone(self) -> bool:
        """Whether the store file this process holds open is no longer at its path: deleted,
        another file there (a copy, a restore, an encrypt), or rewritten in place (a backup
        copied over it: ``Store.replaced``), whose callers it refuses."""
        return (
            self._identity is None
            or wire.store_identity(self.store.path) != self._identity
            or self.store.replaced() is not None
        )


def printed(plan: wire.Plan, ctx: dict[str, Any] | None) -> dict[str, Any]:
    """The reply to a ``cli`` request: what the command prints, and its exit code."""
    stdout, stderr, code = plan.render(ctx)
    return {"ok": True, "stdout": stdout, "stderr": stderr, "code": code}
