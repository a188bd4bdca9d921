"""``localmem bench replicate``: Litestream replicating while real writers write; kill -9 rounds.

One store, one ``file://`` replica, Litestream (``storage.replica``) and two writers, each a
real process restarted whenever it is killed: an MCP stdio server (``python -m mcp_server``)
sent ``remember`` calls over the protocol (newline-delimited JSON-RPC), and a loop of
``localmem ingest`` runs of small JSONL files. A turn counts as *acknowledged* when its call
returned ids or its ingest exited 0, at that moment (``time.time()``).

Once both have written, each round waits until the writer it will kill (the MCP server for a
Litestream-only round) has written since it last started, lets them run a random 0.5-3 s
more, then kills -9 Litestream, a writer, or both (cycling), and at once restores the replica (``litestream restore``) into a fresh file:
its integrity is checked and every turn acknowledged before the kill is looked for. A
missing turn's *age* is how long before the kill it was acknowledged; a round's lag is the
largest age of a missing turn (0 when none is missing); turns missing with an age beyond
``lag_bound`` are *lost beyond the lag*. The killed processes are then restarted (Litestream
resumes from the store's WAL). At the end the writers stop, Litestream catches up, and a last
restore must hold every acknowledged turn. Kill times come from ``seed``; everything stays
in a temporary folder (or ``workdir``) and local pipes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

from localmem.bench.preamble import child_env, create_store, localmem_cmd, mcp_server_cmd, working_folder
from localmem.storage.bench import reads
from localmem.storage.copies import replica, restore
from localmem.storage.engine import checkpoints, db

PROTOCOL = "2025-06-18"


class Acks:
    """Acknowledged turns and when, shared by the writer threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.at: dict[str, float] = {}

    def add(self, texts: list[str]) -> None:
        now = time.time()
        with self.lock:
            for t in texts:
                self.at.setdefault(t, now)

    def count(self, prefix: str) -> int:
        with self.lock:
            return sum(1 for t in self.at if t.startswith(prefix))

    def before(self, t: float) -> dict[str, float]:
        with self.lock:
            return {k: v for k, v in self.at.items() if v <= t}


