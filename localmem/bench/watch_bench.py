"""``localmem bench watch``: a Claude Code transcript (or, ``client="vscode"``, a VS Code
chat-session log whose folder is made after the watcher started) appended to N times while
a real ``localmem watch`` process (the agents' folders mode, real watchdog events) follows it.

Each append writes one record, as Claude Code does; every tenth record is written in
two pieces with a pause between (a line caught half-written). When the last record is
written the bench waits until the watcher has stored every turn, stops it (SIGINT), and
compares the store with what one complete read of the final file gives: every turn
once (missing, duplicated), in order (turns out of place), and reports the reads the
watcher made, the time the appends took and the lag from the last append to the last
turn stored (which includes ``--final-after``: the agent's last step is held until the
log has been quiet that long).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import apsw

from localmem.bench import agent_logs
from localmem.storage.bench import reads

SESSION = "7d3f1e2a-9c4b-4a8d-b1e2-3f4a5b6c7d8e"
CWD = "/home/dev/bench-app"


def _events(proc: subprocess.Popen[str], out: list[dict[str, Any]]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue


def _wait(pred: Any, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    while not pred():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"gave up waiting for {what} after {timeout:.0f} s")
        time.sleep(0.05)
    return time.monotonic() - t0


def run(
    work: Path,
    appends: int = 1000,
    interval: float = 0.01,
    final_after: float = 2.0,
    timeout: float = 300,
    client: str = "claude-code",
) -> dict[str, Any]:
    """About ``appends`` writes (whole exchanges of five records, every tenth record in two
    writes) at ``interval`` seconds, and measure."""
    exchanges = max(1, round(appends / 5.5))
    top = work / client
    if client == "vscode":  # its folder is made once the watcher runs: it must find it
        folder = top / "workspaceStorage" / "b3nch" / "chatSessions"
        log = folder / f"{SESSION}.jsonl"
        lines = list(agent_logs.vscode_log(SESSION, exchanges))
        expected = agent_logs.vscode_expected_turns(exchanges)
    else:
        folder = top / "-home-dev-bench-app"
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / f"{SESSION}.jsonl"
        log.write_text("", "utf-8")
        lines = list(agent_logs.transcript(SESSION, CWD, exchanges))
        expected = agent_logs.expected_turns(exchanges)
    db = work / "watch.db"
    cmd = [sys.executable, "-m", "localmem", "--db", str(db), "watch", "--only", client]
    cmd += ["--dir", f"{client}={top}", "--json", "--final-after", str(final_after)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("LOCALMEM_MODEL", None)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    events: list[dict[str, Any]] = []
    reader = threading.Thread(target=_events, args=(proc, events), daemon=True)
    reader.start()
    try:
        _wait(lambda: any(e.get("event") == "started" for e in events), 120, "the watcher to start")
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        with log.open("a", encoding="utf-8") as fh:
            for n, line in enumerate(lines):
                if n % 10 == 9:  # a line caught half-written
                    half = len(line) // 2
                    fh.write(line[:half])
                    fh.flush()
                    time.sleep(interval)
                    fh.write(line[half:] + "\n")
                else:
                    fh.write(line + "\n")
                fh.flush()
                time.sleep(interval)
        append_s = time.monotonic() - t0

        def stored() -> int:
            return sum(int(e.get("report", {}).get("new", 0)) for e in events if e.get("event") == "ingested")

        lag = _wait(lambda: stored() >= len(expected), timeout, "every turn to be stored")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        got = [t.text for t in reads.turn_texts(conn)]
    finally:
        conn.close()
    placed = [t for t in got if t in set(expected)]
    in_order = sum(1 for a, b in zip(placed, expected, strict=False) if a == b)
    return {
        "client": client,
        "appends": len(lines) + len(lines) // 10,
        "records": len(lines),
        "turns_expected": len(expected),
        "turns_stored": len(got),
        "missing": len(set(expected) - set(got)),
        "duplicated": len(got) - len(set(got)),
        "unexpected": len(set(got) - set(expected)),
        "out_of_order": len(placed) - in_order,
        "reads": sum(1 for e in events if e.get("event") == "ingested"),
        "append_s": round(append_s, 2),
        "lag_s": round(lag, 2),
        "final_after_s": final_after,
        "exit_code": proc.returncode,
    }
