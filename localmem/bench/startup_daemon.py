"""The ``query-daemon`` case of ``localmem bench startup`` (``localmem.bench.startup``): what
a user gets by default (``query.daemon_idle``). Each round times the first query on a store
no process serves (read in-process, then the daemon started: a fork and exec), waits
untimed for that daemon to serve (its ready time, from the first query's exit) and to have
warmed up (its log's ``WARM_LINE``: a query that comes sooner waits for the warm-up), times
the next query (answered by the daemon), then stops the daemon, so the next round's first
query finds none.

Invariant: no daemon outlives the bench: each is stopped through its socket (its pid, from
``SO_PEERCRED``) and waited for through its lock (held for the daemon's whole life, free
once it is gone); one that does not exit in time is killed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from localmem.resident import unix, wire
from localmem.resident.client import answers
from localmem.resident.daemon import WARM_LINE, lock_freed

DAEMON_ROWS = ("query-daemon-first", "query-daemon-later")  # the case's two rows
Timed = Callable[[list[str], str | None, dict[str, str]], tuple[float, float, str]]  # wall ms, cpu ms, stdout


class Daemon:
    """The daemon a first query starts for the store in the query-daemon case's runtime dir:
    waited for, found and stopped through its socket (its pid: ``SO_PEERCRED``) and its lock
    (held for the daemon's whole life: free once it is gone)."""

    def __init__(self, db: Path, run_dir: Path) -> None:
        self.db = db
        path = wire.socket_path(db, run_dir / "localmem")
        if path is None:
            raise RuntimeError(f"no socket path for {db} (too long)")
        self.path = path

    def pid(self) -> int | None:
        """The pid of the process serving the socket, or None."""
        return unix.peer_pid(str(self.path)) if answers(self.path) else None

    def wait(self, timeout: float = 300.0) -> int:
        """The daemon's pid once it serves; RuntimeError when none does within ``timeout``."""
        deadline = time.monotonic() + timeout
        while (pid := self.pid()) is None:
            if time.monotonic() > deadline:
                log = self.path.with_suffix(".log")
                said = log.read_text("utf-8", "replace") if log.exists() else "no log"
                raise RuntimeError(f"the query's daemon did not serve within {timeout:g} s: {said}")
            time.sleep(0.02)
        return pid

    def wait_warm(self, timeout: float = 300.0) -> None:
        """Until the serving daemon's log says it has warmed up (``daemon.WARM_LINE``)."""
        log = self.path.with_suffix(".log")
        deadline = time.monotonic() + timeout
        while not (log.exists() and WARM_LINE in log.read_text("utf-8", "replace")):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the query's daemon did not warm up within {timeout:g} s")
            time.sleep(0.02)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM to the daemon, if one serves, and its lock waited for (it has exited)."""
        pid = self.pid()
        if pid is not None and pid != os.getpid():
            os.kill(pid, signal.SIGTERM)
        if not lock_freed(self.path.with_suffix(".lock"), timeout):
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
            raise RuntimeError(f"the query's daemon (pid {pid}) did not exit")


def one_round(
    daemon: Daemon,
    cmd: list[str],
    questions: Sequence[str],
    r: int,
    env: dict[str, str],
    timed: Timed,
    times: dict[str, list[float]],
    cpus: dict[str, list[float]],
    served: dict[str, int],
    ready: list[float],
    warm: list[float],
) -> None:
    """One round of the query-daemon case (module docstring): the first query, the wait for
    the daemon it started, the next query, the daemon stopped."""
    first, later = DAEMON_ROWS
    daemon.stop()  # none left from an earlier round: the first query reads in-process
    wall, cpu, _out = timed([*cmd, "--db", str(daemon.db), "query", questions[r % len(questions)]], None, env)
    times[first].append(wall)
    cpus[first].append(cpu)
    t0 = time.perf_counter()
    pid = daemon.wait()
    ready.append(1000 * (time.perf_counter() - t0))
    daemon.wait_warm()  # a person's next query comes seconds later, after the warm-up
    warm.append(1000 * (time.perf_counter() - t0))
    wall, cpu, _out = timed([*cmd, "--db", str(daemon.db), "query", questions[(r + 1) % len(questions)]], None, env)
    times[later].append(wall)
    cpus[later].append(cpu)
    if daemon.pid() == pid:  # the same daemon answered before and after: it served the query
        served[later] += 1
    daemon.stop()
