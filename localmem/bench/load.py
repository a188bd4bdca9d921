"""``localmem bench load``: many real clients on one database file, for a bounded time.

What runs at once, each a real process on the same file:
- ``writers`` MCP servers over the stdio transport (the SDK's client), each sent
  ``remember`` calls of a few unique turns, back to back;
- ``readers`` MCP servers sent ``reconstruct`` calls;
- one ``localmem ingest`` of a generated JSONL file;
- one ``localmem watch`` of a folder into which files are dropped during the run.

Every turn text is unique, so afterwards the file itself says what happened: a turn a
server acknowledged (its ``remember`` returned ids) or that ingest / the watcher reported
stored and that is missing is *lost*; a text stored twice is *duplicated*. The report
also gives per-client accepted turns, accept latency p50/p99 and errors by kind, and
for the file: ``integrity_check``, ``foreign_key_check`` and the FTS / vector row
counts against the turn count. Everything stops by itself (``seconds``); nothing
leaves the machine (stdio pipes and a local file only).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from localmem.bench.preamble import child_env, create_store, localmem_cmd, mcp_server_cmd, working_folder
from localmem.storage.bench import reads
from localmem.storage.engine import db

if TYPE_CHECKING:
    from mcp import Client

QUERIES = ("what did the writer note about the sky", "which colour was mentioned", "ingested line about rivers")


@dataclass
class ClientReport:
    name: str
    kind: str  # writer / reader / ingest / watch
    calls: int = 0
    accepted: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    texts: list[str] = field(default_factory=list)  # acknowledged turn texts

    def row(self) -> dict[str, Any]:
        lat = np.array(self.latencies_ms) if self.latencies_ms else np.zeros(1)
        return {
            "client": self.name,
            "kind": self.kind,
            "calls": self.calls,
            "accepted_turns": self.accepted,
            "p50_ms": round(float(np.percentile(lat, 50)), 1),
            "p99_ms": round(float(np.percentile(lat, 99)), 1),
            "errors": dict(self.errors),
        }


def _server(dbfile: Path) -> Client:
    # lazy: the MCP SDK takes ~0.5 s to import; `localmem --help` imports this module
    from mcp import Client, StdioServerParameters

    cmd = mcp_server_cmd(dbfile)
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=child_env())
    return Client(params, read_timeout_seconds=120)


def _kind(exc: BaseException) -> str:
    text = str(exc).lower()
    for key in ("locked", "busy", "timeout", "closed"):
        if key in text:
            return key
    return type(exc).__name__


class Start:
    """The run's clock starts once every server has started (model load is not load)."""

    def __init__(self, clients: int, seconds: float) -> None:
        self.waiting, self.seconds, self.until = clients, seconds, 0.0
        self.go = anyio.Event()

    async def ready(self) -> float:
        self.waiting -= 1
        if self.waiting <= 0:
            self.until = time.monotonic() + self.seconds
            self.go.set()
        await self.go.wait()
        return self.until


async def _timed_call(c: Any, rep: ClientReport, tool: str, args: dict[str, Any]) -> bool:
    """One tool call, counted in ``rep``: its latency when it succeeds, its error by kind
    when it does not. True when the tool succeeded."""
    t0 = time.perf_counter()
    rep.calls += 1
    try:
        res = await c.call_tool(tool, args)
    except Exception as exc:
        rep.errors[_kind(exc)] += 1
        return False
    if res.is_error:
        rep.errors["tool error: " + str(res.content[0])[:60]] += 1
        return False
    rep.latencies_ms.append((time.perf_counter() - t0) * 1000)
    return True


async def _writer(dbfile: Path, rep: ClientReport, start: Start, per_call: int) -> None:
    async with _server(dbfile) as c:
        until = await start.ready()
        i = 0
        while time.monotonic() < until:
            texts = [f"{rep.name} note {i}.{j}: the sky was colour {j} over the harbour." for j in range(per_call)]
            turns = [{"text": t, "speaker": rep.name, "timestamp": "2024-05-01T10:00:00"} for t in texts]
            if await _timed_call(c, rep, "remember", {"turns": turns, "session": f"{rep.name}-{i}"}):
                rep.accepted += len(texts)
                rep.texts.extend(texts)
            i += 1


async def _reader(dbfile: Path, rep: ClientReport, start: Start) -> None:
    async with _server(dbfile) as c:
        until = await start.ready()
        i = 0
        while time.monotonic() < until:
            await _timed_call(c, rep, "reconstruct", {"query": QUERIES[i % len(QUERIES)], "budget_tokens": 500})
            i += 1


def _jsonl(path: Path, prefix: str, n: int) -> list[str]:
    texts = [f"{prefix} line {i}: the river rose {i} cm after the storm." for i in range(n)]
    with path.open("w", encoding="utf-8") as fh:
        for t in texts:
            fh.write(json.dumps({"text": t, "speaker": prefix, "timestamp": "2024-05-02T08:00:00"}) + "\n")
    return texts


