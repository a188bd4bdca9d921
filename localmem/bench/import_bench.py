"""``localmem bench import``: a big ChatGPT export imported by the real CLI, killed
part-way and resumed.

Steps: write an export of N messages (``bigexport``, streamed; reused from the workdir
when it was made with the same N and seed), then run ``localmem ingest FILE --json
--progress-every S`` as a subprocess on a fresh store. With ``kill_at`` > 0 the importer
is killed with SIGKILL once that share of the expected turns is stored, and run again on
the same file; it must resume (``resumed_at_unit`` > 0, at most one batch read again) and
end with exactly the expected turns, none twice. Reported: messages, turns, seconds (both
runs together: the import's whole cost, including the resume), turns/s, the importer's
peak RSS and CPU time (``wait4``; CPU time is what a shared, loaded machine distorts
least), the resume figures, and how the progress lines behaved (how many, the longest
gap, the ETA shown at 10% against the time it really took).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import apsw

from localmem.bench.bigexport import GENERATOR, ExportStats, write_export
from localmem.ingest.runner import BATCH_TURNS
from localmem.storage.bench import reads

Log = Callable[[str], None]
_LINE = re.compile(r"^ingest: ([\d,]+)/([\d,]+) turns \([\d.]+%\), ([\d,.]+) turns/s.*?(?:ETA (\d+):(\d\d):(\d\d))?$")
_RESUMING = re.compile(r"resuming .* after unit (\d+) ")


@dataclass
class ImportRun:
    seconds: float = 0.0
    exit: int = 0
    killed: bool = False
    stopped: bool = False  # stopped (SIGTERM) at the time limit: the import is incomplete
    rss_mb: float = 0.0
    cpu_s: float = 0.0  # user + system: what the import cost whatever else the machine runs
    summary: dict[str, Any] = field(default_factory=dict)
    progress: list[tuple[float, int, int, float, int | None]] = field(default_factory=list)  # t, done, total, rate, eta
    resumed_at_unit: int | None = None
    stderr: list[str] = field(default_factory=list)


def export(workdir: Path, messages: int, seed: int, log: Log) -> tuple[ExportStats, float]:
    """The export for (messages, seed), written unless the workdir has it already."""
    path = workdir / f"conversations-{messages}-s{seed}.json"
    meta = path.with_suffix(".meta.json")
    if path.is_file() and meta.is_file():
        known = json.loads(meta.read_text("utf-8"))
        if known.get("generator") == GENERATOR and known.get("bytes") == path.stat().st_size:
            log(f"reusing {path} ({known['messages']:,} messages)")
            return ExportStats(**known), 0.0
    log(f"writing {messages:,} messages to {path}")
    t0 = time.perf_counter()
    stats = write_export(path, messages, seed=seed)
    seconds = time.perf_counter() - t0
    meta.write_text(json.dumps(asdict(stats)), "utf-8")
    return stats, seconds


def run(
    messages: int,
    workdir: Path,
    *,
    kill_at: float = 0.5,
    seed: int = 0,
    importer: Sequence[str] | None = None,
    progress_every: float = 30.0,
    time_limit: float | None = None,
    log: Log = lambda msg: print(msg, file=sys.stderr),
) -> dict[str, Any]:
    """See the module docstring. ``importer``: the command that is ``localmem`` (default:
    this interpreter with ``-m localmem.cli``). ``time_limit``: seconds of importing after
    which the importer is stopped with SIGTERM (which ``localmem ingest`` treats as Ctrl-C) and the result is partial, with
    the rate and the ETA the importer showed last."""
    workdir.mkdir(parents=True, exist_ok=True)
    stats, gen_s = export(workdir, messages, seed, log)
    db = workdir / "import.db"
    for leftover in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        leftover.unlink(missing_ok=True)
    cmd = [*(importer or [sys.executable, "-m", "localmem.cli"]), "--db", str(db), "ingest", stats.path, "--json"]
    cmd += ["--progress-every", str(progress_every)]
    load = [os.getloadavg()[0]]
    runs: list[ImportRun] = []
    if kill_at > 0:
        target = max(1, int(stats.turns * kill_at))
        log(f"importing; SIGKILL once {target:,} of {stats.turns:,} turns are stored")
        runs.append(_import(cmd, log, kill_when=lambda: _turns(db) >= target, time_limit=time_limit))
        log(f"killed after {runs[0].seconds:.1f} s with {_turns(db):,} turns stored; importing again")
    at_kill = _turns(db)
    if not runs or not runs[0].stopped:
        left = None if time_limit is None else max(time_limit - sum(r.seconds for r in runs), 1.0)
        runs.append(_import(cmd, log, time_limit=left))
    load.append(os.getloadavg()[0])
    return _result(stats, gen_s, db, runs, at_kill, load)


def _import(
    cmd: list[str], log: Log, kill_when: Callable[[], bool] | None = None, time_limit: float | None = None
) -> ImportRun:
    run = ImportRun()
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    reader = threading.Thread(target=_read_stderr, args=(proc.stderr, run, t0, log), daemon=True)
    reader.start()
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if kill_when is not None and not run.killed and kill_when():
            os.kill(proc.pid, signal.SIGKILL)
            run.killed = True
        elif time_limit is not None and not run.stopped and time.monotonic() - t0 > time_limit:
            log(f"time limit of {time_limit:.0f} s reached: stopping the import with SIGTERM (as Ctrl-C)")
            os.kill(proc.pid, signal.SIGTERM)  # not SIGINT: a background job started by a shell ignores it
            run.stopped = True
        time.sleep(0.25)
    run.seconds = time.monotonic() - t0
    proc.returncode = run.exit = os.waitstatus_to_exitcode(status)
    run.rss_mb = usage.ru_maxrss / 1024  # KiB on Linux
    run.cpu_s = usage.ru_utime + usage.ru_stime
    out = proc.stdout.read()
    reader.join(timeout=10)
    if not run.killed and not run.stopped:
        if run.exit != 0:
            raise RuntimeError(f"the import failed (exit {run.exit}): {''.join(run.stderr[-5:])}")
        run.summary = json.loads(out.strip().splitlines()[-1])
    return run


def _read_stderr(stream: Any, run: ImportRun, t0: float, log: Log) -> None:
    for line in stream:
        run.stderr.append(line)
        log("  " + line.rstrip())
        if m := _RESUMING.search(line):
            run.resumed_at_unit = int(m.group(1))
        if m := _LINE.match(line.strip()):
            eta = None if m.group(4) is None else int(m.group(4)) * 3600 + int(m.group(5)) * 60 + int(m.group(6))
            done, total = int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))
            run.progress.append((time.monotonic() - t0, done, total, float(m.group(3).replace(",", "")), eta))


def _turns(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            conn.set_busy_timeout(2000)
            return reads.count_turns(conn)
        finally:
            conn.close()
    except (apsw.SQLError, apsw.BusyError):  # no tables yet, or a checkpoint in the way: ask again later
        return 0


def _stored(db: Path) -> tuple[int, int]:
    """Turns stored, and how many of them repeat a (session, native id) already stored
    (0, 0 before the importer made the store: an import stopped that early)."""
    if not db.exists():
        return 0, 0
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        n, distinct = reads.turn_identities(conn)
    except apsw.SQLError:  # no tables yet
        return 0, 0
    finally:
        conn.close()
    return n, n - distinct


def _eta_check(run: ImportRun) -> dict[str, Any] | None:
    """The ETA shown once 10% of the run's turns were done, against the time it took."""
    if run.stopped:
        return None
    for t, done, total, _rate, eta in run.progress:
        if total and done >= 0.1 * total and eta is not None:
            return {
                "at_s": round(t, 1),
                "at_share": round(done / total, 3),
                "eta_s": eta,
                "actual_s": round(run.seconds - t, 1),
            }
    return None


