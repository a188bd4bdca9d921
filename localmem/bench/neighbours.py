"""``localmem bench neighbours``: localmem's background processes and other SQLite clients on
one store, round after round, and what is left of every acknowledged turn.

A round, on a fresh store, each step a real process:
1. ``localmem ingest`` of a few turns; a resident daemon (``serve --idle-exit``, what a query or
   hook leaves) and an MCP server over stdio start on the store;
2. queries answered by the daemon (each leaves a recall-log row: the daemon writes);
3. neighbours open, read, write and close the file: Python's ``sqlite3`` and Debian's
   ``sqlite3`` shell (a table of their own, as DB Browser or Datasette users make);
4. more turns through the MCP server's ``remember`` and ``localmem ingest``, more queries,
   the neighbours again;
5. in a restore round: a backup (in turn a ``localmem backup`` file, an age-encrypted one, a
   Litestream replica), turns written after it, the MCP server closed (a restore refuses a
   hand-started server), ``localmem restore … --force`` with the daemon running, a query that must not see the turns written after the backup, and
   turns written after the restore;
6. kill -9 of one of the daemon, the MCP server or a neighbour mid-open (each in turn), the
   rest stopped; then the file is checked alone.

A turn is acknowledged when its writer said so (``remember`` returned ids, ``ingest``
exited 0). Counted per round: ``integrity_check``, acknowledged turns lost, turns a restore
rolled back that came back (resurrected), and answers that showed a rolled-back turn after
the restore (stale). ``--code DIR`` runs every localmem process from another source tree
(an older commit's checkout), so the same rounds measure the code before a fix; a
``restore`` that refuses the plain backup (older code) is then done the way that version's
``backup --help`` said: the file copied over the store and its ``-wal`` / ``-shm`` removed.
Stops by itself; touches only its working folder and a socket of this user.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import apsw

from localmem.bench.preamble import child_env, mcp_server_cmd, working_folder
from localmem.resident import client, wire
from localmem.storage.bench import reads

PROTOCOL = "2025-06-18"
SHELL = shutil.which("sqlite3")
VICTIMS = ("none", "daemon", "neighbour", "mcp")
RESTORES = (
    "plain",
    "age",
    "replica",
)  # the kind of backup restore rounds put back, in turn  # what round r kills -9: each in turn, with and without a restore
PY_NEIGHBOUR = (
    "import sqlite3, sys\n"
    "c = sqlite3.connect(sys.argv[1], timeout=10)\n"
    "c.execute('select count(*) from turns').fetchone()\n"
    "c.execute('create table if not exists neighbour_notes(note text)')\n"
    "c.execute('insert into neighbour_notes values (?)', (sys.argv[2],))\n"
    "c.commit()\n"
    "c.close()\n"
)


class Round:
    """One round's processes, its acknowledged and rolled-back texts, and its findings."""

    def __init__(self, work: Path, r: int, rng: random.Random, code: Path | None, restore: str | None) -> None:
        self.dir = work / f"round-{r:03d}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.db = self.dir / "memory.db"
        self.r, self.rng, self.restore = r, rng, restore
        self.env = child_env()
        self.env["LOCALMEM_QUERY_DAEMON_IDLE"] = "0"  # the round starts its own daemon, and only that one
        if code is not None:
            self.env["PYTHONPATH"] = str(code)
        self.acked: set[str] = set()
        self.rolled_back: set[str] = set()
        self.stale_answers = 0
        self.errors: list[str] = []
        self.notes: list[str] = []
        self.daemon: subprocess.Popen[bytes] | None = None
        self.mcp: subprocess.Popen[bytes] | None = None
        self.calls = 0
        self.n = 0

    # -- processes -------------------------------------------------------------------
    def cmd(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "localmem", "--db", str(self.db), *args]

    def run(self, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=timeout, check=False)

    def texts(self, what: str, k: int) -> list[str]:
        out = []
        for _ in range(k):
            self.n += 1
            out.append(f"round {self.r} {what} {self.n}: the heron counted {self.rng.randrange(10**9)} reeds.")
        return out

    def ingest(self, k: int) -> list[str]:
        texts = self.texts("ingested", k)
        src = self.dir / f"in-{self.n}.jsonl"
        src.write_text(
            "".join(json.dumps({"session": f"s{self.r}-{self.n}", "speaker": "Ana", "text": t}) + "\n" for t in texts)
        )
        done = self.run(self.cmd("ingest", str(src), "--quiet"))
        if done.returncode == 0:
            self.acked.update(texts)
        else:
            self.errors.append(f"ingest exit {done.returncode}: {_last(done.stderr)}")
        return texts

    def start_daemon(self) -> None:
        self.daemon = subprocess.Popen(
            self.cmd("serve", "--transport", "socket", "--idle-exit", "120"),
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        path = wire.socket_path(self.db)
        deadline = time.monotonic() + 60
        while path is not None and time.monotonic() < deadline and self.daemon.poll() is None:
            if client.answers(path):
                return
            time.sleep(0.05)
        self.errors.append("the daemon never served its socket")

    def start_mcp(self) -> None:
        self.mcp = subprocess.Popen(
            mcp_server_cmd(self.db),
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.rpc(
            "initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "n", "version": "1"}}
        )
        self.notify("notifications/initialized")

    def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.mcp is not None and self.mcp.stdin is not None and self.mcp.stdout is not None
        self.calls += 1
        _send(self.mcp.stdin, {"jsonrpc": "2.0", "id": self.calls, "method": method, "params": params})
        line = self.mcp.stdout.readline()
        return dict(json.loads(line)) if line else {}

    def notify(self, method: str) -> None:
        assert self.mcp is not None and self.mcp.stdin is not None
        _send(self.mcp.stdin, {"jsonrpc": "2.0", "method": method})

    def remember(self, k: int) -> None:
        texts = self.texts("remembered", k)
        try:
            reply = self.rpc(
                "tools/call",
                {"name": "remember", "arguments": {"turns": [{"text": t, "speaker": "Ana"} for t in texts]}},
            )
        except (OSError, ValueError) as exc:
            self.errors.append(f"remember: {exc}")
            return
        result = reply.get("result") or {}
        if not result.get("isError") and (result.get("structuredContent") or {}).get("turn_ids"):
            self.acked.update(texts)
        else:
            self.errors.append(f"remember refused: {json.dumps(reply)[:200]}")

    def query(self) -> None:
        done = self.run(self.cmd("query", "how many reeds did the heron count", "--budget", "4000"))
        if done.returncode != 0:
            self.errors.append(f"query exit {done.returncode}: {_last(done.stderr)}")
        if any(t in done.stdout for t in self.rolled_back):
            self.stale_answers += 1

    def neighbours(self, kill: bool = False) -> None:
        note = f"round {self.r} neighbour {self.n}"
        py = subprocess.Popen([sys.executable, "-c", PY_NEIGHBOUR, str(self.db), note], env=self.env)
        if kill:
            time.sleep(self.rng.uniform(0.0, 0.05))
            py.kill()
        py.wait(timeout=60)
        if SHELL is not None:
            sql = f"select count(*) from turns; create table if not exists neighbour_notes(note text); insert into neighbour_notes values ('{note} shell');"
            self.run([SHELL, "-cmd", ".timeout 10000", str(self.db), sql], timeout=60)

    def stop(self, proc: subprocess.Popen[bytes] | None, kill: bool) -> None:
        if proc is None or proc.poll() is not None:
            return
        if kill:
            proc.kill()
        else:
            if proc.stdin is not None:
                proc.stdin.close()  # an MCP server ends with its client
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    # -- the round -------------------------------------------------------------------
    def play(self) -> dict[str, Any]:
        victim = VICTIMS[self.r % len(VICTIMS)]
        try:
            self.ingest(3)
            self.start_daemon()
            self.start_mcp()
            self.query()
            self.neighbours()
            self.remember(3)
            self.ingest(3)
            self.query()
            self.neighbours(kill=victim == "neighbour")
            self.remember(2)
            self.query()
            if self.restore:
                self.restore_step()
            self.neighbours()
            self.query()
        finally:
            self.stop(self.mcp, victim == "mcp")
            self.stop(self.daemon, victim == "daemon")
        return self.check(victim)

    def restore_step(self) -> None:
        """A backup of the kind this round's turn names (``RESTORES``), turns after it, then
        ``localmem restore`` of it with the daemon running."""
        kind = self.restore or "plain"
        taken = self.take_backup(kind)
        if taken is None:
            return
        source, restore_args = taken
        kept = set(self.acked)
        later = self.ingest(3)
        self.remember(2)
        self.stop(self.mcp, kill=False)  # a restore refuses a server someone started
        self.mcp = None
        done = self.run(self.cmd(*restore_args))
        if done.returncode != 0:
            self.notes.append(f"{kind} restore refused ({_last(done.stderr)}; open in: {_holders(self.db)})")
            if kind == "plain":  # what older versions' `backup --help` told a person to do
                self.notes.append("copied over the store, -wal and -shm removed")
                shutil.copyfile(source, self.db)
                for side in ("-wal", "-shm"):
                    Path(f"{self.db}{side}").unlink(missing_ok=True)
            else:
                return  # nothing was rolled back: the round goes on with the store as it is
        self.rolled_back = (self.acked - kept) | set(later)
        self.acked = kept
        self.query()
        self.ingest(2)
        self.query()

    def take_backup(self, kind: str) -> tuple[Path, list[str]] | None:
        """The backup (or replica) of ``kind`` taken now, and the restore command line that
        puts it back; None (and an error) when it could not be taken."""
        if kind == "age":
            import pyrage  # lazy: a default dependency, needed only by this kind

            ident = pyrage.x25519.Identity.generate()
            key = self.dir / "age.key"
            key.write_text(str(ident) + "\n")
            key.chmod(0o600)
            source = self.dir / "backup.db.age"
            args = ["backup", str(source), "--encrypt-to", str(ident.to_public())]
            # --from URL PATH: the form older versions take too (--code)
            restore = ["--age-identity", str(key), "restore", "--from", str(source), "--force", str(self.db)]
        elif kind == "replica":
            source = self.dir / "replica"
            args = ["replicate", "--to", source.as_uri(), "--once"]
            restore = ["restore", "--from", source.as_uri(), "--force", str(self.db)]
        else:
            source = self.dir / "backup.db"
            args = ["backup", str(source)]
            restore = ["restore", str(source), "--force"]
        done = self.run(self.cmd(*args))
        if done.returncode != 0:
            self.errors.append(f"{kind} backup exit {done.returncode}: {_last(done.stderr)}")
            return None
        return source, restore

    def check(self, victim: str) -> dict[str, Any]:
        found: set[str] = set()
        integrity = "unreadable"
        try:
            conn = apsw.Connection(str(self.db), flags=apsw.SQLITE_OPEN_READONLY)
            try:
                integrity = str(reads.integrity_check(conn))[:120]
                found = set(reads.turn_text_counts(conn))
            finally:
                conn.close()
        except apsw.Error as exc:
            integrity = f"{type(exc).__name__}: {exc}"[:120]
        return {
            "round": self.r,
            "restore": self.restore,
            "killed": victim,
            "integrity": integrity,
            "acknowledged": len(self.acked),
            "lost": len(self.acked - found),
            "resurrected": len(self.rolled_back & found),
            "stale_answers": self.stale_answers,
            "errors": self.errors[:5],
            "notes": self.notes,
        }


def _send(pipe: IO[bytes], msg: dict[str, Any]) -> None:
    pipe.write((json.dumps(msg) + "\n").encode())
    pipe.flush()


def _holders(db: Path) -> list[str]:
    """The processes (Linux) with the store open: the command lines of their first words."""
    real, found = os.path.realpath(db), []
    for proc in Path("/proc").iterdir():
        try:
            if any(os.path.realpath(fd) == real for fd in (proc / "fd").iterdir()):
                found.append(" ".join((proc / "cmdline").read_text().split("\0")[:8]))
        except OSError:
            continue
    return found


def _last(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1][:200] if lines else ""


def run(
    *, rounds: int = 8, restore_every: int = 2, seed: int = 0, workdir: Path | None = None, code: Path | None = None
) -> dict[str, Any]:
    """Play ``rounds`` rounds (every ``restore_every``-th with a restore) and sum them up."""
    rng = random.Random(seed)
    results = []
    with working_folder(workdir, "neighbours") as work:
        for r in range(rounds):
            t0 = time.monotonic()
            kind = None
            if restore_every > 0 and r % restore_every == restore_every - 1:
                kind = RESTORES[(r // restore_every) % len(RESTORES)]
            res = Round(work, r, rng, code, restore=kind).play()
            res["seconds"] = round(time.monotonic() - t0, 1)
            print(f"[bench neighbours] round {r}: {json.dumps(res)}", file=sys.stderr, flush=True)
            results.append(res)
    return {"code": str(code) if code else "this checkout", "shell": SHELL, "rounds": results, **summary(results)}


def summary(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    rows = list(results)
    return {
        "rounds_run": len(rows),
        "rounds_damaged": sum(r["integrity"] != "ok" for r in rows),
        "acknowledged": sum(r["acknowledged"] for r in rows),
        "lost": sum(r["lost"] for r in rows),
        "resurrected": sum(r["resurrected"] for r in rows),
        "stale_answers": sum(r["stale_answers"] for r in rows),
        "rounds_with_errors": sum(bool(r["errors"]) for r in rows),
    }


def print_report(result: dict[str, Any]) -> None:
    print(f"neighbours: {result['rounds_run']} rounds, code: {result['code']}, sqlite3 shell: {result['shell']}")
    print("| round | restore | killed | integrity | acknowledged | lost | resurrected | stale answers | errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in result["rounds"]:
        print(
            f"| {r['round']} | {r['restore'] or 'no'} | {r['killed']} | {r['integrity'][:60]} | "
            f"{r['acknowledged']} | {r['lost']} | {r['resurrected']} | {r['stale_answers']} | {len(r['errors'])} |"
        )
    print(
        f"| all | | | {result['rounds_damaged']} damaged | {result['acknowledged']} | {result['lost']} | "
        f"{result['resurrected']} | {result['stale_answers']} | {result['rounds_with_errors']} rounds |"
    )