async def _ingest(dbfile: Path, work: Path, rep: ClientReport, start: Start, turns: int) -> None:
    texts = _jsonl(work / "export.jsonl", "ingest", turns)
    await start.ready()
    t0 = time.perf_counter()
    rep.calls = 1
    proc = await anyio.run_process(localmem_cmd(dbfile, "ingest", str(work / "export.jsonl"), "--json"), check=False)
    rep.latencies_ms.append((time.perf_counter() - t0) * 1000)
    if proc.returncode == 0:
        rep.accepted, rep.texts = len(texts), texts
    else:
        rep.errors[f"exit {proc.returncode}: " + proc.stderr.decode(errors="replace").strip()[-80:]] += 1


async def _watch(dbfile: Path, work: Path, rep: ClientReport, start: Start, files: int) -> None:
    folder = work / "inbox"
    folder.mkdir()
    log = (work / "watch.err").open("w+", encoding="utf-8")  # a file: a full pipe would stall the watcher
    proc = subprocess.Popen(
        localmem_cmd(dbfile, "watch", str(folder), "--settle", "0.5"),
        env=child_env(),
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
    )
    try:
        until = await start.ready()
        gap = max((until - time.monotonic()) / (files + 1), 0.1)
        for k in range(files):
            await anyio.sleep(gap)
            rep.texts += _jsonl(folder / f"drop-{k}.jsonl", f"watch{k}", 20)
            rep.calls += 1
        # Ingested (or not) is decided from the file below; give the watcher time to settle.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _missing(dbfile, rep.texts):
            await anyio.sleep(0.5)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.seek(0)
        err = log.read()
        log.close()
    if proc.returncode not in (0, -15, 130, 143):
        rep.errors[f"watcher exit {proc.returncode}: {err.strip()[-80:]}"] += 1
    rep.accepted = len(rep.texts) - len(_missing(dbfile, rep.texts))


def _missing(dbfile: Path, texts: list[str]) -> list[str]:
    conn = db.connect(dbfile)
    try:
        have = reads.turn_text_counts(conn)
    finally:
        conn.close()
    return [t for t in texts if t not in have]


def _check(dbfile: Path, reports: list[ClientReport]) -> dict[str, Any]:
    conn = db.connect(dbfile)
    try:
        counts = reads.turn_text_counts(conn)
        acked = [t for r in reports if r.kind in ("writer", "ingest") for t in r.texts]
        turns = sum(counts.values())
        return {
            "turns": turns,
            "acknowledged": len(acked),
            "lost": sum(1 for t in acked if counts.get(t, 0) == 0),
            "duplicated": sum(n - 1 for n in counts.values() if n > 1),
            "watch_files_missing_turns": sum(len(_missing(dbfile, r.texts)) for r in reports if r.kind == "watch"),
            "reconstruct_failures": sum(sum(r.errors.values()) for r in reports if r.kind == "reader"),
            "integrity_check": reads.integrity_check(conn),
            "foreign_key_violations": reads.foreign_key_violations(conn),
            **asdict(reads.index_counts(conn)),
        }
    finally:
        conn.close()


def run(
    *,
    seconds: float = 30.0,
    writers: int = 4,
    readers: int = 2,
    ingest_turns: int = 3000,
    watch_files: int = 5,
    per_call: int = 3,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Run the load for ``seconds`` (plus start-up and the watcher's catch-up) and check the file."""
    with working_folder(workdir, "load") as work:
        dbfile = work / "load.db"
        create_store(dbfile)
        reports = [ClientReport(f"writer{i}", "writer") for i in range(writers)]
        reports += [ClientReport(f"reader{i}", "reader") for i in range(readers)]
        ing, wat = ClientReport("ingest", "ingest"), ClientReport("watch", "watch")
        reports += [ing, wat]

        async def main() -> None:
            start = Start(len(reports), seconds)
            async with anyio.create_task_group() as tg:
                for r in reports:
                    if r.kind == "writer":
                        tg.start_soon(_writer, dbfile, r, start, per_call)
                    elif r.kind == "reader":
                        tg.start_soon(_reader, dbfile, r, start)
                tg.start_soon(_ingest, dbfile, work, ing, start, ingest_turns)
                tg.start_soon(_watch, dbfile, work, wat, start, watch_files)

        started = time.perf_counter()
        anyio.run(main)
        overall = _check(dbfile, reports)
        overall["seconds"] = round(time.perf_counter() - started, 1)
        return {"clients": [r.row() for r in reports], "overall": overall}


def print_report(result: dict[str, Any]) -> None:
    cols = ("client", "kind", "calls", "accepted_turns", "p50_ms", "p99_ms", "errors")
    print(" | ".join(f"{c:>14}" for c in cols))
    print("-" * (17 * len(cols)))
    for row in result["clients"]:
        print(" | ".join(f"{(json.dumps(row[c]) if c == 'errors' else row[c])!s:>14}" for c in cols))
    print()
    for key, value in result["overall"].items():
        print(f"{key:>28}: {value}")