def _result(
    stats: ExportStats, gen_s: float, db: Path, runs: list[ImportRun], at_kill: int, load: list[float]
) -> dict[str, Any]:
    stored, dupes = _stored(db)
    seconds = sum(r.seconds for r in runs)
    last = runs[-1]
    gaps = [b[0] - a[0] for r in runs for a, b in zip(r.progress, r.progress[1:], strict=False)]
    result: dict[str, Any] = {
        "generator": stats.generator,
        "messages": stats.messages,
        "conversations": stats.conversations,
        "file_mb": round(stats.bytes / 1e6, 1),
        "generate_s": round(gen_s, 1),
        "turns_expected": stats.turns,
        "turns_stored": stored,
        "duplicates": dupes,
        "seconds": round(seconds, 1),
        "turns_per_s": round(stored / seconds, 1) if seconds else 0.0,
        "peak_rss_mb": round(max(r.rss_mb for r in runs), 1),
        "cpu_s": round(sum(r.cpu_s for r in runs), 1),
        "cpu_ms_per_turn": round(1000 * sum(r.cpu_s for r in runs) / stored, 1) if stored else None,
        "progress_lines": sum(len(r.progress) for r in runs),
        "max_progress_gap_s": round(max(gaps), 1) if gaps else None,
        "eta_check": _eta_check(last),
        "load_avg_1m": [round(x, 2) for x in load],
        "complete": not last.stopped,
        "ok": dupes == 0 and (stored == stats.turns if not last.stopped else stored < stats.turns),
    }
    if last.stopped and last.progress:
        _t, _done, _total, rate, eta = last.progress[-1]
        result["last_rate_turns_per_s"] = rate  # the importer's own figure over its last two minutes
        result["projected_s"] = round(seconds + eta) if eta is not None else None
    if len(runs) == 2:
        first = runs[0]
        reread = int(last.summary.get("already_present", 0)) if not last.stopped else None
        if last.stopped and last.progress:  # the turns before the resume point = expected - what it planned
            reread = at_kill - (stats.turns - last.progress[0][2])
        resumed = last.resumed_at_unit if last.stopped else last.summary.get("resumed_at_unit")
        new = stored - at_kill if last.stopped else int(last.summary.get("new", 0))
        result["resume"] = {
            "killed_after_s": round(first.seconds, 1),
            "turns_at_kill": at_kill,
            "resumed_at_unit": resumed,
            "turns_read_again": reread,
            "new_turns": new,
            "second_run_s": round(last.seconds, 1),
            "ok": bool(resumed) and (reread or 0) <= 2 * BATCH_TURNS and at_kill + new == stored,
        }
        result["ok"] = result["ok"] and result["resume"]["ok"]
    return result