class Writer(threading.Thread):
    """A writer loop around one killable process at a time (``proc``); restarts it after a kill."""

    def __init__(self, kind: str, dbfile: Path, work: Path, acks: Acks) -> None:
        super().__init__(daemon=True)
        self.kind, self.dbfile, self.work, self.acks = kind, dbfile, work, acks
        self.proc: subprocess.Popen[bytes] | None = None
        self.stop = threading.Event()
        self.n = 0
        self.live = 0  # turns acknowledged by the current process (0: starting up)

    def ack(self, texts: list[str]) -> None:
        self.acks.add(texts)
        self.live += len(texts)

    def in_stride(self, seconds: float = 120) -> bool:
        """Wait until the current process has written (a kill then lands mid-writing, not mid-start-up)."""
        deadline = time.monotonic() + seconds
        while self.live == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        return self.live > 0

    def run(self) -> None:
        while not self.stop.is_set():
            if self.kind == "mcp":
                self._mcp()
            else:
                self._ingest()

    def kill(self) -> bool:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            return True
        return False

    def _ingest(self) -> None:
        self.n += 1
        path = self.work / f"ingest-{self.n}.jsonl"
        texts = [f"ingest file {self.n} line {i}: the ferry left pier {i % 9} at dawn." for i in range(10)]
        path.write_text("".join(json.dumps({"text": t, "speaker": "log"}) + "\n" for t in texts), "utf-8")
        cmd = localmem_cmd(self.dbfile, "ingest", str(path))
        self.proc = subprocess.Popen(cmd, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self.proc.wait() == 0:
            self.ack(texts)

    def _mcp(self) -> None:
        proc = subprocess.Popen(
            mcp_server_cmd(self.dbfile),
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.proc, self.live = proc, 0
        assert proc.stdin is not None and proc.stdout is not None
        try:
            hello = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
            _send(proc.stdin, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
            proc.stdout.readline()
            _send(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            while not self.stop.is_set():
                self.n += 1
                texts = [f"mcp call {self.n} turn {j}: the lighthouse blinked {j} times." for j in range(2)]
                args = {"turns": [{"text": t, "speaker": "Ana"} for t in texts], "session": f"mcp-{self.n}"}
                call = {"name": "remember", "arguments": args}
                _send(proc.stdin, {"jsonrpc": "2.0", "id": self.n, "method": "tools/call", "params": call})
                line = proc.stdout.readline()
                if not line:
                    return  # killed
                reply = json.loads(line).get("result") or {}
                if not reply.get("isError") and reply.get("structuredContent", {}).get("turn_ids"):
                    self.ack(texts)
        except (BrokenPipeError, ValueError, OSError):
            return
        finally:
            if proc.poll() is None:
                proc.terminate()
            proc.wait()


def _send(pipe: IO[bytes], msg: dict[str, Any]) -> None:
    pipe.write((json.dumps(msg) + "\n").encode())
    pipe.flush()


def _texts(path: Path) -> set[str]:
    conn = db.connect(path, readonly=True)
    try:
        return set(reads.turn_text_counts(conn))
    finally:
        conn.close()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3) if ordered else 0.0


def run(
    *,
    rounds: int = 20,
    seed: int = 0,
    lag_bound: float = 5.0,
    workdir: Path | None = None,
    app_checkpoints: bool = False,
    snapshots: bool = False,
    replicator_kills: bool = True,
    debug_log: bool = False,
    reset: bool = False,
) -> dict[str, Any]:
    """``app_checkpoints``: the writers keep SQLite's auto-checkpoint on while Litestream
    replicates (what localmem did before ``checkpoints``), to compare. ``snapshots``: the
    replicator is ``localmem replicate --snapshots --interval 1`` instead of Litestream (the
    rounds kill it in Litestream's place). ``replicator_kills`` False: the control run, where
    only writers are killed. ``debug_log``: Litestream logs at debug level (its log:
    ``WORKDIR/litestream.log``). ``reset``: reset a killed Litestream's local state before it
    restarts (what localmem did before; it damaged the newest replicated state), to compare."""
    saved = os.environ.get("LOCALMEM_WAL_AUTOCHECKPOINT")
    if app_checkpoints:
        os.environ["LOCALMEM_WAL_AUTOCHECKPOINT"] = str(checkpoints.DEFAULT_AUTOCHECKPOINT)
    try:
        out = _run(
            rounds=rounds,
            seed=seed,
            lag_bound=lag_bound,
            workdir=workdir,
            snapshots=snapshots,
            replicator_kills=replicator_kills,
            debug_log=debug_log,
            reset=reset,
        )
        return out | {
            "app_checkpoints": app_checkpoints,
            "replicator": "snapshots" if snapshots else "litestream",
            "replicator_kills": replicator_kills,
            "reset_after_crash": reset,
        }
    finally:
        if app_checkpoints:
            os.environ.pop("LOCALMEM_WAL_AUTOCHECKPOINT", None)
            if saved is not None:
                os.environ["LOCALMEM_WAL_AUTOCHECKPOINT"] = saved


def _run(
    *,
    rounds: int,
    seed: int,
    lag_bound: float,
    workdir: Path | None,
    snapshots: bool,
    replicator_kills: bool,
    debug_log: bool,
    reset: bool,
) -> dict[str, Any]:
    rng = random.Random(seed)
    with working_folder(workdir, "replicate") as work:
        dbfile, rep = work / "live.db", work / "replica"
        url = f"file://{rep}"
        create_store(dbfile)
        config = replica.write_config(dbfile, url, work / "litestream", log_level="debug" if debug_log else None)
        log = (work / "litestream.log").open("ab")
        name = "snapshots" if snapshots else "litestream"

        def start() -> subprocess.Popen[bytes]:
            if not snapshots:
                return replica.start_litestream(dbfile, config, reset_after_crash=reset, stdout=log, stderr=log)
            cmd = localmem_cmd(dbfile, "replicate", "--snapshots", "--to", url, "--interval", "1", "--keep", "5")
            return subprocess.Popen(cmd, env=child_env(), stdout=log, stderr=log)

        litestream = start()
        acks = Acks()
        writers = [Writer("mcp", dbfile, work, acks), Writer("ingest", dbfile, work, acks)]
        for w in writers:
            w.start()
        rows: list[dict[str, Any]] = []
        started = time.perf_counter()
        try:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and not (acks.count("mcp ") and acks.count("ingest ")):
                time.sleep(0.5)  # both writers in their stride (a server loads the embedder first)
            for r in range(rounds):
                kind = (name, "writer", "both")[r % 3] if replicator_kills else "writer"
                w = (writers[(r // 3) % 2] if replicator_kills else writers[r % 2]) if kind != name else writers[0]
                stride = w.in_stride()
                time.sleep(rng.uniform(0.5, 3.0))
                t_kill = time.time()
                killed = []
                if kind in ("writer", "both") and w.kill():
                    killed.append(w.kind)
                if kind in (name, "both"):
                    os.kill(litestream.pid, signal.SIGKILL)
                    litestream.wait()
                    killed.append(name)
                rows.append(_check_round(r, kind, killed, t_kill, acks, url, work, lag_bound) | {"in_stride": stride})
                if litestream.poll() is not None:
                    litestream = start()
        finally:
            for w in writers:
                w.stop.set()
            for w in writers:
                w.join(timeout=60)
        time.sleep(3.0)  # Litestream ships the last transactions
        final = work / "final.db"
        try:
            last = restore.restore(url, final)
            final_turns: int | str = int(str(last["turns"]))
            final_back = last.get("fell_back")
            have = _texts(final)
        except Exception as exc:  # a damaged final restore is this bench's finding, not its crash
            final_turns, have, final_back = f"restore failed: {exc}", set(), None
        litestream.send_signal(signal.SIGTERM)
        litestream.wait(timeout=30)
        log.close()
        acked = acks.before(time.time())
        lags = [row["lag_s"] for row in rows]
        return {
            "rounds": rounds,
            "kills": {k: sum(1 for row in rows if k in row["killed"]) for k in (name, "mcp", "ingest")},
            "acknowledged_turns": len(acked),
            "restores_integrity_ok": sum(1 for row in rows if row["integrity"] == "ok"),
            "restores_fell_back": sum(1 for row in rows if row.get("fell_back")),
            "lag_bound_s": lag_bound,
            "lag_p50_s": _pct(lags, 0.5),
            "lag_p99_s": _pct(lags, 0.99),
            "lag_max_s": max(lags, default=0.0),
            "missing_within_lag": sum(row["missing"] - row["lost_beyond_lag"] for row in rows),
            "lost_beyond_lag": sum(row["lost_beyond_lag"] for row in rows),
            "final_restore_turns": final_turns,
            "final_fell_back": final_back["transactions_back"] if isinstance(final_back, dict) else 0,
            "final_lost": sum(1 for t in acked if t not in have),
            "restore_s_p50": round(statistics.median(row["restore_s"] for row in rows), 3) if rows else 0.0,
            "seconds": round(time.perf_counter() - started, 1),
            "per_round": rows,
        }


def _check_round(
    r: int, kind: str, killed: list[str], t_kill: float, acks: Acks, url: str, work: Path, lag_bound: float
) -> dict[str, Any]:
    out = work / f"restore-{r}.db"
    t0 = time.perf_counter()
    back: Any = None
    try:
        back = restore.restore(url, out, force=True).get("fell_back")
        integrity = "ok"  # restore checks integrity_check before renaming into place
        have = _texts(out)
    except Exception as exc:  # a failed restore is a result of this bench, not a crash of it
        integrity, have = f"restore failed: {exc}", set()
    restore_s = time.perf_counter() - t0
    ages = [t_kill - at for text, at in acks.before(t_kill).items() if text not in have]
    for p in (out, Path(f"{out}-wal"), Path(f"{out}-shm")):
        p.unlink(missing_ok=True)
    return {
        "round": r,
        "kind": kind,
        "killed": killed,
        "integrity": integrity,
        "acknowledged": len(acks.before(t_kill)),
        "missing": len(ages),
        "lag_s": round(max(ages, default=0.0), 3),
        "lost_beyond_lag": sum(1 for a in ages if a > lag_bound),
        "restore_s": round(restore_s, 3),
        # the newest replicated state was damaged; restored this many transactions earlier
        "fell_back": int(back["transactions_back"]) if isinstance(back, dict) else 0,
    }


def print_report(result: dict[str, Any]) -> None:
    print("round  kind        killed                 acked  missing  lag_s  beyond  fell_back  integrity")
    for row in result["per_round"]:
        print(
            f"{row['round']:>5}  {row['kind']:<10}  {','.join(row['killed']) or '-':<21}  {row['acknowledged']:>5}  "
            f"{row['missing']:>7}  {row['lag_s']:>5}  {row['lost_beyond_lag']:>6}  {row.get('fell_back', 0):>9}  "
            f"{row['integrity']}"
        )
    for key, value in result.items():
        if key != "per_round":
            print(f"{key:>24}: {value}")