def table(r: dict[str, Any]) -> str:
    rows = [
        ("messages / conversations", f"{r['messages']:,} / {r['conversations']:,} ({r['file_mb']} MB)"),
        ("turns stored / expected", f"{r['turns_stored']:,} / {r['turns_expected']:,}, {r['duplicates']} duplicated"),
        ("import seconds", f"{r['seconds']:,.1f} ({r['turns_per_s']} turns/s)"),
    ]
    if not r["complete"]:
        rows.append(
            (
                "stopped at the time limit",
                f"last rate {r.get('last_rate_turns_per_s')} turns/s, projected total {r.get('projected_s')} s",
            )
        )
    rows += [
        ("importer peak RSS", f"{r['peak_rss_mb']} MB"),
        ("importer CPU", f"{r['cpu_s']:,.1f} s ({r['cpu_ms_per_turn']} ms a stored turn)"),
        ("progress lines", f"{r['progress_lines']} (longest gap {r['max_progress_gap_s']} s)"),
    ]
    if r.get("eta_check"):
        e = r["eta_check"]
        rows.append(("ETA at 10%", f"{e['eta_s']} s shown, {e['actual_s']} s taken"))
    if "resume" in r:
        s = r["resume"]
        rows.append(
            (
                "resume after SIGKILL",
                f"killed at {s['turns_at_kill']:,} turns after {s['killed_after_s']} s; resumed at unit "
                f"{s['resumed_at_unit']}, {s['turns_read_again']} turns read again, {s['new_turns']:,} new "
                f"in {s['second_run_s']} s",
            )
        )
    rows.append(("load average (1 min)", " -> ".join(str(x) for x in r["load_avg_1m"])))
    rows.append(("checks", "ok" if r["ok"] else "FAILED"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)
